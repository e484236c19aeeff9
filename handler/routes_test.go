package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

func TestParseCatchUpBody(t *testing.T) {
	limit := 10 * time.Minute
	for _, c := range []struct {
		body    string
		wantErr string
		field   string
		topics  string
		dur     time.Duration
	}{
		{body: "", dur: limit},
		{body: "  \n", dur: limit},
		{body: `{}`, dur: limit},
		{body: `{"topics":"prod\\.test1","max_duration":"5m"}`, topics: `prod\.test1`, dur: 5 * time.Minute},
		{body: `{"topics":"("}`, wantErr: "topics", field: "topics"},
		{body: `{"topics":5}`, wantErr: "topic names", field: "topics"},
		{body: `{"max_duration":"forever"}`, wantErr: "positive duration", field: "max_duration"},
		{body: `{"max_duration":"-1m"}`, wantErr: "positive duration", field: "max_duration"},
		{body: `{"max_duration":5}`, wantErr: "want a string, got JSON number", field: "max_duration"},
		{body: `{"max_duration":"2h"}`, wantErr: "exceeds MIRROR_CATCHUP_MAX_DURATION", field: "max_duration"},
		{body: `{"topic":"x"}`, wantErr: `unknown field`, field: "topic"},
		{body: `[1,2]`, wantErr: "want a JSON object, got JSON array", field: "body"},
		{body: `"x"`, wantErr: "want a JSON object, got JSON string", field: "body"},
		{body: `{"topics":"a"} {"topics":"b"}`, wantErr: "single JSON object", field: "body"},
		{body: `{"topics":`, wantErr: "malformed JSON", field: "body"},
	} {
		req, _, err := parseCatchUpBody(c.body, limit)
		if c.wantErr != "" {
			var ie *mirror.InputError
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") || !errors.As(err, &ie) || ie.Field != c.field {
				t.Errorf("body %q: error %v, want one line containing %q naming the field %q", c.body, err, c.wantErr, c.field)
			}
			// Answers name JSON, never the handler's Go types (issue 47).
			if err != nil && (strings.Contains(err.Error(), "main.") || strings.Contains(err.Error(), "Go value")) {
				t.Errorf("body %q: error %q names a Go type", c.body, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("body %q: %v", c.body, err)
			continue
		}
		if req.TopicsPattern != c.topics || req.MaxDuration != c.dur {
			t.Errorf("body %q: got %+v", c.body, req)
		}
	}
}

func TestStatusURLFor(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:7071/api/catchup?code=abc": "http://localhost:7071/api/status?run=r1", // never the key
		"https://app.azurewebsites.net/api/catchup":  "https://app.azurewebsites.net/api/status?run=r1",
		"": "/api/status?run=r1",
	} {
		if got := statusURLFor(in, "r1"); got != want {
			t.Errorf("statusURLFor(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactor(t *testing.T) {
	r := newRedactor([]string{"hunter2", "Endpoint=sb://h/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0a2V5"})
	for _, s := range []string{
		"password hunter2 leaked",
		"conn Endpoint=sb://h/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0a2V5 leaked",
		"key c2VjcmV0a2V5 alone",
	} {
		out := r.Redact(s)
		if strings.Contains(out, "hunter2") || strings.Contains(out, "c2VjcmV0a2V5") || !strings.Contains(out, "[REDACTED]") {
			t.Errorf("Redact(%q) = %q", s, out)
		}
	}
}

// FuzzParseCatchUpBody: any body gives a request or a one-line error, never
// a panic.
func FuzzParseCatchUpBody(f *testing.F) {
	for _, s := range []string{"", `{}`, `{"topics":"a.*","max_duration":"1m"}`, `{"topics":"(`, `[]`, `null`, `{"max_duration":"9999999h"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		_, _, err := parseCatchUpBody(body, time.Hour)
		if err != nil && (strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "main.")) {
			t.Fatalf("multi-line error: %q", err)
		}
	})
}
