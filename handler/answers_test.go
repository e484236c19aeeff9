package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/functions"
)

// TestCatchUpAnswersLikeTheOtherRoutes (issue 47 item 4), through the real
// handler under the local host: a catch-up's 400s name the field and no Go
// type, topics that match nothing are refused as pause refuses them, the
// answer says which key its status_url needs (and the URL works with it),
// and a catch-up started beside the timer's following drain says that drain
// is mirroring its partitions.
func TestCatchUpAnswersLikeTheOtherRoutes(t *testing.T) {
	app := buildApp(t)
	w := newWorld(t)
	w.produce(t, 200)
	settings := w.settings()
	// Hourly: the following drain's window is bounded by
	// MIRROR_MAX_DURATION, wherever the test falls in the minute.
	settings["MIRROR_SCHEDULE"] = "0 0 * * * *"
	out := &capture{}
	h, front := startHost(t, app, settings, out)
	key := h.Keys().DefaultKey()
	catchUp := front.URL + "/api/catchup?code=" + key

	for _, c := range []struct{ body, field, says string }{
		{`[1,2]`, "body", "want a JSON object, got JSON array"},
		{`"prod.test1"`, "body", "want a JSON object, got JSON string"},
		{`{"max_duration":5}`, "max_duration", "want a string, got JSON number"},
		{`{"max_duration":"soon"}`, "max_duration", "positive duration"},
		{`{"topics":5}`, "topics", "topic names"},
		{`{"topics":"("}`, "topics", ""},
		{`{"unknown":1}`, "unknown", "unknown field"},
		{`not json`, "body", "malformed JSON"},
		// Topics that match no mirrored topic: refused as pause refuses them.
		{`{"topics":["prod.nope"]}`, "topics", "prod.nope"},
		{`{"topics":"nope\\..*"}`, "topics", "matches no mirrored topic"},
	} {
		code, m, raw := call(t, "POST", catchUp, c.body)
		if code != http.StatusBadRequest || m["field"] != c.field || !strings.Contains(fmt.Sprint(m["error"]), c.says) {
			t.Errorf("catch-up body %s: %d %s; want 400 with field %q saying %q", c.body, code, raw, c.field, c.says)
		}
		if strings.Contains(raw, "main.") || strings.Contains(raw, "Go value") {
			t.Errorf("catch-up body %s: the answer names a Go type: %s", c.body, raw)
		}
		if strings.HasPrefix(c.body, `{"topics":`) && c.field == "topics" && strings.Contains(c.body, "nope") {
			pc, pm, praw := call(t, "POST", front.URL+"/api/pause?code="+key, c.body)
			if pc != code || pm["field"] != m["field"] {
				t.Errorf("pause answers %s with %d %s, catch-up with %d %s", c.body, pc, praw, code, raw)
			}
		}
	}

	// The timer's following drain (an invocation fired by the schedule).
	timer := make(chan error, 1)
	go func() {
		res, err := h.InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{Status: &functions.ScheduleStatus{Next: time.Now(), Last: time.Now().Add(-time.Hour)}})
		if err == nil && !res.Succeeded() {
			err = fmt.Errorf("timer failed: %+v", res)
		}
		timer <- err
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, "")
		if running, _ := st["running"].([]any); len(running) > 0 {
			if r, _ := running[0].(map[string]any); r["follow_until"] != nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no following drain in the status: %s", raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, started, raw := call(t, "POST", catchUp, `{"topics":["prod.test1"],"max_duration":"5s"}`)
	if code != http.StatusAccepted {
		t.Fatalf("catch-up beside the follower: %d %s", code, raw)
	}
	if note := fmt.Sprint(started["note"]); !strings.Contains(note, "following drain timer") || !strings.Contains(note, "is mirroring the") || started["follower"] == nil {
		t.Errorf("the catch-up's answer does not say the following drain mirrors its partitions: %s", raw)
	}
	// status_url says which key it needs, and works with it as said.
	statusURL := fmt.Sprint(started["status_url"])
	if strings.Contains(statusURL, key) || !strings.Contains(fmt.Sprint(started["status_key"]), "&code=<function key>") {
		t.Errorf("status_url %q and status_key %q", statusURL, started["status_key"])
	}
	if code, st, raw := call(t, "GET", statusURL+"&code="+key, ""); code != http.StatusOK || st["run"] == nil {
		t.Errorf("status_url with the key, as status_key says: %d %s", code, raw)
	}
	if err := <-timer; err != nil {
		t.Error(err)
	}
}
