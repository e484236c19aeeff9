package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/mirror"
)

// These tests are issue 15 (operating the mirror), through the real handler
// binary under the local Functions host, with kfake and the emulator.

// TestOperating builds the app folder once and runs the operator scenarios.
func TestOperating(t *testing.T) {
	app := buildApp(t)
	t.Run("wrong Event Hubs key: status ok false with the reason", func(t *testing.T) { testWrongEventHubsKey(t, app) })
	t.Run("throttling that outlasts a drain: ok false, cleared by a clean drain", func(t *testing.T) { testThrottled(t, app) })
	t.Run("a backlog drained at the namespace's quota: the status's ETA says so, with the remedy", func(t *testing.T) { testThrottledBacklog(t, app) })
	t.Run("catch-up drains are logged like timer drains", func(t *testing.T) { testCatchUpLogs(t, app) })
	t.Run("a catch-up body over 1 MiB gets 413 through res", func(t *testing.T) { testBodyTooLarge(t, app) })
	t.Run("offset reset: dry run, apply, bad input, refused while draining", func(t *testing.T) { testOffsets(t, app) })
	t.Run("pause and resume survive a restart and show in status", func(t *testing.T) { testPauseResume(t, app) })
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

	// Before any drain the readiness check finds every hub refusing the
	// key: a problem at once.
	if code, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, ""); code != http.StatusOK || st["ok"] != false {
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
	if code != http.StatusOK || st["ok"] != false {
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
	waitCaughtUp(t, withKey(t, started, key))
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
	ended := regexp.MustCompile(`level=INFO msg="catch-up ended" run="catch-up ` + id + `" trigger=catchup state="caught up" drains=\d+ records=500 lag=0`)
	for deadline := time.Now().Add(5 * time.Second); !ended.MatchString(out.String()) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the run logs its end just after its state changes
	}
	if !regexp.MustCompile(`msg="catch-up started" run="catch-up `+id+`" trigger=catchup`).MatchString(out.String()) || !ended.MatchString(out.String()) {
		t.Errorf("catch-up start and end not logged:\n%s", out)
	}
}

// waitCaughtUp polls a catch-up's status URL until the run is caught up.
// withKey returns the status_url of a started catch-up, which must not
// hold the function key, and the same URL with key added.
func withKey(t *testing.T, started map[string]any, key string) string {
	t.Helper()
	u := fmt.Sprint(started["status_url"])
	if strings.Contains(u, key) {
		t.Fatalf("status_url echoes the function key: %s", u)
	}
	return u + "&code=" + url.QueryEscape(key)
}

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
	// Exactly 1 MiB is read (a pattern that matches no mirrored topic:
	// 400 naming the field); one byte more is 413.
	body := `{"topics":"` + strings.Repeat("a", 1<<20-len(`{"topics":""}`)) + `"}`
	if code, m, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, body); code != http.StatusBadRequest || m["field"] != "topics" {
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

// resetResult is the body of POST /api/offsets.
type resetResult struct {
	DryRun bool   `json:"dry_run"`
	Error  string `json:"error"`
	Field  string `json:"field"`
	Reset  struct {
		Applied    bool  `json:"applied"`
		Skipped    int64 `json:"skipped"`
		Resent     int64 `json:"resent"`
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Before    int64  `json:"before"`
			After     int64  `json:"after"`
			LogStart  int64  `json:"log_start"`
			LogEnd    int64  `json:"log_end"`
			Skipped   int64  `json:"skipped"`
			Resent    int64  `json:"resent"`
		} `json:"partitions"`
	} `json:"reset"`
}

func postOffsets(t *testing.T, url, body string) (int, resetResult, string) {
	t.Helper()
	code, _, raw := call(t, "POST", url, body)
	var r resetResult
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatalf("offsets %s: %d %s", body, code, raw)
	}
	return code, r, raw
}

// topicLag sums the status lag of one topic.
func topicLag(t *testing.T, status map[string]any, topic string) float64 {
	t.Helper()
	var sum float64
	for _, p := range status["lag"].(map[string]any)["partitions"].([]any) {
		if pm := p.(map[string]any); pm["topic"] == topic {
			sum += pm["lag"].(float64)
		}
	}
	return sum
}

