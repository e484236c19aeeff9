package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/mirror"
)

// The handler follows on a schedule, its drain handed over from invocation
// to invocation while a producer writes; it is killed (SIGKILL) right after
// an invocation returned, while the drain it handed over runs between the
// ticks with records in flight. Nothing is lost: the new process starts
// from the committed positions, and every record produced is in Event Hubs
// once the handler settled.
func TestHandlerKilledBetweenTicksLosesNothing(t *testing.T) {
	e := newEnv(t, envConfig{})
	ctx := context.Background()
	// Every 3 s: each window ends 0.5 s before the next tick.
	h := e.startHandler("a", map[string]string{config.MirrorSchedule: "*/3 * * * * *", config.MirrorFollow: "true"})
	p := e.startProducer(producerConfig{Batch: 4})
	stopSched := h.fireSchedule(ctx)

	handedOver := h.handedOver
	const kills = 2
	// Long: on a loaded machine the handler takes a minute to start.
	limit := 4 * time.Minute
	for i := range kills {
		// Wait for an invocation that handed its drain over, then kill
		// at once: the next tick is 0.5 s away.
		want := handedOver() + 1
		deadline := time.Now().Add(limit)
		for handedOver() < want {
			if time.Now().After(deadline) {
				h.mu.Lock()
				for _, r := range h.results {
					t.Logf("result: err %v, logs %q", r.Err, reportLines(r))
				}
				h.mu.Unlock()
				t.Fatalf("kill %d: no invocation handed its drain over within 4 min; output:\n%s", i, tail(h.out.Stdout(), 4000))
			}
			sleepCtx(ctx, 5*time.Millisecond)
		}
		returned := time.Now()
		// The drain running now started before the invocation returned:
		// it is the one handed over, not one of the next tick.
		kept := false
		for _, d := range h.runningDrains(ctx) {
			kept = kept || d.Started.Before(returned)
		}
		e.inject("SIGKILL between ticks")
		if err := h.host.Restart(ctx); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		if !kept {
			t.Errorf("kill %d: no drain handed over ran between the ticks", i)
		}
	}
	stopSched()
	p.stop()
	h.settle(ctx)

	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	t.Logf("produced %d, mirrored %d, lost %d, duplicates %d, unexpected %d, mismatched %d", v.Produced, v.Mirrored, v.Lost, v.Duplicates, v.Unexpected, v.Mismatched)
	if v.Produced == 0 || v.Lost != 0 || v.Unexpected != 0 || v.Mismatched != 0 {
		t.Errorf("after %d kills between ticks: produced %d, lost %d, unexpected %d, mismatched %d; want nothing lost", kills, v.Produced, v.Lost, v.Unexpected, v.Mismatched)
		e.diagnose()
	}
}

// fireSchedule fires the schedule's occurrences on h until the returned
// stop is called (stop waits for the running invocation): the tests fire
// them themselves, with the schedule status the host sends when it fires a
// schedule monitored (useMonitor, the default from a one-minute period up).
func (h *handler) fireSchedule(ctx context.Context) (stop func()) {
	h.t.Helper()
	sched, ok := h.host.Schedule(timerFunction)
	if !ok {
		h.t.Fatal("no schedule")
	}
	schedCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			tick := sched.Next(time.Now())
			if !sleepCtx(schedCtx, time.Until(tick)) {
				return
			}
			_, _ = h.host.InvokeTimer(context.WithoutCancel(schedCtx), timerFunction, funchost.TimerInvocation{Status: &functions.ScheduleStatus{Next: tick}})
		}
	}()
	return func() { cancel(); <-done }
}

// handedOver counts h's invocations whose drain handed over with records:
// its drain was running (not still joining the group a killed process
// left) when the window ended.
func (h *handler) handedOver() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.results {
		if records, stopped, ok := drainSummary(r); ok && stopped == mirror.StopHandedOver && records > 0 {
			n++
		}
	}
	return n
}

// runningDrains reads the drains running now from the status endpoint.
func (h *handler) runningDrains(ctx context.Context) []mirror.RunningDrain {
	_, st, err := h.status(ctx, "")
	if err != nil {
		h.t.Logf("status: %v", err)
		return nil
	}
	return st.Running
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[strings.LastIndex(s[:len(s)-n], "\n")+1:]
}
