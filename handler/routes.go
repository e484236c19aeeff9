package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/mirror"
)

// Binding names from the function.json files under functions/.
const (
	timerBinding = "timer"
	reqBinding   = "req"
	resBinding   = "res"
)

// maxInvocationBytes bounds an invocation body from the host.
const maxInvocationBytes = 1 << 20

// newServer returns the echo server with the host's routes: GET / for the
// readiness probe and POST /<FunctionName> for each function.
func newServer(a *app) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.POST("/MirrorTimer", a.mirrorTimer)
	e.POST("/CatchUp", a.catchUp)
	e.POST("/Status", a.status)
	return e
}

// respond writes an invocation response with secrets redacted.
func (a *app) respond(c echo.Context, status int, resp functions.Response) error {
	body, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encoding invocation response: %w", err)
	}
	return c.Blob(status, functions.ResponseContentType, []byte(a.redactor.Redact(string(body))))
}

// respondHTTP answers an HTTP-triggered invocation: the invocation succeeds
// (200) and its res output carries status and JSON body.
func (a *app) respondHTTP(c echo.Context, status int, v any, logs ...string) error {
	out, err := functions.JSONOutput(status, v)
	if err != nil {
		return err
	}
	return a.respond(c, http.StatusOK, functions.HTTPResponse(resBinding, out, logs...))
}

// decodeHTTP reads the HTTP trigger data of an invocation.
func decodeHTTP(c echo.Context) (functions.HTTPRequest, error) {
	inv, err := functions.DecodeInvocation(c.Request().Body, maxInvocationBytes)
	if err != nil {
		return functions.HTTPRequest{}, err
	}
	return inv.HTTP(reqBinding)
}

// badInvocation answers a malformed invocation body: 400 with the reason.
func (a *app) badInvocation(c echo.Context, err error) error {
	a.logger.Warn("malformed invocation", "function", c.Path(), "err", err)
	return a.respond(c, http.StatusBadRequest, functions.NewResponse(err.Error()))
}

func (a *app) problemLines() []string {
	lines := make([]string, len(a.problems))
	for i, p := range a.problems {
		lines[i] = "setting problem: " + p.String()
	}
	return lines
}

// mirrorTimer runs one bounded drain. The invocation fails (500) only when
// records could not be mirrored; the report is returned as Logs either way
// and also logged, because the host drops Logs of a failed invocation.
func (a *app) mirrorTimer(c echo.Context) error {
	var timer functions.Timer
	inv, err := functions.DecodeInvocation(c.Request().Body, maxInvocationBytes)
	if err == nil {
		timer, err = inv.Timer(timerBinding)
	}
	if err != nil {
		return a.badInvocation(c, err)
	}
	if len(a.problems) > 0 {
		lines := a.problemLines()
		for _, l := range lines {
			a.logger.Error(l)
		}
		return a.respond(c, http.StatusInternalServerError, functions.NewResponse(lines...))
	}
	run := "timer"
	if timer.IsPastDue {
		run = "timer (past due)"
	}
	until := followUntil(a.settings.Follow, a.settings.Schedule, timer, time.Now())
	rep, err := a.service.DrainFollowing(c.Request().Context(), run, until)
	lines := rep.Lines()
	for _, l := range lines {
		a.logger.Info(l)
	}
	status := http.StatusOK
	if err != nil || rep.Failed() {
		status = http.StatusInternalServerError
		a.logger.Error("drain left records unmirrored", "run", run, "summary", rep.Summary())
	}
	return a.respond(c, status, functions.NewResponse(lines...))
}

// catchUpBody is the optional JSON body of POST /api/catchup.
type catchUpBody struct {
	// Topics is a regular expression narrowing the catch-up.
	Topics string `json:"topics"`
	// MaxDuration is a Go duration such as "5m"; default and maximum
	// MIRROR_CATCHUP_MAX_DURATION.
	MaxDuration string `json:"max_duration"`
}

// parseCatchUpBody reads the request body; an empty body selects defaults.
func parseCatchUpBody(body string, limit time.Duration) (mirror.CatchUpRequest, error) {
	req := mirror.CatchUpRequest{MaxDuration: limit}
	if strings.TrimSpace(body) == "" {
		return req, nil
	}
	var b catchUpBody
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return req, fmt.Errorf("body: want a JSON object like {\"topics\":\"prod\\\\..*\",\"max_duration\":\"5m\"}: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, errors.New("body: want a single JSON object")
	}
	if b.Topics != "" {
		f, err := mirror.CompileTopicFilter(b.Topics, "")
		if err != nil {
			return req, fmt.Errorf("body: topics: %v", err)
		}
		req.Topics, req.TopicsPattern = &f, b.Topics
	}
	if b.MaxDuration != "" {
		d, err := time.ParseDuration(b.MaxDuration)
		if err != nil || d <= 0 {
			return req, fmt.Errorf("body: max_duration %q: want a positive duration such as 5m", b.MaxDuration)
		}
		if d > limit {
			return req, fmt.Errorf("body: max_duration %s exceeds %s (%s)", d, config.MirrorCatchUpDuration, limit)
		}
		req.MaxDuration = d
	}
	return req, nil
}