func testOffsets(t *testing.T, app string) {
	w := newWorld(t)
	w.produce(t, 1000) // 200 per topic
	out := &capture{}
	settings := w.settings()
	settings["MIRROR_INFLIGHT_BYTES"] = "16KiB" // small batches, so that a drain can be caught running
	h, front := startHost(t, app, settings, out)
	key := h.Keys().DefaultKey()
	url := front.URL + "/api/offsets?code=" + key
	ctx := context.Background()
	if res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil || !res.Succeeded() {
		t.Fatalf("timer: %v %+v", err, res)
	}

	// Dry run (the default): before -> after per partition, nothing changes.
	code, r, raw := postOffsets(t, url, `{"topics":["prod.test1"],"to":"earliest"}`)
	if code != http.StatusOK || !r.DryRun || r.Reset.Applied || len(r.Reset.Partitions) != 4 || r.Reset.Resent != 200 || r.Reset.Skipped != 0 {
		t.Fatalf("dry run: %d %s", code, raw)
	}
	for _, p := range r.Reset.Partitions {
		if p.Before != p.LogEnd || p.After != 0 || p.Resent != p.Before {
			t.Errorf("dry run partition %+v", p)
		}
	}
	_, st, _ := call(t, "GET", front.URL+"/api/status?code="+key, "")
	if totalLag(t, st) != 0 {
		t.Fatalf("a dry run changed offsets: lag %v", totalLag(t, st))
	}

	// Applied with the confirmation: lag is back, the timer re-sends them,
	// and the reset is logged with who, what and when.
	t0 := time.Now()
	code, r, raw = postOffsets(t, url, `{"topics":["prod.test1"],"to":"earliest","confirm":true,"by":"alice"}`)
	t.Logf("apply took %s", time.Since(t0))
	if code != http.StatusOK || r.DryRun || !r.Reset.Applied || r.Reset.Resent != 200 {
		t.Fatalf("apply: %d %s", code, raw)
	}
	_, st, _ = call(t, "GET", front.URL+"/api/status?code="+key, "")
	if got := topicLag(t, st, "prod.test1"); got != 200 || totalLag(t, st) != 200 {
		t.Fatalf("after the reset: prod.test1 lag %v, total %v", got, totalLag(t, st))
	}
	if !regexp.MustCompile(`msg="offsets reset" by="key default \(alice\)" at=\S+ topic=prod.test1 partition=\d before=\d+ after=0 to=earliest`).MatchString(out.String()) {
		t.Errorf("applied reset not logged with who/what/when:\n%s", out)
	}
	if res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil || !res.Succeeded() {
		t.Fatalf("timer after reset: %v %+v", err, res)
	}
	if got := w.emu.Stats().EventsStored; got != 1200 {
		t.Errorf("Event Hubs holds %d events after re-sending prod.test1, want 1200", got)
	}

	// To a timestamp: only records produced at or after it are left.
	time.Sleep(20 * time.Millisecond)
	since := time.Now()
	w.produce(t, 50) // 10 to prod.test3
	code, r, raw = postOffsets(t, url, fmt.Sprintf(`{"topics":["prod.test3"],"to":"timestamp","timestamp":%q}`, since.UTC().Format(time.RFC3339Nano)))
	var left int64
	for _, p := range r.Reset.Partitions {
		left += p.LogEnd - p.After
	}
	if code != http.StatusOK || left != 10 || r.Reset.Skipped != 0 || r.Reset.Resent != 0 {
		t.Errorf("timestamp dry run: %d, %d records left, %s", code, left, raw)
	}
	// An explicit offset on one partition: skipped records are counted.
	code, r, raw = postOffsets(t, url, `{"topics":["prod.test2"],"partitions":[1],"to":"latest"}`)
	if code != http.StatusOK || len(r.Reset.Partitions) != 1 || r.Reset.Partitions[0].Partition != 1 {
		t.Errorf("latest on one partition: %d %s", code, raw)
	}

	// Bad input: 400 naming the field.
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for body, field := range map[string]string{
		`{"topics":["nope"],"to":"earliest"}`:                                     "topics",
		`{"topics":["prod.test1"],"to":"offset","offset":99999}`:                  "offset",
		`{"topics":["prod.test1"],"to":"offset","offset":-1}`:                     "offset",
		`{"topics":["prod.test1"],"to":"timestamp","timestamp":"` + future + `"}`: "timestamp",
		`{"topics":["prod.test1"],"to":"timestamp","timestamp":"yesterday"}`:      "timestamp",
		`{"topics":["prod.test1"],"partitions":[9],"to":"earliest"}`:              "partitions",
		`{"topics":["prod.test1"],"to":"sideways"}`:                               "to",
		`{"topics":["prod.test1"]}`:                                               "to",
		`{"to":"earliest"}`:                                                       "topics",
		`{"topics":"(prod","to":"earliest"}`:                                      "topics",
		`{"topics":"nothing\\..*","to":"earliest"}`:                               "topics",
		`{"topics":7,"to":"earliest"}`:                                            "topics",
		`{"topics":["prod.test1"],"to":"earliest","confirm":"yes"}`:               "confirm",
		`{"topics":["prod.test1"],"to":"earliest","dry_run":false}`:               "dry_run",
		`{"topics":["prod.test1"],`:                                               "body",
		``:                                                                        "body",
	} {
		code, r, raw := postOffsets(t, url, body)
		if code != http.StatusBadRequest || r.Field != field || !strings.Contains(r.Error, field) || strings.Contains(r.Error, "\n") {
			t.Errorf("body %q: %d %s, want 400 naming %q", body, code, raw, field)
		}
	}

	// Refused while a drain holds the partitions.
	w.produce(t, 3000)
	w.emu.Faults().DelayDispositions(100 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{})
	}()
	before := w.emu.Stats().EventsStored
	for w.emu.Stats().EventsStored == before {
		time.Sleep(5 * time.Millisecond)
	}
	t1 := time.Now()
	code, r, raw = postOffsets(t, url, `{"topics":["prod.test1"],"to":"latest","confirm":true}`)
	t.Logf("refusal took %s: %s", time.Since(t1), r.Error)
	if code != http.StatusConflict {
		t.Fatalf("reset during a drain: %d %s", code, raw)
	}
	if !strings.Contains(r.Error, "drain") {
		t.Errorf("409 without the reason: %s", raw)
	}
	w.emu.Faults().Reset()
	<-done
}

