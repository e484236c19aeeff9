package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/functions/ncrontab"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/metrics"
	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/statuspage"
)

// Binding names from the function.json files under functions/.
const (
	timerBinding = "timer"
	reqBinding   = "req"
	resBinding   = "res"
)

// maxRequestBodyBytes bounds the body of an HTTP request to a function; a
// larger one gets 413.
const maxRequestBodyBytes = 1 << 20

// maxInvocationBytes bounds an invocation body from the host: the request
// body travels inside it as a JSON string, which escaping may make up to
// six times larger.
const maxInvocationBytes = 6*maxRequestBodyBytes + 64<<10

// maxTimerInvocationBytes bounds a timer invocation (a few hundred bytes
// in practice).
const maxTimerInvocationBytes = 1 << 20

// errBodyTooLarge is an HTTP request body over maxRequestBodyBytes.
var errBodyTooLarge = fmt.Errorf("request body larger than %d bytes (1 MiB)", maxRequestBodyBytes)

// newServer returns the echo server with the host's routes: GET / for the
// readiness probe and POST /<FunctionName> for each function.
func newServer(a *app) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.POST("/MirrorTimer", a.mirrorTimer)
	e.POST("/CatchUp", a.catchUp)
	e.POST("/Status", a.status)
	e.POST("/Offsets", a.offsets)
	e.POST("/Pause", a.pause)
	e.POST("/Resume", a.resume)
	e.POST("/Cutover", a.cutoverRoute)
	e.POST("/Metrics", a.metricsText)
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

// decodeHTTP reads the HTTP trigger data of an invocation; a request body
// over maxRequestBodyBytes gives errBodyTooLarge.
func decodeHTTP(c echo.Context) (functions.HTTPRequest, error) {
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, maxInvocationBytes+1))
	if err != nil {
		return functions.HTTPRequest{}, fmt.Errorf("invocation body: read: %w", err)
	}
	if len(raw) > maxInvocationBytes {
		return functions.HTTPRequest{}, errBodyTooLarge
	}
	inv, err := functions.ParseInvocation(raw)
	if err != nil {
		return functions.HTTPRequest{}, err
	}
	req, err := inv.HTTP(reqBinding)
	if err == nil && len(req.Body) > maxRequestBodyBytes {
		return req, errBodyTooLarge
	}
	return req, err
}

