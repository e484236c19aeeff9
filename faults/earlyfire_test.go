package faults

import (
	"context"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestEarlyFireKeepsTheHandoverChain (issue 49, item 4): the host's timer
// fires ahead of its occurrence at times (funchost FireEarly); each
// invocation still follows to the next tick and hands its drain over, so
// records never wait a whole period; nothing is lost.
func TestEarlyFireKeepsTheHandoverChain(t *testing.T) {
	e := newEnv(t, envConfig{})
	ctx := context.Background()
	h := e.startHandlerWith("a", map[string]string{
		config.MirrorSchedule: "*/3 * " + hoursExcept(time.Now()) + " * * *",
		config.MirrorFollow:   "true",
	}, func(o *funchost.Options) { o.FireEarly = 200 * time.Millisecond })
	p := e.startProducer(producerConfig{Batch: 4})
	schedCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.host.RunSchedules(schedCtx) }()
	// Eight ticks, every one fired early; the first two are left out (the
	// handler's first join).
	const ticks = 8
	deadline := time.Now().Add(3 * time.Minute)
	for len(timerResults(h)) < ticks {
		if time.Now().After(deadline) {
			t.Fatalf("%d timer runs within 3 min, want %d", len(timerResults(h)), ticks)
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	early, followed := 0, 0
	for i, res := range timerResults(h)[2:] {
		if st := res.Timer.ScheduleStatus; st != nil && res.Start.Before(st.Next) {
			early++
		}
		records, stopped, _ := drainSummary(res)
		t.Logf("tick %d: fired %s before its occurrence, %d records, stopped: %s", i+2, res.Timer.ScheduleStatus.Next.Sub(res.Start).Round(time.Millisecond), records, stopped)
		if stopped == mirror.StopHandedOver {
			followed++
		}
	}
	if early == 0 {
		t.Fatal("no run fired early")
	}
	if followed < ticks-3 {
		t.Errorf("%d of %d early runs handed their drain over, want all but one", followed, ticks-2)
	}
	p.stop()
	h.settle(ctx)
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v := e.verify(expectation{Records: recs}); v.Produced == 0 || v.Lost != 0 || v.Unexpected != 0 || v.Mismatched != 0 {
		t.Errorf("produced %d, lost %d, unexpected %d, mismatched %d", v.Produced, v.Lost, v.Unexpected, v.Mismatched)
	}
}

// timerResults are h's timer invocations (its status calls are invocations
// too).
func timerResults(h *handler) []*funchost.Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*funchost.Result
	for _, res := range h.results {
		if res.Timer != nil {
			out = append(out, res)
		}
	}
	return out
}
