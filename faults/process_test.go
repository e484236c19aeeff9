package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/functions/appbuild"
	"github.com/ehmirror/ehmirror/mirror"
)

// The process scenarios (4, 5, 6a, 8, 9, the soak) run the real handler
// binary under the project's local Functions host (funchost), which
// starts it, probes it, sends it the host's invocation envelopes, serves the
// HTTP functions with function keys, and kills it with SIGKILL as the
// platform does.

// Function names of the app (functions/<Name>/function.json).
const (
	timerFunction   = "MirrorTimer"
	catchUpFunction = "CatchUp"
	statusFunction  = "Status"
)

// appFolder is the temporary folder in which TestMain lays out the function
// app once per test binary, the way `make build` does (host.json, the
// function folders and the handler built from ./handler), under app/.
type appFolder struct {
	dir string
	err error
}

// builtApp is set once by TestMain, before any test runs, and only read
// afterwards.
var builtApp appFolder

// TestMain builds the function app once for every process scenario.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ehmirror-faults-app-")
	if err == nil {
		err = buildApp(context.Background(), dir)
	}
	builtApp = appFolder{dir: dir, err: err}
	code := m.Run()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// buildApp lays out the function app in dir as `make build` does
// (functions/appbuild), bounded to five minutes.
func buildApp(ctx context.Context, dir string) error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	root, err := appbuild.ModuleRoot(wd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := appbuild.Build(ctx, root, filepath.Join(dir, "app")); err != nil {
		return fmt.Errorf("building the function app: %w", err)
	}
	return nil
}

// appDir returns the function app folder, failing the test when TestMain
// could not build it.
func appDir(t testing.TB) string {
	t.Helper()
	if builtApp.err != nil {
		t.Fatalf("building the function app: %v", builtApp.err)
	}
	return filepath.Join(builtApp.dir, "app")
}

// output collects a handler's stdout and stderr, as the host captures them.
type output struct {
	mu             sync.Mutex
	stdout, stderr bytes.Buffer
}

type outputWriter struct {
	o      *output
	stderr bool
}

func (w outputWriter) Write(p []byte) (int, error) {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	if w.stderr {
		return w.o.stderr.Write(p)
	}
	return w.o.stdout.Write(p)
}

// Stdout and Stderr return what the handler wrote so far.
func (o *output) Stdout() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stdout.String()
}

func (o *output) Stderr() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stderr.String()
}

// handler is one function app under the local Functions host: the real
// handler process, and the host's HTTP front end on a loopback port.
type handler struct {
	t        testing.TB
	e        *env // nil when the handler has no scenario world
	name     string
	host     *funchost.Host
	front    *httptest.Server
	out      *output
	key      string
	settings map[string]string

	mu      sync.Mutex
	results []*funchost.Result // every invocation, for the secret search
	bodies  []string           // every HTTP response body, likewise
}

// handlerSettings are the app settings of a handler mirroring e's world,
// with overrides applied (an empty override value removes the setting).
func (e *env) handlerSettings(overrides map[string]string) map[string]string {
	s := map[string]string{
		"FUNCTIONS_WORKER_RUNTIME": "custom",
		config.KafkaBrokers:        strings.Join(e.brokers(), ","),
		config.KafkaGroup:          e.group,
		config.EventHubsConnection: e.eventHubsConnection(),
		// The tests fire the timer themselves; the schedule only has to
		// be valid.
		config.MirrorSchedule:    "0 0 0 1 1 *",
		config.MirrorMaxDuration: "30s",
		// The scenarios kill handlers: the broker's minimum session hands
		// a killed handler's partitions over in seconds, not the
		// product's default 30 s.
		config.KafkaSessionTimeout: "6s",
	}
	for k, v := range overrides {
		if v == "" {
			delete(s, k)
			continue
		}
		s[k] = v
	}
	return s
}

// startHandler starts a handler for e's world.
func (e *env) startHandler(name string, overrides map[string]string) *handler {
	e.t.Helper()
	h := startHandler(e.t, name, e.handlerSettings(overrides))
	h.e = e
	return h
}