func testPauseResume(t *testing.T, app string) {
	w := newWorld(t)
	out := &capture{}
	// The host restarts the handler by killing it, so the old member never
	// leaves the group: the broker's minimum session (6 s) lets the new one
	// join within its 20 s drain's join bound (a third of the budget); the
	// default 30 s session would keep the join waiting for the rebalance
	// timeout (10 s).
	settings := w.settings()
	settings[config.KafkaSessionTimeout] = "6s"
	h, front := startHost(t, app, settings, out)
	key := h.Keys().DefaultKey()
	ctx := context.Background()
	code, m, raw := call(t, "POST", front.URL+"/api/pause?code="+key, `{"topic":"prod.test1","reason":"consumer migration","by":"bob"}`)
	if code != http.StatusOK || m["pause"] == nil {
		t.Fatalf("pause: %d %s", code, raw)
	}
	for body, field := range map[string]string{`{"topic":"nope"}`: "topic", `{}`: "topic", `{"topic":1}`: "topic", `[`: "body"} {
		if code, m, raw := call(t, "POST", front.URL+"/api/pause?code="+key, body); code != http.StatusBadRequest || !strings.HasPrefix(fmt.Sprint(m["field"]), field) {
			t.Errorf("pause %s: %d %s", body, code, raw)
		}
	}
	// A new handler process (a restart, or another instance) sees the pause.
	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	w.produce(t, 100) // 20 per topic
	if res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil || !res.Succeeded() {
		t.Fatalf("timer: %v %+v", err, res)
	} else if !strings.Contains(res.Logs[0], "paused topics left out: prod.test1") {
		t.Errorf("timer report does not name the paused topic: %q", res.Logs[0])
	}
	if got := w.emu.Stats().EventsStored; got != 80 {
		t.Errorf("Event Hubs holds %d events, want 80 (prod.test1 paused)", got)
	}
	code, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, "")
	if code != http.StatusOK || topicLag(t, st, "prod.test1") != 20 || !strings.Contains(raw, `"paused":[{"topic":"prod.test1","paused":true,"by":"key default (bob)"`) || !strings.Contains(raw, "consumer migration") {
		t.Fatalf("status while paused: %d %s", code, raw)
	}
	// A catch-up leaves the paused topic out and ends caught up.
	w.produce(t, 100)
	code, started, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, `{"max_duration":"20s"}`)
	if code != http.StatusAccepted {
		t.Fatalf("catch-up while paused: %d %s", code, raw)
	}
	waitCaughtUp(t, withKey(t, started, key))
	if got := w.emu.Stats().EventsStored; got != 160 {
		t.Errorf("Event Hubs holds %d events after a catch-up, want 160 (prod.test1 paused)", got)
	}
	if code, _, raw := call(t, "POST", front.URL+"/api/resume?code="+key, `{"topic":"prod.test1"}`); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, raw)
	}
	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil || !res.Succeeded() {
		t.Fatalf("timer after resume: %v %+v", err, res)
	}
	if got := w.emu.Stats().EventsStored; got != 200 {
		t.Errorf("Event Hubs holds %d events after resume, want 200", got)
	}
	_, st, raw = call(t, "GET", front.URL+"/api/status?code="+key, "")
	if totalLag(t, st) != 0 || !strings.Contains(raw, `"paused":[]`) {
		t.Errorf("status after resume: %s", raw)
	}
	if !strings.Contains(out.String(), `msg="topic paused" topic=prod.test1 by="key default (bob)"`) || !strings.Contains(out.String(), `msg="topic resumed" topic=prod.test1`) {
		t.Errorf("pause and resume not logged:\n%s", out)
	}
}

