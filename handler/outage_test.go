package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator"
)

// Event Hubs refuses every send while a catch-up drains: GET /api/status
// turns ok:false within seconds, while the drain still runs, naming the
// failing sends and the running drain's outage; once Event Hubs accepts
// again the problem clears as soon as the sends work.
func TestStatusDuringAnOutage(t *testing.T) {
	app := buildApp(t)
	w := newWorld(t)
	w.produce(t, 200)
	settings := w.settings()
	settings["MIRROR_MAX_DURATION"] = "2m"
	h, front := startHost(t, app, settings, &capture{})
	key := h.Keys().DefaultKey()

	w.emu.Faults().RejectFraction(1, emulator.ConditionInternalError)
	if code, _, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, `{"max_duration":"2m"}`); code != http.StatusAccepted {
		t.Fatalf("catch-up: %d %s", code, raw)
	}
	st, raw := waitStatus(t, front.URL+"/api/status?code="+key, false, 60*time.Second, "the status stayed OK during the outage")
	running, _ := st["running"].([]any)
	if !strings.Contains(fmt.Sprint(st["reason"]), "Event Hubs") || len(running) != 1 || !strings.Contains(raw, `"outages":[`) {
		t.Errorf("the status does not show the failing sends of the running drain: %s", raw)
	}
	if !strings.Contains(raw, `"remedy":`) {
		t.Errorf("no remedy: %s", raw)
	}

	w.emu.Faults().RejectFraction(0, "")
	waitStatus(t, front.URL+"/api/status?code="+key, true, 60*time.Second, "the status stayed not OK after Event Hubs came back")
	if got := w.emu.Stats().EventsStored; got != 200 {
		t.Errorf("%d events stored after the outage, want 200", got)
	}
}

// Two instances on one consumer group: the first runs a catch-up while
// Event Hubs refuses every send; the second runs no drain and only serves
// the status. The second's status turns ok:false within seconds (not after
// MIRROR_MAX_BACKLOG_AGE), naming the failing sends and the instance that
// sees them, and turns OK again once Event Hubs accepts and the drain has
// mirrored everything.
func TestStatusOfAnotherInstanceDuringAnOutage(t *testing.T) {
	app := buildApp(t)
	w := newWorld(t)
	w.produce(t, 200)
	settings := w.settings()
	settings["MIRROR_MAX_DURATION"] = "2m"
	settings["MIRROR_SCHEDULE"] = "0 0 0 1 1 *" // no timer drain in the test
	first, drainer := startHost(t, app, settings, &capture{})
	other, observer := startHost(t, app, settings, &capture{})
	key := other.Keys().DefaultKey()

	_, st, raw := call(t, "GET", observer.URL+"/api/status?code="+key, "")
	if st["ok"] != true {
		t.Fatalf("the second instance is not OK before the outage: %s", raw)
	}
	w.emu.Faults().RejectFraction(1, emulator.ConditionInternalError)
	if code, _, raw := call(t, "POST", drainer.URL+"/api/catchup?code="+first.Keys().DefaultKey(), `{"max_duration":"2m"}`); code != http.StatusAccepted {
		t.Fatalf("catch-up: %d %s", code, raw)
	}
	started := time.Now()
	st, raw = waitStatus(t, observer.URL+"/api/status?code="+key, false, 30*time.Second, "the status of the instance that runs no drain stayed OK for 30 s of the outage")
	t.Logf("the second instance turned red %s after the catch-up started", time.Since(started).Round(100*time.Millisecond))
	if running, _ := st["running"].([]any); len(running) != 0 {
		t.Errorf("the second instance runs a drain: %s", raw)
	}
	if reason := fmt.Sprint(st["reason"]); !strings.HasPrefix(reason, "Event Hubs `") || !strings.Contains(raw, "seen by instance") {
		t.Errorf("the reason does not name Event Hubs, or the details not the instance that sees the failing sends: %s", raw)
	}
	if !strings.Contains(raw, `"remedy":`) {
		t.Errorf("no remedy: %s", raw)
	}

	w.emu.Faults().RejectFraction(0, "")
	waitStatus(t, observer.URL+"/api/status?code="+key, true, 90*time.Second, "the second instance stayed not OK after Event Hubs came back")
	if got := w.emu.Stats().EventsStored; got != 200 {
		t.Errorf("%d events stored after the outage, want 200", got)
	}
}

// waitStatus polls the status at url until its ok is want, failing with
// what after within.
func waitStatus(t *testing.T, url string, want bool, within time.Duration, what string) (map[string]any, string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, st, raw := call(t, "GET", url, "")
		if st["ok"] == want {
			return st, raw
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