// httpRequest decodes an HTTP-triggered invocation. When it cannot, it
// answers (413 through the res binding for an oversized body, with the
// invocation itself successful; 400 for a malformed invocation) and ok is
// false.
func (a *app) httpRequest(c echo.Context) (req functions.HTTPRequest, ok bool, err error) {
	req, err = decodeHTTP(c)
	switch {
	case errors.Is(err, errBodyTooLarge):
		msg := c.Path()[1:] + " refused: " + err.Error()
		a.logger.Warn(msg)
		return req, false, a.respondHTTP(c, http.StatusRequestEntityTooLarge, map[string]string{"error": err.Error()}, msg)
	case err != nil:
		return req, false, a.badInvocation(c, err)
	}
	return req, true, nil
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

// settingCauses are the setting problems as causes, with their remedies,
// for the page.
func (a *app) settingCauses() []mirror.Cause {
	out := make([]mirror.Cause, 0, len(a.problems)+len(a.unknownSettings))
	for _, p := range a.problems {
		out = append(out, mirror.Cause{Kind: "setting", Summary: "setting problem: " + p.String(), Where: []string{p.Setting}, Since: a.loaded, Remedy: p.Remedy, Doc: p.Doc})
	}
	for _, p := range a.unknownSettings {
		out = append(out, mirror.Cause{Kind: "unknown setting", Summary: "setting problem: " + p.String(), Where: []string{p.Setting}, Since: a.loaded, Remedy: p.Remedy, Doc: p.Doc})
	}
	return out
}

// mirrorTimer runs one bounded drain. The invocation fails (500) only when
// records could not be mirrored. The service logs the report on stdout;
// Logs carry its summary, or, for a failed invocation (whose Logs the host
// drops), the whole report.
func (a *app) mirrorTimer(c echo.Context) error {
	var timer functions.Timer
	inv, err := functions.DecodeInvocation(c.Request().Body, maxTimerInvocationBytes)
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
	// The service logs the drain (its lines and the msg=drain line).
	until := followUntil(a.settings.Follow, a.settings.Schedule, a.settings.ScheduleZone, timer, time.Now())
	rep, err := a.service.DrainFollowing(c.Request().Context(), run, until)
	// A successful invocation's Logs carry the summary only: the
	// per-partition and error lines are already on stdout, which the host
	// logs too; returning them as well logged each twice. A failed one
	// carries the whole report, for its caller: the host drops those Logs.
	if err != nil || rep.Failed() {
		return a.respond(c, http.StatusInternalServerError, functions.NewResponse(rep.Lines()...))
	}
	return a.respond(c, http.StatusOK, functions.NewResponse(rep.Summary()))
}

// catchUpBody is the optional JSON body of POST /api/catchup.
type catchUpBody struct {
	// Topics narrows the catch-up: a list of names or a regular
	// expression.
	Topics mirror.TopicSelection `json:"topics"`
	// MaxDuration is a Go duration such as "5m"; default and maximum
	// MIRROR_CATCHUP_MAX_DURATION.
	MaxDuration string `json:"max_duration"`
}

// parseCatchUpBody reads the request body; an empty body selects defaults.
// Its errors are *mirror.InputError naming the field, like the other
// routes' (decodeBody); the selection's topics are checked against the
// mirrored ones by the caller.
func parseCatchUpBody(body string, limit time.Duration) (mirror.CatchUpRequest, mirror.TopicSelection, error) {
	req := mirror.CatchUpRequest{MaxDuration: limit}
	var b catchUpBody
	if strings.TrimSpace(body) == "" {
		return req, b.Topics, nil
	}
	if err := decodeBody(body, &b); err != nil {
		return req, b.Topics, err
	}
	if !b.Topics.Empty() {
		f, err := b.Topics.Filter()
		if err != nil {
			return req, b.Topics, &mirror.InputError{Field: "topics", Message: err.Error()}
		}
		req.Topics, req.TopicsPattern = &f, b.Topics.String()
	}
	if b.MaxDuration != "" {
		d, err := time.ParseDuration(b.MaxDuration)
		if err != nil || d <= 0 {
			return req, b.Topics, &mirror.InputError{Field: "max_duration", Message: fmt.Sprintf("%q: want a positive duration such as 5m", b.MaxDuration)}
		}
		if d > limit {
			return req, b.Topics, &mirror.InputError{Field: "max_duration", Message: fmt.Sprintf("%s exceeds %s (%s)", d, config.MirrorCatchUpDuration, limit)}
		}
		req.MaxDuration = d
	}
	return req, b.Topics, nil
}

// catchUp starts a background catch-up, or returns the active one.
func (a *app) catchUp(c echo.Context) error {
	req, ok, err := a.httpRequest(c)
	if !ok {
		return err
	}
	if len(a.problems) > 0 {
		return a.respondHTTP(c, http.StatusServiceUnavailable, map[string]any{"error": "invalid settings", "problems": a.problems}, a.problemLines()...)
	}
	cr, sel, err := parseCatchUpBody(req.Body, a.settings.CatchUpMaxDuration)
	if err != nil {
		return a.opsError(c, "catch-up", err)
	}
	if !sel.Empty() {
		// Topics that match no mirrored topic are refused, as pause and
		// offsets refuse them, rather than started as a run that drains
		// nothing.
		if _, err := a.service.Mirror().SelectTopics(c.Request().Context(), "topics", sel); err != nil {
			return a.opsError(c, "catch-up", err)
		}
	}
	st, started, err := a.service.StartCatchUp(cr)
	if err != nil {
		return a.opsError(c, "catch-up", err)
	}
	if started {
		// The run's status URL may be polled through any instance, at
		// once: it is published before the answer, then kept up.
		if err := a.runs.Publish(c.Request().Context(), st); err != nil {
			a.logger.Warn("sharing the catch-up's status with the other instances", "run", st.ID, "err", err)
		}
		go a.runs.Follow(context.WithoutCancel(c.Request().Context()), st.ID, a.service.CatchUp)
	}
	statusURL := statusURLFor(req.URL, st.ID)
	status, msg := http.StatusAccepted, "catch-up "+st.ID+" started"
	if !started {
		status, msg = http.StatusOK, "catch-up "+st.ID+" already running"
	}
	body := map[string]any{"id": st.ID, "started": started, "status_url": statusURL, "status_key": statusKeyNote, "run": st}
	if f := followingDrain(a.service.Mirror().Running()); f != nil {
		body["follower"] = f
		body["note"] = followerNote(*f)
	}
	out, err := functions.JSONOutput(status, body)
	if err != nil {
		return err
	}
	out.Headers["Location"] = statusURL
	return a.respond(c, http.StatusOK, functions.HTTPResponse(resBinding, out, msg))
}

// statusKeyNote tells the caller of a catch-up how to call its status_url:
// the URL carries no function key (it ends up in logs and dashboards).
const statusKeyNote = "status_url needs the function key this request used: append &code=<function key>, or send it in the x-functions-key header"

// followingDrain returns the timer's following drain running in this
// instance (MIRROR_FOLLOW), if any.
func followingDrain(running []mirror.RunningDrain) *mirror.RunningDrain {
	for i := range running {
		if !running[i].FollowUntil.IsZero() {
			return &running[i]
		}
	}
	return nil
}

// followerNote says what a catch-up started beside a following drain does:
// the partitions that drain holds are being mirrored by it.
func followerNote(f mirror.RunningDrain) string {
	return fmt.Sprintf("the timer's following drain %s (started %s, following until %s) is mirroring the %d partition(s) it holds in this instance; the catch-up leaves those to it (its report shows them busy) and drains the others; both show in /api/status",
		f.Run, f.Started.UTC().Format(time.RFC3339), f.FollowUntil.UTC().Format(time.RFC3339), f.Partitions)
}

// statusURLFor returns the status URL of run id next to the catch-up URL,
// without the function key.
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
	// The function key is not echoed: a URL ends up in logs and
	// dashboards; the caller adds its key as it did to start the run.
	q := url.Values{"run": {id}}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: path + "status", RawQuery: q.Encode()}).String()
}

