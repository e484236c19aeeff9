package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/funchost"
)

// These tests are issue 15 (operating the mirror), through the real handler
// binary under the local Functions host, with kfake and the emulator.

// TestOperating builds the app folder once and runs the operator scenarios.
func TestOperating(t *testing.T) {
	app := buildApp(t)
	t.Run("wrong Event Hubs key: status ok false with the reason", func(t *testing.T) { testWrongEventHubsKey(t, app) })
	t.Run("catch-up drains are logged like timer drains", func(t *testing.T) { testCatchUpLogs(t, app) })
	t.Run("a catch-up body over 1 MiB gets 413 through res", func(t *testing.T) { testBodyTooLarge(t, app) })
}

// drainLine matches the structured drain line of the shared log contract.
var drainLine = regexp.MustCompile(`level=(INFO|ERROR) msg=drain run=("[^"]*"|\S+) trigger=(timer|catchup) records=(\d+) bytes=(\d+) lag=(-?\d+) partitions=(\d+) errors=(\d+) gaps=(\d+) oversized=(\d+) duration_ms=(\d+) budget_ms=(\d+) stopped=("[^"]*"|\S+)`)

func testWrongEventHubsKey(t *testing.T, app string) {
	w := newWorld(t)
	w.produce(t, 100)
	settings := w.settings()
	settings["EVENTHUBS"] = strings.Replace(w.emu.ConnectionString(), eventHubsKey, "d3Jvbmcta2V5LXdyb25nLWtleQ==", 1)
	out := &capture{}
	h, front := startHost(t, app, settings, out)
	key := h.Keys().DefaultKey()

	// Before any drain the status knows nothing wrong yet.
	if code, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, ""); code != http.StatusOK || st["ok"] != true {
		t.Fatalf("status before a drain: %d %s", code, raw)
	}
	res, err := h.InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded() {
		t.Fatalf("timer succeeded with a wrong Event Hubs key: %q", res.Logs)
	}
	code, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, "")
	if code != http.StatusServiceUnavailable || st["ok"] != false {
		t.Fatalf("status after a failed drain: %d %s", code, raw)
	}
	reason, _ := st["reason"].(string)
	t.Logf("reason: %s", reason)
	if !strings.Contains(reason, "unauthorized") || !strings.Contains(reason, "prod.test") || strings.Contains(reason, "\n") {
		t.Errorf("reason %q: want one line naming the hub and the authorization failure", reason)
	}
	health, _ := st["health"].(map[string]any)
	if problems, _ := health["problems"].([]any); len(problems) != len(seedTopics) {
		t.Errorf("want one problem per hub, got %s", raw)
	}
	m := drainLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no drain line in the log:\n%s", out)
	}
	if m[1] != "ERROR" || m[3] != "timer" || m[6] != "-1" || m[8] == "0" {
		t.Errorf("drain line %q: want level ERROR, trigger timer, lag -1, errors > 0", m[0])
	}
	if strings.Contains(raw+out.String(), "d3Jvbmcta2V5LXdyb25nLWtleQ==") {
		t.Error("the (wrong) key leaked into status or logs")
	}
}

func testCatchUpLogs(t *testing.T, app string) {
	w := newWorld(t)
	w.produce(t, 500)
	out := &capture{}
	h, front := startHost(t, app, w.settings(), out)
	key := h.Keys().DefaultKey()
	code, started, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, `{"max_duration":"30s"}`)
	if code != http.StatusAccepted {
		t.Fatalf("catch-up: %d %s", code, raw)
	}
	id := fmt.Sprint(started["id"])
	waitCaughtUp(t, fmt.Sprint(started["status_url"]))
	var lines []string
	for _, m := range drainLine.FindAllStringSubmatch(out.String(), -1) {
		if m[3] == "catchup" && m[2] == `"catch-up `+id+`"` {
			lines = append(lines, m[0])
		}
	}
	if len(lines) == 0 {
		t.Fatalf("no drain line with trigger=catchup for run %s:\n%s", id, out)
	}
	var records int
	for _, l := range lines {
		m := drainLine.FindStringSubmatch(l)
		var n int
		fmt.Sscan(m[4], &n)
		records += n
	}
	if records != 500 {
		t.Errorf("catch-up drain lines add up to %d records, want 500: %q", records, lines)
	}
	if code, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, ""); code != http.StatusOK || st["ok"] != true {
		t.Errorf("status after a clean catch-up: %d %s", code, raw)
	}
}

// waitCaughtUp polls a catch-up's status URL until the run is caught up.
func waitCaughtUp(t *testing.T, statusURL string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, st, raw := call(t, "GET", statusURL, "")
		if run, _ := st["run"].(map[string]any); run != nil && run["state"] == "caught up" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("catch-up did not finish: %s", raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testBodyTooLarge(t *testing.T, app string) {
	w := newWorld(t)
	out := &capture{}
	h, front := startHost(t, app, w.settings(), out)
	key := h.Keys().DefaultKey()
	// Exactly 1 MiB is accepted (and refused as JSON, 400); one byte more is 413.
	body := `{"topics":"` + strings.Repeat("a", 1<<20-len(`{"topics":""}`)) + `"}`
	if code, _, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, body); code != http.StatusAccepted {
		t.Errorf("1 MiB body: %d %.200s", code, raw)
	}
	for _, body := range []string{body + " ", strings.Repeat(`"\u0001`, 1<<20)} {
		code, m, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, body)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(m["error"]), "larger than 1048576 bytes") {
			t.Errorf("%d-byte body: %d %.300s", len(body), code, raw)
		}
	}
	if strings.Contains(out.String(), "invocation failed") || strings.Contains(out.String(), "malformed invocation") {
		t.Errorf("the invocation failed:\n%s", out)
	}
}
