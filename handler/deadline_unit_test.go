package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

// TestDeadlinesAnswerForAStuckFunction: deadlines passes a function's
// answer through when it comes in time, and answers 504 through res with
// one line when it does not, even for a function that ignores its context.
func TestDeadlinesAnswerForAStuckFunction(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/Status" {
			<-release // ignores the context
		}
		w.Header().Set("Content-Type", functions.ResponseContentType)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"Outputs":{},"Logs":["fine"]}`)
	})
	srv := httptest.NewServer(deadlines{next: next, capAt: 200 * time.Millisecond, logger: slog.New(slog.DiscardHandler), redact: func(s string) string { return s }})
	defer srv.Close()
	post := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/Pause"); code != http.StatusOK || !strings.Contains(body, `"fine"`) {
		t.Errorf("a function in time: %d %s", code, body)
	}
	start := time.Now()
	code, body := post("/Status")
	if code != http.StatusOK || time.Since(start) > 2*time.Second {
		t.Fatalf("a stuck function: %d after %s", code, time.Since(start))
	}
	var resp struct {
		Outputs map[string]functions.HTTPOutput
		Logs    []string
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	res := resp.Outputs[resBinding]
	if res.StatusCode != http.StatusGatewayTimeout || len(resp.Logs) != 1 || !strings.HasPrefix(resp.Logs[0], "Status did not finish within its deadline of 200ms") {
		t.Errorf("a stuck function: res %+v, logs %q", res, resp.Logs)
	}
}
