package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/funchost"
)

// Function names of the app (functions/<Name>/function.json).
const (
	timerFunction = "MirrorTimer"
)

// app is the function app running under the local Functions host, with the
// host's HTTP front end on a loopback port.
type app struct {
	host   *funchost.Host
	server *http.Server
	base   string // http://127.0.0.1:PORT
	key    string // a function key
	client *http.Client
}

// startApp starts the handler of appDir through the local host (it waits
// for the readiness probe) and serves the host's front end.
func startApp(ctx context.Context, appDir string, settings map[string]string, logs io.Writer) (*app, error) {
	h, err := funchost.New(appDir, funchost.Options{
		Settings: settings,
		Stdout:   logs,
		Stderr:   logs,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		return nil, err
	}
	if errs := h.FunctionErrors(); len(errs) > 0 {
		return nil, fmt.Errorf("the host could not index every function: %v", errs)
	}
	if err := h.Start(ctx); err != nil {
		h.Stop()
		return nil, fmt.Errorf("starting the handler: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Stop()
		return nil, fmt.Errorf("listening for the host's front end: %w", err)
	}
	a := &app{
		host:   h,
		server: &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second},
		base:   "http://" + ln.Addr().String(),
		key:    h.Keys().DefaultKey(),
		client: &http.Client{Timeout: time.Minute},
	}
	go a.server.Serve(ln)
	return a, nil
}

// stop interrupts the handler (SIGINT, so it commits what Event Hubs
// acknowledged), waits up to 15 s, and stops the front end.
func (a *app) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := a.host.Interrupt(ctx)
	if serr := a.server.Shutdown(ctx); serr != nil && err == nil {
		err = serr
	}
	return err
}

// fireTimer invokes MirrorTimer now, as its schedule would, and returns the
// drain's summary line.
func (a *app) fireTimer(ctx context.Context) (string, error) {
	res, err := a.host.InvokeTimer(ctx, timerFunction, funchost.TimerInvocation{})
	if err != nil {
		return "", err
	}
	if res.Err != nil {
		lines := strings.Join(res.DroppedLogs, "; ")
		return "", fmt.Errorf("%s failed: %w: %s", timerFunction, res.Err, lines)
	}
	if len(res.Logs) == 0 {
		return "(no report)", nil
	}
	return res.Logs[0], nil
}

// statusView is the part of GET /api/status the demo reads.
type statusView struct {
	OK       bool `json:"ok"`
	Problems []struct {
		Setting string `json:"setting"`
		Message string `json:"message"`
	} `json:"problems"`
	Lag *struct {
		Total int64 `json:"total"`
	} `json:"lag"`
	LagError string       `json:"lag_error"`
	Run      *catchUpView `json:"run"`
	// KafkaAuth is the Kafka SASL mechanism, principal and token expiry.
	KafkaAuth *struct {
		Mechanism   string    `json:"mechanism"`
		Principal   string    `json:"principal"`
		TokenExpiry time.Time `json:"token_expiry"`
		LastError   string    `json:"last_error"`
	} `json:"kafka_auth"`
}

// catchUpView is a catch-up run's status.
type catchUpView struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Drains    int    `json:"drains"`
	Records   int64  `json:"records"`
	Lag       int64  `json:"lag"`
	LastError string `json:"last_error"`
}

// status calls GET /api/status (or the given status URL) with the key.
func (a *app) status(ctx context.Context, statusURL string) (*statusView, error) {
	if statusURL == "" {
		statusURL = a.base + "/api/status"
	}
	var st statusView
	code, err := a.call(ctx, http.MethodGet, statusURL, &st)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		var why []string
		for _, p := range st.Problems {
			why = append(why, p.Setting+": "+p.Message)
		}
		if st.LagError != "" {
			why = append(why, st.LagError)
		}
		return nil, fmt.Errorf("GET /api/status: %d %s", code, strings.Join(why, "; "))
	}
	return &st, nil
}

// lag returns the consumer group's total lag from GET /api/status.
func (a *app) lag(ctx context.Context) (int64, error) {
	st, err := a.status(ctx, "")
	if err != nil {
		return 0, err
	}
	if st.Lag == nil {
		return 0, errors.New("GET /api/status: no lag in the answer")
	}
	return st.Lag.Total, nil
}

// startCatchUp calls POST /api/catchup and returns the run's status URL.
func (a *app) startCatchUp(ctx context.Context) (id, statusURL string, err error) {
	var res struct {
		ID        string `json:"id"`
		StatusURL string `json:"status_url"`
		Error     string `json:"error"`
	}
	code, err := a.call(ctx, http.MethodPost, a.base+"/api/catchup", &res)
	if err != nil {
		return "", "", err
	}
	if code != http.StatusAccepted && code != http.StatusOK {
		return "", "", fmt.Errorf("POST /api/catchup: %d %s", code, res.Error)
	}
	u, err := url.Parse(a.base)
	if err != nil {
		return "", "", err
	}
	ref, err := url.Parse(res.StatusURL)
	if err != nil {
		return "", "", fmt.Errorf("POST /api/catchup: status_url %q: %w", res.StatusURL, err)
	}
	return res.ID, u.ResolveReference(ref).String(), nil
}

// call sends a request with the function key and decodes the JSON answer.
func (a *app) call(ctx context.Context, method, rawURL string, v any) (int, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return 0, err
	}
	// The key goes in a header, so that it appears in no URL or error.
	req.Header.Set("x-functions-key", a.key)
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, u.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, u.Path, err)
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, v); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d, not JSON: %.200s", method, u.Path, resp.StatusCode, body)
		}
	}
	return resp.StatusCode, nil
}