// startHandler starts the built handler with settings under a local
// Functions host and serves the host's front end. Both stop with the test.
func startHandler(t testing.TB, name string, settings map[string]string) *handler {
	t.Helper()
	h, err := newHandler(t, name, settings)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// startHandlerWith is e.startHandler with the host's options changed by
// opt (e.g. a Storage shared with another instance).
func (e *env) startHandlerWith(name string, overrides map[string]string, opt func(*funchost.Options)) *handler {
	e.t.Helper()
	h, err := newHandler(e.t, name, e.handlerSettings(overrides), opt)
	if err != nil {
		e.t.Fatal(err)
	}
	h.e = e
	return h
}

// newHandler is startHandler returning its error; opts change the host's
// options.
func newHandler(t testing.TB, name string, settings map[string]string, opts ...func(*funchost.Options)) (*handler, error) {
	dir := appDir(t)
	h := &handler{t: t, name: name, out: &output{}, settings: settings}
	hostOpts := funchost.Options{
		Settings: settings,
		// Only what the handler needs from the test's environment: no
		// secrets of the machine, and nothing that changes its behavior.
		Environ:  []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
		Stdout:   outputWriter{o: h.out},
		Stderr:   outputWriter{o: h.out, stderr: true},
		Logger:   componentLogger("funchost-" + name),
		OnResult: h.keep,
	}
	for _, opt := range opts {
		opt(&hostOpts)
	}
	host, err := funchost.New(dir, hostOpts)
	if err != nil {
		return nil, fmt.Errorf("handler %s: %w", name, err)
	}
	h.host = host
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := host.Start(ctx); err != nil {
		_ = host.Stop()
		return nil, fmt.Errorf("handler %s: start: %w\nstderr: %s", name, err, h.out.Stderr())
	}
	t.Cleanup(func() { _ = host.Stop() })
	h.front = httptest.NewServer(host.Handler())
	t.Cleanup(h.front.Close)
	h.key = host.Keys().DefaultKey()
	return h, nil
}

func (h *handler) keep(res *funchost.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.results = append(h.results, res)
}

// everything returns every byte the handler produced so far that an
// operator or client could see: stdout, stderr, every invocation response
// (bodies, logs, dropped logs) and every HTTP response body.
func (h *handler) everything() string {
	var b strings.Builder
	b.WriteString(h.out.Stdout())
	b.WriteString(h.out.Stderr())
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.results {
		b.Write(r.Body)
		b.WriteString(strings.Join(r.Logs, "\n"))
		b.WriteString(strings.Join(r.DroppedLogs, "\n"))
		if r.Err != nil {
			b.WriteString(r.Err.Error())
		}
	}
	for _, body := range h.bodies {
		b.WriteString(body)
	}
	return b.String()
}

// waitOutput waits until the handler's stdout or stderr contains s, up to
// timeout: the host copies the handler's output lines asynchronously.
func (h *handler) waitOutput(ctx context.Context, s string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if strings.Contains(h.out.Stdout(), s) || strings.Contains(h.out.Stderr(), s) {
			return true
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return false
		}
	}
}

// alive reports whether the host still runs and its handler process is the
// one with pid.
func (h *handler) alive(pid int) bool {
	select {
	case <-h.host.Done():
		return false
	default:
	}
	return h.host.PID() == pid
}

// summaryRE reads a drain summary line (mirror.Report.Summary).
var summaryRE = regexp.MustCompile(`drain: (\d+) records .* stopped: ([a-z ]+)`)

// reportLines returns the drain report of a timer invocation: Logs when it
// succeeded, the Logs the host dropped when it failed.
func reportLines(res *funchost.Result) []string {
	if res == nil {
		return nil
	}
	if len(res.Logs) > 0 {
		return res.Logs
	}
	return res.DroppedLogs
}

