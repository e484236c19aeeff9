package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/mirror"
)

// offsetsBody is the JSON body of POST /api/offsets.
type offsetsBody struct {
	Topics     mirror.TopicSelection `json:"topics"`
	Partitions []int32               `json:"partitions"`
	To         string                `json:"to"`
	Timestamp  string                `json:"timestamp"`
	Offset     *int64                `json:"offset"`
	Shift      *int64                `json:"shift"`
	Duration   string                `json:"duration"`
	Confirm    bool                  `json:"confirm"`
	By         string                `json:"by"`
}

// pauseBody is the JSON body of POST /api/pause and /api/resume: one topic,
// or topics as a list or a regular expression.
type pauseBody struct {
	Topic  string                `json:"topic"`
	Topics mirror.TopicSelection `json:"topics"`
	Reason string                `json:"reason"`
	By     string                `json:"by"`
}

// decodeBody decodes a JSON object into v; errors name the field.
func decodeBody(body string, v any) error {
	if strings.TrimSpace(body) == "" {
		return &mirror.InputError{Field: "body", Message: "missing: want a JSON object"}
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, mirror.ErrBadTopicSelection) {
			return &mirror.InputError{Field: "topics", Message: err.Error()}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			return &mirror.InputError{Field: field, Message: fmt.Sprintf("want %s, got JSON %s", jsonKind(te.Type), te.Value)}
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

// jsonKind names the JSON a Go type decodes from, for error messages that
// must not name Go types ("a JSON object", not main.catchUpBody).
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "another value"
}

// parseOffsetsBody turns the body of POST /api/offsets into a reset
// request; by names the caller.
func parseOffsetsBody(body, by string) (mirror.ResetRequest, error) {
	var b offsetsBody
	if err := decodeBody(body, &b); err != nil {
		return mirror.ResetRequest{}, err
	}
	req := mirror.ResetRequest{Select: b.Topics, Partitions: b.Partitions, To: b.To, Apply: b.Confirm, By: by}
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
	if b.Shift != nil {
		if b.To != mirror.ResetShiftBy {
			return req, &mirror.InputError{Field: "shift", Message: `only with "to":"shift-by"`}
		}
		req.Shift = *b.Shift
	}
	if b.Duration != "" {
		if b.To != mirror.ResetByDuration {
			return req, &mirror.InputError{Field: "duration", Message: `only with "to":"by-duration"`}
		}
		d, err := parseResetDuration(b.Duration)
		if err != nil {
			return req, &mirror.InputError{Field: "duration", Message: err.Error()}
		}
		req.Duration = d
	}
	return req, nil
}

// parseResetDuration reads a Go duration ("90m") or an ISO 8601 duration of
// days, hours, minutes and seconds ("P1DT2H", "PT30M"), the form
// kafka-consumer-groups.sh --by-duration takes.
func parseResetDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	bad := fmt.Errorf("%q: want a positive duration such as \"90m\" or \"PT1H30M\"", s)
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, bad
	}
	var total time.Duration
	inTime := false
	num := ""
	for _, r := range rest {
		switch {
		case r >= '0' && r <= '9':
			num += string(r)
		case r == 'T' && !inTime && num == "":
			inTime = true
		default:
			n, err := strconv.ParseInt(num, 10, 32)
			if err != nil {
				return 0, bad
			}
			unit := map[rune]time.Duration{'D': 24 * time.Hour}
			if inTime {
				unit = map[rune]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second}
			}
			u, ok := unit[r]
			if !ok {
				return 0, bad
			}
			total += time.Duration(n) * u
			num = ""
		}
	}
	if num != "" || total <= 0 {
		return 0, bad
	}
	return total, nil
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
	res, err := a.service.ResetOffsets(c.Request().Context(), rr)
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
	sel := b.Topics
	switch {
	case b.Topic != "" && !sel.Empty():
		return a.opsError(c, what, &mirror.InputError{Field: "topic", Message: `give "topic" or "topics", not both`})
	case b.Topic != "":
		sel = mirror.TopicSelection{Names: []string{b.Topic}}
	}
	ps, err := a.service.SetPaused(c.Request().Context(), sel, paused, by, b.Reason)
	if err != nil {
		return a.opsError(c, what, err)
	}
	body := map[string]any{"pauses": ps}
	if len(ps) == 1 {
		body["pause"] = ps[0]
	}
	return a.respondHTTP(c, http.StatusOK, body, fmt.Sprintf("topics %s: %s by %s", sel, what, by))
}
