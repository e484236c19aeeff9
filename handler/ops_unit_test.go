package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/mirror"
)

func TestParseOffsetsBody(t *testing.T) {
	for _, c := range []struct {
		body, field string
		check       func(mirror.ResetRequest) bool
	}{
		{body: `{"topics":["a"],"to":"earliest"}`, check: func(r mirror.ResetRequest) bool { return !r.Apply && r.To == "earliest" && r.By == "key k" }},
		{body: `{"topics":["a"],"to":"offset","offset":0,"confirm":true,"by":"ann"}`, check: func(r mirror.ResetRequest) bool { return r.Apply && r.Offset == 0 && r.By == "key k (ann)" }},
		{body: `{"topics":["a"],"to":"timestamp","timestamp":"2026-01-02T03:04:05Z"}`, check: func(r mirror.ResetRequest) bool {
			return r.Timestamp.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		}},
		{body: `{"topics":["a"],"to":"earliest","offset":3}`, field: "offset"},
		{body: `{"topics":["a"],"to":"offset"}`, field: "offset"},
		{body: `{"topics":["a"],"to":"earliest","timestamp":"2026-01-02T03:04:05Z"}`, field: "timestamp"},
		{body: `{"topics":["a"],"to":"timestamp","timestamp":"noon"}`, field: "timestamp"},
		{body: `{"topics":[1]}`, field: "topics"},
		{body: `{"partitions":"0"}`, field: "partitions"},
		{body: `{"confirm":"true"}`, field: "confirm"},
		{body: `{"execute":true}`, field: "execute"},
		{body: `{} {}`, field: "body"},
		{body: `nope`, field: "body"},
		{body: ` `, field: "body"},
	} {
		r, err := parseOffsetsBody(c.body, "key k")
		var ie *mirror.InputError
		switch {
		case c.field == "" && (err != nil || !c.check(r)):
			t.Errorf("%s: %+v %v", c.body, r, err)
		case c.field != "" && (!errors.As(err, &ie) || ie.Field != c.field || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: error %v, want one naming %q", c.body, err, c.field)
		}
	}
}

func TestCallerAndFormat(t *testing.T) {
	req := functions.HTTPRequest{Identities: []functions.Identity{functions.KeyIdentity("Function", "ops")}}
	if got := caller(req); got != "key ops" {
		t.Errorf("caller = %q", got)
	}
	if got := caller(functions.HTTPRequest{}); got != "anonymous" {
		t.Errorf("caller without identity = %q", got)
	}
	for _, c := range []struct {
		query, accept string
		html          bool
	}{{"html", "", true}, {"json", "text/html", false}, {"", "text/html,*/*", true}, {"", "application/json", false}, {"", "", false}} {
		req := functions.HTTPRequest{Query: map[string]string{}, Headers: map[string][]string{}}
		if c.query != "" {
			req.Query["format"] = c.query
		}
		if c.accept != "" {
			req.Headers.Set("Accept", c.accept)
		}
		if wantsHTML(req) != c.html {
			t.Errorf("format=%q Accept=%q: html %t", c.query, c.accept, !c.html)
		}
	}
}

// FuzzParseOffsetsBody: any body gives a request or a one-line error naming
// a field, never a panic.
func FuzzParseOffsetsBody(f *testing.F) {
	for _, s := range []string{"", `{}`, `{"topics":["a"],"to":"offset","offset":-5}`, `{"timestamp":"x"}`, `[`, `{"topics":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		_, err := parseOffsetsBody(body, "key k")
		var ie *mirror.InputError
		if err != nil && (!errors.As(err, &ie) || ie.Field == "" || strings.Contains(err.Error(), "\n")) {
			t.Fatalf("error %q", err)
		}
	})
}
