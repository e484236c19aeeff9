package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
)

// TestHungRouteAnswersAtItsDeadline: the host never cancels its request to
// the handler (azure-functions-host DefaultHttpWorkerService.cs sends it
// without a cancellation token, and funchost now does the same), so a route
// blocked on Kafka would run until functionTimeout, when the host kills the
// whole handler. Each route has a deadline of its own: a status whose lag
// read stalls at the broker answers 504 with one line naming the function
// and the deadline, the handler process lives on, and the timer drains
// once the broker answers again.
func TestHungRouteAnswersAtItsDeadline(t *testing.T) {
	app := buildApp(t)
	w := newWorld(t)
	w.produce(t, 50)
	settings := w.settings()
	settings[config.MirrorHTTPDeadline] = "2s"
	h, front := startHost(t, app, settings, &capture{})
	key := h.Keys().DefaultKey()
	pid := h.PID()

	// Hold the first ListOffsets at the broker until the test ends (the
	// status's lag read).
	release := make(chan struct{})
	var taken atomic.Bool
	w.cluster.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		w.cluster.KeepControl()
		if taken.CompareAndSwap(false, true) {
			w.cluster.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	released := false
	releaseOnce := func() {
		if !released {
			released = true
			close(release)
		}
	}
	defer releaseOnce()

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/api/status?code="+key, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("status with a stalled broker got no answer within 8 s (deadline 2 s): %v", err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body.String(), "Status did not finish within its deadline of 2s") {
		t.Fatalf("status with a stalled broker: %d %s after %s; want 504 naming Status and its deadline", resp.StatusCode, body.String(), time.Since(start))
	}
	if strings.Count(strings.TrimSpace(body.String()), "\n") > 0 {
		t.Errorf("the answer is not one line: %q", body.String())
	}
	if !taken.Load() {
		t.Fatal("the broker never saw the lag read it was to stall")
	}

	releaseOnce()
	if got := h.PID(); got != pid {
		t.Errorf("the handler process changed (%d, then %d): the hung route cost the process", pid, got)
	}
	res, err := h.InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{})
	if err != nil || !res.Succeeded() {
		t.Fatalf("timer after the hung route: %v %+v", err, res)
	}
	if got := w.emu.Stats().EventsStored; got != 50 {
		t.Errorf("Event Hubs holds %d events, want 50", got)
	}
}

// TestEveryHTTPRouteHasADeadline: every HTTP function's deadline is well
// under App Service's 230 s front-end limit (funchost.DefaultFrontEndTimeout),
// and only the timer has none.
func TestEveryHTTPRouteHasADeadline(t *testing.T) {
	for _, r := range newServer(&app{}).Routes() {
		if r.Method != http.MethodPost {
			continue
		}
		d, ok := defaultRouteDeadline(r.Path)
		switch {
		case r.Path == "/MirrorTimer":
			if ok {
				t.Errorf("the timer has a route deadline; MIRROR_MAX_DURATION bounds it")
			}
		case !ok:
			t.Errorf("%s has no deadline", r.Path)
		case d.limit > config.MaxHTTPDeadline || d.limit >= funchost.DefaultFrontEndTimeout:
			t.Errorf("%s: deadline %s, want at most %s", r.Path, d.limit, config.MaxHTTPDeadline)
		}
	}
}