func testThrottled(t *testing.T, app string) {
	w := newWorld(t)
	w.produce(t, 100)
	settings := w.settings()
	settings["MIRROR_MAX_DURATION"] = "2s"
	out := &capture{}
	h, front := startHost(t, app, settings, out)
	key := h.Keys().DefaultKey()
	ctx := context.Background()
	w.emu.Faults().RejectFraction(1, emulator.ConditionServerBusy)
	if res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil || res.Succeeded() {
		t.Fatalf("timer while Event Hubs is busy: %v %+v", err, res)
	}
	_, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, "")
	reason, _ := st["reason"].(string)
	if st["ok"] != false || !strings.HasPrefix(reason, "throttled on ") {
		t.Fatalf("status after a throttled drain: %s", raw)
	}
	w.emu.Faults().Reset()
	// A failure names the drain lines first: CI shows the first lines
	// of a failed test only.
	if res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil || !res.Succeeded() {
		t.Fatalf("timer after the fault: %v; drain lines %q; response %+v", err, drainLine.FindAllString(out.String(), -1), res)
	}
	if _, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, ""); st["ok"] != true || totalLag(t, st) != 0 {
		t.Errorf("status after a clean drain: reason %q, lag %v; drain lines %q; status %s", st["reason"], st["lag"], drainLine.FindAllString(out.String(), -1), raw)
	}
	t.Logf("reason after the throttled drain: %s", reason)
}

// testThrottledBacklog: drains that Event Hubs throttled but that made
// progress (not failures) leave a backlog; the status's backlog line, in
// the JSON and on the page, gives the ETA at the namespace's rate and what
// to do about it.
func testThrottledBacklog(t *testing.T, app string) {
	w := newWorld(t)
	w.produce(t, 100)
	settings := w.settings()
	settings["MIRROR_MAX_RECORDS"] = "30"
	settings["MIRROR_FOLLOW"] = "false" // a drain that returns once at its bound, whenever the test runs
	out := &capture{}
	h, front := startHost(t, app, settings, out)
	key := h.Keys().DefaultKey()
	ctx := context.Background()
	for i := range 2 {
		w.emu.Faults().RejectSends(2, emulator.ConditionServerBusy)
		if res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil || !res.Succeeded() {
			t.Fatalf("timer %d, throttled but making progress: %v %+v", i, err, res)
		}
	}
	// The rate needs a second since the first drain ended (its first
	// sample).
	time.Sleep(1100 * time.Millisecond)
	_, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, "")
	backlog, _ := st["backlog"].(map[string]any)
	summary, _ := backlog["summary"].(string)
	if backlog["throttled"] != true || backlog["remedy"] != mirror.ThrottledRemedy || !strings.Contains(summary, "at the namespace's ") ||
		!strings.HasSuffix(summary, "; raise `eventhubs_capacity` or enable auto-inflate") || !strings.Contains(summary, " records behind") {
		t.Fatalf("status backlog after throttled drains: %v\n%s", backlog, raw)
	}
	t.Logf("backlog: %s", summary)
	// The page's backlog line (a request later: its times may differ).
	_, _, page := call(t, "GET", front.URL+"/api/status?format=html&code="+key, "")
	line := regexp.MustCompile(`<p id="backlog"[^>]*>([^<]*)</p>`).FindStringSubmatch(page)
	if line == nil || !strings.Contains(html.UnescapeString(line[1]), "at the namespace's ") ||
		!strings.HasSuffix(html.UnescapeString(line[1]), "; raise `eventhubs_capacity` or enable auto-inflate") {
		t.Errorf("the status page's backlog line %q lacks the namespace's rate and the remedy:\n%s", line, page)
	}
	if !strings.Contains(out.String(), " throttled=2") {
		t.Errorf("no drain line says throttled=2:\n%s", out)
	}
}