// statusBody is the JSON of GET /api/status.
type statusBody struct {
	Time     time.Time        `json:"time"`
	OK       bool             `json:"ok"`
	Reason   string           `json:"reason,omitempty"`
	Problems []config.Problem `json:"problems"`
	// UnknownSettings are app settings that look like the mirror's
	// (KAFKA_*, MIRROR_*, EVENTHUBS*, CUTOVER_*, EHMIRROR_*) but are not
	// settings, with the closest setting's name: their values are ignored.
	// They do not make ok false.
	UnknownSettings []config.Problem  `json:"unknown_settings,omitempty"`
	Health          *mirror.Health    `json:"health,omitempty"`
	Config          map[string]string `json:"config"`
	Lag             *mirror.LagReport `json:"lag,omitempty"`
	LagError        string            `json:"lag_error,omitempty"`
	// LastLag is, when the lag cannot be read, the last lag this instance
	// read, with its time.
	LastLag *mirror.LagReport `json:"last_lag,omitempty"`
	// History is the lag and delivered rate over the last hour, as this
	// instance read them.
	History  []mirror.HistoryPoint  `json:"history"`
	CatchUp  *mirror.CatchUpStatus  `json:"catch_up,omitempty"`
	Run      *mirror.CatchUpStatus  `json:"run,omitempty"`
	CatchUps []mirror.CatchUpStatus `json:"catch_ups,omitempty"`
	Drains   []*mirror.Report       `json:"last_drains"`
	// Instance is the instance that answered: running, last_drains,
	// throughput and catch_ups are its own; RunInstance is the one that
	// runs (or ran) the catch-up of ?run=.
	Instance    string `json:"instance"`
	RunInstance string `json:"run_instance,omitempty"`
	// Instances are the other instances' drains, running and last, as
	// they published them (InstancesError when they cannot be read).
	Instances      []mirror.InstanceState `json:"instances"`
	InstancesError string                 `json:"instances_error,omitempty"`
	// Backlog is the lag in records and time, with how long it takes at
	// the recent rate; Throughput that rate; Running the drains running
	// now in this instance, with their progress and failures; NextTick
	// the schedule's next occurrence (MIRROR_SCHEDULE).
	Backlog    *mirror.Backlog       `json:"backlog,omitempty"`
	Throughput mirror.Throughput     `json:"throughput"`
	Running    []mirror.RunningDrain `json:"running"`
	NextTick   time.Time             `json:"next_tick,omitzero"`
	// Readiness is whether each Kafka broker answers and each event hub
	// accepts the app's credentials, checked with this request.
	Readiness *mirror.Readiness `json:"readiness,omitempty"`
	// Deduplication is the last drain's deduplication problem in one line
	// (MIRROR_DEDUPLICATE), for example a missing Listen right.
	Deduplication string `json:"deduplication,omitempty"`
	// KafkaAuth is the Kafka SASL mechanism, principal and token expiry
	// (never the token), and the last failure to obtain a token.
	KafkaAuth *kafka.AuthStatus `json:"kafka_auth,omitempty"`
}

