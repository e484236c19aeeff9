package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/functions"
)

// routeDeadline is an HTTP-triggered function's own deadline and what its
// caller should know when it is exceeded.
type routeDeadline struct {
	limit time.Duration
	// after says what state the abandoned operation may have left.
	after string
}

// defaultRouteDeadline returns the deadline of the function posted to at
// path (/<FunctionName>), and false for a function without one (the timer,
// bounded by MIRROR_MAX_DURATION and functionTimeout). Every deadline is
// well under App Service's 230 s front-end limit: the host never cancels
// its request to the handler (DefaultHttpWorkerService sends it without a
// cancellation token), so without one a hung call would run until
// functionTimeout and the host would then kill the whole handler, the
// following drain and every catch-up with it.
func defaultRouteDeadline(path string) (routeDeadline, bool) {
	switch path {
	case "/CatchUp":
		return routeDeadline{30 * time.Second, "the catch-up may have started: GET /api/status shows catch_up"}, true
	case "/Status":
		return routeDeadline{60 * time.Second, "Kafka or Event Hubs did not answer in time; retry"}, true
	case "/Metrics":
		return routeDeadline{30 * time.Second, "retry"}, true
	case "/Pause", "/Resume":
		return routeDeadline{60 * time.Second, "the change may have been recorded: GET /api/status shows each topic's pause before you retry"}, true
	case "/Offsets":
		return routeDeadline{120 * time.Second, "offsets may have been reset in part: GET /api/status shows the group's positions before you retry"}, true
	case "/Cutover":
		return routeDeadline{150 * time.Second, "checkpoints may have been written in part: retrying the same cut-over is safe"}, true
	}
	return routeDeadline{}, false
}

// deadlines serves next with each HTTP function's deadline: the request's
// context expires at the deadline, and if the function has not answered by
// then, deadlines answers for it (504 through the res binding, one line
// naming the function and the deadline) while the abandoned call ends on
// its own. capAt, when positive, caps every deadline
// (MIRROR_HTTP_DEADLINE).
type deadlines struct {
	next   http.Handler
	capAt  time.Duration
	logger *slog.Logger
	redact func(string) string
}

// ServeHTTP implements http.Handler.
func (d deadlines) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rd, ok := defaultRouteDeadline(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		d.next.ServeHTTP(w, r)
		return
	}
	if d.capAt > 0 && d.capAt < rd.limit {
		rd.limit = d.capAt
	}
	ctx, cancel := context.WithTimeout(r.Context(), rd.limit)
	defer cancel()
	buf := &bufferedResponse{header: http.Header{}}
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		d.next.ServeHTTP(buf, r.WithContext(ctx))
	}()
	select {
	case p := <-done:
		if p != nil {
			panic(p)
		}
		// A call that honours the context may end a hair before the
		// context's own timer fires: the clock decides.
		if end, _ := ctx.Deadline(); ctx.Err() == nil && time.Now().Before(end) {
			buf.writeTo(w)
			return
		}
	case <-ctx.Done():
	}
	d.expired(w, strings.TrimPrefix(r.URL.Path, "/"), rd)
}

// expired answers an invocation whose function missed its deadline.
func (d deadlines) expired(w http.ResponseWriter, function string, rd routeDeadline) {
	msg := fmt.Sprintf("%s did not finish within its deadline of %s (%s can shorten it) and was abandoned; %s", function, rd.limit, config.MirrorHTTPDeadline, rd.after)
	d.logger.Error(msg, "function", function, "deadline", rd.limit)
	out, err := functions.JSONOutput(http.StatusGatewayTimeout, map[string]string{"error": msg})
	if err == nil {
		var body []byte
		if body, err = json.Marshal(functions.HTTPResponse(resBinding, out, msg)); err == nil {
			w.Header().Set("Content-Type", functions.ResponseContentType)
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(d.redact(string(body))))
			return
		}
	}
	http.Error(w, msg, http.StatusInternalServerError)
}

// bufferedResponse holds a function's response until it is known to have
// finished within its deadline.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// Header implements http.ResponseWriter.
func (b *bufferedResponse) Header() http.Header { return b.header }

// WriteHeader implements http.ResponseWriter.
func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

// Write implements http.ResponseWriter.
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// writeTo copies the held response to w.
func (b *bufferedResponse) writeTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	w.Write(b.body.Bytes())
}
