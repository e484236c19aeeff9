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
	deadline := time.Now().Add(60 * time.Second)
	var st map[string]any
	var raw string
	for {
		_, st, raw = call(t, "GET", front.URL+"/api/status?code="+key, "")
		if st["ok"] == false {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status stayed OK during the outage: %s", raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
	running, _ := st["running"].([]any)
	if !strings.Contains(fmt.Sprint(st["reason"]), "sends to event hub") || len(running) != 1 || !strings.Contains(raw, `"outages":[`) {
		t.Errorf("the status does not show the failing sends of the running drain: %s", raw)
	}
	if !strings.Contains(raw, `"remedy":`) {
		t.Errorf("no remedy: %s", raw)
	}

	w.emu.Faults().RejectFraction(0, "")
	deadline = time.Now().Add(60 * time.Second)
	for {
		_, st, raw = call(t, "GET", front.URL+"/api/status?code="+key, "")
		if st["ok"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status stayed not OK after Event Hubs came back: %s", raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got := w.emu.Stats().EventsStored; got != 200 {
		t.Errorf("%d events stored after the outage, want 200", got)
	}
}