// status reports lag per partition, recent drains, catch-ups, problems and
// the redacted configuration.
func (a *app) status(c echo.Context) error {
	req, ok, err := a.httpRequest(c)
	if !ok {
		return err
	}
	body := statusBody{Time: time.Now(), Problems: a.problems, UnknownSettings: a.unknownSettings, Config: a.settings.Summary(), Drains: []*mirror.Report{}}
	if body.Problems == nil {
		body.Problems = config.Problems{}
	}
	if len(a.problems) > 0 {
		body.Reason = a.problemLines()[0]
		return a.respondStatus(c, req, http.StatusServiceUnavailable, body, a.problemLines()...)
	}
	body.Instance = a.service.Mirror().Instance()
	// The run is read before the lag: a run read as ended after the lag
	// was read could show the lag of before its last drain.
	if id := req.Query["run"]; id != "" {
		run, found, err := a.catchUpRun(c.Request().Context(), id)
		switch {
		case err != nil:
			return a.respondHTTP(c, http.StatusServiceUnavailable, map[string]string{"error": fmt.Sprintf("catch-up run %q is not in this instance, and the other instances' runs cannot be read: %v", id, err)})
		case !found:
			return a.respondHTTP(c, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no catch-up run %q in any instance", id)})
		}
		body.Run, body.RunInstance = &run.CatchUpStatus, run.Instance
	}
	ob := a.observe(c.Request().Context(), body.Time)
	err = ob.lagErr
	if err != nil {
		body.LagError = err.Error()
		body.LastLag = ob.known
	}
	if auth := a.source.Auth(); auth.Mechanism != "" {
		body.KafkaAuth = &auth
	}
	body.Readiness = &ob.ready
	body.Lag = ob.lag
	health, m := ob.health, a.service.Mirror()
	body.Health = &health
	body.Running = m.Running()
	body.Throughput = m.Throughput()
	body.History = m.History()
	if ob.known != nil {
		b := mirror.NewBacklog(ob.known, body.Throughput, body.History, health.Failing())
		body.Backlog = &b
	}
	if sched, err := ncrontab.Parse(a.settings.Schedule); err == nil {
		body.NextTick = nextTick(sched, a.settings.ScheduleZone, time.Time{}, body.Time)
	}
	if st, ok := a.service.ActiveCatchUp(); ok {
		body.CatchUp = &st
	}
	body.CatchUps = a.service.CatchUps()
	if others, err := a.instances.Others(c.Request().Context()); err != nil {
		body.InstancesError = err.Error()
	} else {
		body.Instances = others
	}
	if body.Instances == nil {
		body.Instances = []mirror.InstanceState{}
	}
	if reports := a.service.Reports(); len(reports) > 0 {
		body.Drains = reports
		body.Deduplication = lastDeduplication(reports)
	}
	body.OK = err == nil && health.OK
	body.Reason = health.Reason
	// 503 only when the status itself is incomplete (lag unreadable); a
	// known problem is ok:false with the reason in a 200, so that callers
	// polling a catch-up run or the lag still get the figures.
	status := http.StatusOK
	if err != nil {
		status = http.StatusServiceUnavailable
	}
	return a.respondStatus(c, req, status, body)
}

// catchUpRun returns catch-up run id: this instance's own, or as the
// instance running it published it.
func (a *app) catchUpRun(ctx context.Context, id string) (mirror.SharedRun, bool, error) {
	if st, ok := a.service.CatchUp(id); ok {
		return mirror.SharedRun{CatchUpStatus: st, Instance: a.service.Mirror().Instance(), Published: time.Now()}, true, nil
	}
	return a.runs.Lookup(ctx, id)
}

// wantsHTML reports whether a status request asks for the HTML page:
// ?format=html, or an Accept header that names text/html (as browsers do).
func wantsHTML(req functions.HTTPRequest) bool {
	if f := req.Query["format"]; f != "" {
		return strings.EqualFold(f, "html")
	}
	return strings.Contains(strings.ToLower(strings.Join(req.Headers.Values("Accept"), ",")), "text/html")
}

// kafkaAuthLine renders the Kafka authentication for the status page.
func kafkaAuthLine(au kafka.AuthStatus) string {
	line := au.Mechanism
	if au.Principal != "" {
		line += " as " + au.Principal
	}
	if !au.TokenExpiry.IsZero() {
		line += ", token valid until " + au.TokenExpiry.UTC().Format("2006-01-02 15:04:05Z")
	}
	if au.LastError != "" {
		line += "; last error: " + au.LastError
	}
	return line
}

// respondStatus answers a status request with JSON or the HTML page.
func (a *app) respondStatus(c echo.Context, req functions.HTTPRequest, status int, body statusBody, logs ...string) error {
	if !wantsHTML(req) {
		return a.respondHTTP(c, status, body, logs...)
	}
	p := statuspage.Page{Time: body.Time, OK: body.OK, Reason: body.Reason, Lag: body.Lag, LagError: body.LagError, LastLag: body.LastLag, History: body.History,
		CatchUp: body.CatchUp, Drains: body.Drains, Settings: body.Config,
		Backlog: body.Backlog, Throughput: &body.Throughput, Running: body.Running, NextTick: body.NextTick, Readiness: body.Readiness}
	if au := body.KafkaAuth; au != nil {
		p.KafkaAuth = kafkaAuthLine(*au)
	}
	p.Causes = a.settingCauses()
	if body.Health != nil {
		p.Causes = append(p.Causes, body.Health.Causes...)
	}
	var html strings.Builder
	if err := statuspage.Render(&html, p); err != nil {
		return err
	}
	out := functions.HTTPOutput{StatusCode: status, Body: html.String(), Headers: map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
		"Cache-Control":           "no-store",
	}}
	return a.respond(c, http.StatusOK, functions.HTTPResponse(resBinding, out, logs...))
}