// catchUp starts a background catch-up, or returns the active one.
func (a *app) catchUp(c echo.Context) error {
	req, err := decodeHTTP(c)
	if err != nil {
		return a.badInvocation(c, err)
	}
	if len(a.problems) > 0 {
		return a.respondHTTP(c, http.StatusServiceUnavailable, map[string]any{"error": "invalid settings", "problems": a.problems}, a.problemLines()...)
	}
	cr, err := parseCatchUpBody(req.Body, a.settings.CatchUpMaxDuration)
	if err != nil {
		return a.respondHTTP(c, http.StatusBadRequest, map[string]string{"error": err.Error()}, "catch-up refused: "+err.Error())
	}
	st, started, err := a.service.StartCatchUp(cr)
	if err != nil {
		return a.respondHTTP(c, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	}
	statusURL := statusURLFor(req.URL, st.ID)
	status, msg := http.StatusAccepted, "catch-up "+st.ID+" started"
	if !started {
		status, msg = http.StatusOK, "catch-up "+st.ID+" already running"
	}
	out, err := functions.JSONOutput(status, map[string]any{"id": st.ID, "started": started, "status_url": statusURL, "run": st})
	if err != nil {
		return err
	}
	out.Headers["Location"] = statusURL
	return a.respond(c, http.StatusOK, functions.HTTPResponse(resBinding, out, msg))
}

// statusURLFor returns the status URL of run id next to the catch-up URL.
func statusURLFor(catchUpURL, id string) string {
	u, err := url.Parse(catchUpURL)
	if err != nil || u.Host == "" {
		return "/api/status?run=" + url.QueryEscape(id)
	}
	path := u.Path
	if i := strings.LastIndex(path, "/"); i >= 0 {
		path = path[:i+1]
	} else {
		path = "/"
	}
	q := url.Values{"run": {id}}
	if code := u.Query().Get("code"); code != "" {
		q.Set("code", code)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: path + "status", RawQuery: q.Encode()}).String()
}

// statusBody is the JSON of GET /api/status.
type statusBody struct {
	Time     time.Time              `json:"time"`
	OK       bool                   `json:"ok"`
	Problems []config.Problem       `json:"problems"`
	Config   map[string]string      `json:"config"`
	Lag      *mirror.LagReport      `json:"lag,omitempty"`
	LagError string                 `json:"lag_error,omitempty"`
	CatchUp  *mirror.CatchUpStatus  `json:"catch_up,omitempty"`
	Run      *mirror.CatchUpStatus  `json:"run,omitempty"`
	CatchUps []mirror.CatchUpStatus `json:"catch_ups,omitempty"`
	Drains   []*mirror.Report       `json:"last_drains"`
}

// status reports lag per partition, recent drains, catch-ups, problems and
// the redacted configuration.
func (a *app) status(c echo.Context) error {
	req, err := decodeHTTP(c)
	if err != nil {
		return a.badInvocation(c, err)
	}
	body := statusBody{Time: time.Now(), Problems: a.problems, Config: a.settings.Summary(), Drains: []*mirror.Report{}}
	if body.Problems == nil {
		body.Problems = config.Problems{}
	}
	if len(a.problems) > 0 {
		return a.respondHTTP(c, http.StatusServiceUnavailable, body, a.problemLines()...)
	}
	lag, err := a.service.Mirror().Lag(c.Request().Context(), nil)
	if err != nil {
		body.LagError = err.Error()
	}
	body.Lag = lag
	if st, ok := a.service.ActiveCatchUp(); ok {
		body.CatchUp = &st
	}
	if id := req.Query["run"]; id != "" {
		st, ok := a.service.CatchUp(id)
		if !ok {
			return a.respondHTTP(c, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no catch-up run %q in this process", id)})
		}
		body.Run = &st
	}
	body.CatchUps = a.service.CatchUps()
	if reports := a.service.Reports(); len(reports) > 0 {
		body.Drains = reports
	}
	body.OK = err == nil
	status := http.StatusOK
	if err != nil {
		status = http.StatusServiceUnavailable
	}
	return a.respondHTTP(c, status, body)
}