// drainSummary returns the records mirrored and why the drain of a timer
// invocation stopped; ok is false when the invocation carries no report.
func drainSummary(res *funchost.Result) (records int64, stopped string, ok bool) {
	lines := reportLines(res)
	if len(lines) == 0 {
		return 0, "", false
	}
	m := summaryRE.FindStringSubmatch(lines[0])
	if m == nil {
		return 0, "", false
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n, strings.TrimSpace(m[2]), true
}

// invokeTimer fires MirrorTimer once.
func (h *handler) invokeTimer(ctx context.Context) (*funchost.Result, error) {
	res, err := h.host.InvokeTimer(ctx, timerFunction, funchost.TimerInvocation{})
	if err != nil {
		return nil, fmt.Errorf("handler %s: %w", h.name, err)
	}
	return res, nil
}

// timer fires MirrorTimer once, accounted in the duplicate ledger: the
// invocation is faulted when it failed or its drain ended by a rebalance or
// a cancellation. concurrent marks invocations that run alongside other
// drains of the group, which are always counted as faulted.
func (h *handler) timer(ctx context.Context, concurrent bool) (*funchost.Result, error) {
	var res *funchost.Result
	err := h.e.accounted(func() (bool, error) {
		var err error
		res, err = h.invokeTimer(ctx)
		if err != nil {
			return true, err
		}
		_, stopped, ok := drainSummary(res)
		faulted := concurrent || !res.Succeeded() || !ok || stopped == mirror.StopRebalanced || stopped == mirror.StopCanceled
		h.e.log.Info("timer invocation", "handler", h.name, "ok", res.Succeeded(), "report", strings.Join(reportLines(res), " | "))
		return faulted, nil
	})
	return res, err
}

// call sends a request to the host's front end; withKey adds the default
// function key as ?code=. It returns the status and the body.
func (h *handler) call(ctx context.Context, method, path, body string, withKey bool) (int, []byte, error) {
	url := h.front.URL + path
	if withKey {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		url += sep + "code=" + h.key
	}
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, fmt.Errorf("request %s %s: %w", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: reading the body: %w", method, path, err)
	}
	h.mu.Lock()
	h.bodies = append(h.bodies, string(raw))
	h.mu.Unlock()
	return resp.StatusCode, raw, nil
}

// statusView is GET /api/status as the handler writes it.
type statusView struct {
	OK       bool                   `json:"ok"`
	Problems []config.Problem       `json:"problems"`
	Config   map[string]string      `json:"config"`
	Lag      *mirror.LagReport      `json:"lag"`
	LagError string                 `json:"lag_error"`
	CatchUp  *mirror.CatchUpStatus  `json:"catch_up"`
	Run      *mirror.CatchUpStatus  `json:"run"`
	CatchUps []mirror.CatchUpStatus `json:"catch_ups"`
	Drains   []*mirror.Report       `json:"last_drains"`
	Running  []mirror.RunningDrain  `json:"running"`
	Error    string                 `json:"error"`
}

// status reads GET /api/status (with ?run=id when id is set).
func (h *handler) status(ctx context.Context, run string) (int, statusView, error) {
	path := "/api/status"
	if run != "" {
		path += "?run=" + run
	}
	code, raw, err := h.call(ctx, http.MethodGet, path, "", true)
	var st statusView
	if err != nil {
		return code, st, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return code, st, fmt.Errorf("status body %.200q: %w", raw, err)
	}
	return code, st, nil
}

// catchUpView is the answer of POST /api/catchup.
type catchUpView struct {
	ID        string               `json:"id"`
	Started   bool                 `json:"started"`
	StatusURL string               `json:"status_url"`
	Run       mirror.CatchUpStatus `json:"run"`
	Error     string               `json:"error"`
}

// startCatchUp posts a catch-up request through the front end.
func (h *handler) startCatchUp(ctx context.Context, body string) (int, catchUpView, error) {
	code, raw, err := h.call(ctx, http.MethodPost, "/api/catchup", body, true)
	var cu catchUpView
	if err != nil {
		return code, cu, err
	}
	if err := json.Unmarshal(raw, &cu); err != nil {
		return code, cu, fmt.Errorf("catch-up body %.200q: %w", raw, err)
	}
	return code, cu, nil
}

// waitCatchUp polls the status of catch-up run id until it is no longer
// running, or ctx ends, passing every status read to the optional watch
// functions.
func (h *handler) waitCatchUp(ctx context.Context, id string, watch ...func(mirror.CatchUpStatus)) (mirror.CatchUpStatus, error) {
	for {
		code, st, err := h.status(ctx, id)
		if err == nil && code == http.StatusOK && st.Run != nil {
			for _, w := range watch {
				w(*st.Run)
			}
			if st.Run.State != mirror.CatchUpRunning {
				return *st.Run, nil
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			if err == nil {
				err = fmt.Errorf("status %d", code)
			}
			return mirror.CatchUpStatus{}, fmt.Errorf("catch-up %s did not finish: %w (last: %w)", id, ctx.Err(), err)
		}
	}
}

// settle fires the timer until the group has no lag (read through the
// status function) after a successful invocation, or the deadline passes.
func (h *handler) settle(ctx context.Context) {
	h.t.Helper()
	h.e.emu.Faults().Reset()
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	var last *funchost.Result
	for ctx.Err() == nil {
		res, err := h.timer(ctx, false)
		if err != nil {
			h.t.Fatalf("settling: %v", err)
		}
		last = res
		code, st, err := h.status(ctx, "")
		if err == nil && code == http.StatusOK && res.Succeeded() && st.Lag != nil && st.Lag.Total == 0 {
			return
		}
		if n, _, _ := drainSummary(res); n == 0 {
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}
	h.t.Errorf("handler %s did not catch up: last invocation %v: %s", h.name, errOf(last), strings.Join(reportLines(last), "\n"))
}

func errOf(res *funchost.Result) error {
	if res == nil {
		return errors.New("none")
	}
	return res.Err
}