// lastDeduplication is the deduplication problem of the latest drain that
// ran (reports are oldest first or newest first; the latest start wins).
func lastDeduplication(reports []*mirror.Report) string {
	var last *mirror.Report
	for _, r := range reports {
		if r != nil && r.Stopped != mirror.StopNothingToDo && r.Stopped != mirror.StopBusy && (last == nil || r.Started.After(last.Started)) {
			last = r
		}
	}
	if last == nil {
		return ""
	}
	return last.Deduplication
}

// certificateHealth adds the Kafka client certificate's expiry, or its
// approach (KAFKA_TLS_CERT_WARN_DAYS), to the health as a problem: open
// connections keep working with an expired certificate, so the drains do
// not show it until the next handshake.
func (a *app) certificateHealth(h *mirror.Health, now time.Time) {
	c := a.settings.KafkaClientCert
	if c == nil {
		return
	}
	warn := time.Duration(a.settings.CertWarnDays) * 24 * time.Hour
	msg := c.ExpiryProblem(now, warn)
	if msg == "" {
		return
	}
	since := c.Leaf().NotAfter.Add(-warn)
	if now.After(c.Leaf().NotAfter) {
		since = c.Leaf().NotAfter
	}
	h.Add(mirror.Problem{Kind: mirror.KindCertificate, Partition: -1, Message: msg, Since: since, Run: "status"})
}

// readinessTimeout bounds a readiness check (a broker's dial, TLS and SASL
// handshakes, and its answer, are bounded by the Kafka dial timeout).
const readinessTimeout = 8 * time.Second

// readiness checks that each Kafka broker answers and that every hub
// accepts the app's credentials.
func (a *app) readiness(ctx context.Context) mirror.Readiness {
	ctx, cancel := context.WithTimeout(ctx, readinessTimeout)
	defer cancel()
	return a.service.Mirror().Readiness(ctx)
}

// logReadiness checks readiness once at start and logs it as one line,
// msg=readiness, at ERROR when something does not answer or refuses the
// app.
func (a *app) logReadiness(ctx context.Context) {
	if len(a.problems) > 0 || a.service == nil {
		return
	}
	r := a.readiness(ctx)
	level := slog.LevelInfo
	if !r.OK {
		level = slog.LevelError
	}
	a.logger.Log(ctx, level, "readiness", "ok", r.OK, "summary", r.Summary)
}

// metricsText answers GET /api/metrics with the metrics in the Prometheus
// text format.
func (a *app) metricsText(c echo.Context) error {
	if _, ok, err := a.httpRequest(c); !ok {
		return err
	}
	if a.metrics == nil {
		return a.respondHTTP(c, http.StatusServiceUnavailable, map[string]any{"error": "invalid settings", "problems": a.problems}, a.problemLines()...)
	}
	var text strings.Builder
	if err := a.metrics.WritePrometheus(&text); err != nil {
		return a.respondHTTP(c, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
	out := functions.HTTPOutput{StatusCode: http.StatusOK, Body: text.String(), Headers: map[string]string{"Content-Type": metrics.PrometheusContentType}}
	return a.respond(c, http.StatusOK, functions.HTTPResponse(resBinding, out))
}
