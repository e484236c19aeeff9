package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/mirror"
)

// offsetsBody is the JSON body of POST /api/offsets.
type offsetsBody struct {
	Topics     []string `json:"topics"`
	Partitions []int32  `json:"partitions"`
	To         string   `json:"to"`
	Timestamp  string   `json:"timestamp"`
	Offset     *int64   `json:"offset"`
	Confirm    bool     `json:"confirm"`
	By         string   `json:"by"`
}

// pauseBody is the JSON body of POST /api/pause and /api/resume.
type pauseBody struct {
	Topic  string `json:"topic"`
	Reason string `json:"reason"`
	By     string `json:"by"`
}

// decodeBody decodes a JSON object into v; errors name the field.
func decodeBody(body string, v any) error {
	if strings.TrimSpace(body) == "" {
		return &mirror.InputError{Field: "body", Message: "missing: want a JSON object"}
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &mirror.InputError{Field: te.Field, Message: fmt.Sprintf("want %s, got JSON %s", te.Type, te.Value)}
		}
		if _, field, ok := strings.Cut(err.Error(), "unknown field "); ok {
			if name := strings.Trim(field, `"`); name != "" && !strings.ContainsAny(name, "\n\r") {
				return &mirror.InputError{Field: name, Message: "unknown field"}
			}
			return &mirror.InputError{Field: "body", Message: "unknown field " + strings.ReplaceAll(field, "\n", `\n`)}
		}
		return &mirror.InputError{Field: "body", Message: "malformed JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &mirror.InputError{Field: "body", Message: "want a single JSON object"}
	}
	return nil
}

// parseOffsetsBody turns the body of POST /api/offsets into a reset
// request; by names the caller.
func parseOffsetsBody(body, by string) (mirror.ResetRequest, error) {
	var b offsetsBody
	if err := decodeBody(body, &b); err != nil {
		return mirror.ResetRequest{}, err
	}
	req := mirror.ResetRequest{Topics: b.Topics, Partitions: b.Partitions, To: b.To, Apply: b.Confirm, By: by}
	if b.By != "" {
		req.By = by + " (" + b.By + ")"
	}
	if b.Timestamp != "" {
		if b.To != mirror.ResetTimestamp {
			return req, &mirror.InputError{Field: "timestamp", Message: `only with "to":"timestamp"`}
		}
		t, err := time.Parse(time.RFC3339Nano, b.Timestamp)
		if err != nil {
			return req, &mirror.InputError{Field: "timestamp", Message: fmt.Sprintf("%q: want an RFC 3339 time such as 2026-12-03T05:00:00Z", b.Timestamp)}
		}
		req.Timestamp = t
	}
	if b.Offset != nil {
		if b.To != mirror.ResetOffset {
			return req, &mirror.InputError{Field: "offset", Message: `only with "to":"offset"`}
		}
		req.Offset = *b.Offset
	} else if b.To == mirror.ResetOffset {
		return req, &mirror.InputError{Field: "offset", Message: `missing: "to":"offset" needs "offset"`}
	}
	return req, nil
}

// caller names who called an HTTP function: the function key's name.
func caller(req functions.HTTPRequest) string {
	for _, id := range req.Identities {
		for _, c := range id.Claims {
			if c.Type == functions.KeyIDClaimType {
				return "key " + c.Value
			}
		}
	}
	return "anonymous"
}

// opsError answers an error of a reset or pause: 400 naming the field,
// 409 while a drain holds the partitions, 503 otherwise.
func (a *app) opsError(c echo.Context, what string, err error) error {
	var ie *mirror.InputError
	status := http.StatusServiceUnavailable
	body := map[string]string{"error": err.Error()}
	switch {
	case errors.As(err, &ie):
		status, body["field"] = http.StatusBadRequest, ie.Field
	case errors.Is(err, mirror.ErrBusy):
		status = http.StatusConflict
	case errors.Is(err, mirror.ErrNoControl):
		status = http.StatusNotImplemented
	}
	msg := what + " refused: " + err.Error()
	a.logger.Warn(msg)
	return a.respondHTTP(c, status, body, msg)
}

// offsets plans (dry run, the default) or applies an offset reset.
func (a *app) offsets(c echo.Context) error {
	req, ok, err := a.httpRequest(c)
	if !ok {
		return err
	}
	if len(a.problems) > 0 {
		return a.respondHTTP(c, http.StatusServiceUnavailable, map[string]any{"error": "invalid settings", "problems": a.problems}, a.problemLines()...)
	}
	rr, err := parseOffsetsBody(req.Body, caller(req))
	if err != nil {
		return a.opsError(c, "offset reset", err)
	}
	res, err := a.service.Mirror().ResetOffsets(c.Request().Context(), rr)
	if err != nil {
		return a.opsError(c, "offset reset", err)
	}
	msg := fmt.Sprintf("offset reset of %d partitions to %s: dry run, nothing changed; send \"confirm\": true to apply", len(res.Partitions), rr.To)
	if res.Applied {
		msg = fmt.Sprintf("offset reset of %d partitions to %s applied by %s", len(res.Partitions), rr.To, rr.By)
	}
	return a.respondHTTP(c, http.StatusOK, map[string]any{"dry_run": !res.Applied, "message": msg, "reset": res}, msg)
}

// pause and resume set a topic's pause state.
func (a *app) pause(c echo.Context) error  { return a.setPaused(c, true) }
func (a *app) resume(c echo.Context) error { return a.setPaused(c, false) }

func (a *app) setPaused(c echo.Context, paused bool) error {
	what := "resume"
	if paused {
		what = "pause"
	}
	req, ok, err := a.httpRequest(c)
	if !ok {
		return err
	}
	if len(a.problems) > 0 {
		return a.respondHTTP(c, http.StatusServiceUnavailable, map[string]any{"error": "invalid settings", "problems": a.problems}, a.problemLines()...)
	}
	var b pauseBody
	if err := decodeBody(req.Body, &b); err != nil {
		return a.opsError(c, what, err)
	}
	by := caller(req)
	if b.By != "" {
		by += " (" + b.By + ")"
	}
	p, err := a.service.Mirror().SetPaused(c.Request().Context(), b.Topic, paused, by, b.Reason)
	if err != nil {
		return a.opsError(c, what, err)
	}
	return a.respondHTTP(c, http.StatusOK, map[string]any{"pause": p}, fmt.Sprintf("topic %s: %s by %s", b.Topic, what, by))
}
