package faults

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/mirror"
)

// Issue 49, item 2: the Functions host restarts the handler around the
// work it does outside invocations (the drain handed over between ticks, a
// background catch-up) without notice: a worker restart kills it (SIGKILL,
// never SIGTERM: funchost Restart), and a ScriptHost restart
// (RestartHostAsync: funchost RestartHost) starts a new handler on a new
// port before the old one is orphaned and killed. With
// MIRROR_DEDUPLICATE=true, each costs nothing: nothing lost, nothing
// duplicated.

// hostRestart is one way the host restarts the handler.
type hostRestart struct {
	name string
	// inFlight: the restart lands while a following invocation runs (an
	// overlapping restart lets it finish); otherwise right after an
	// invocation handed its drain over, between the ticks.
	inFlight bool
	restart  func(ctx context.Context, h *handler) error
}

// hostRestarts are the ways the host restarts the handler.
func hostRestarts() []hostRestart {
	return []hostRestart{
		{"worker restart (SIGKILL)", false, func(ctx context.Context, h *handler) error { return h.host.Restart(ctx) }},
		{"overlapping host restart (RestartHostAsync)", true, func(ctx context.Context, h *handler) error {
			orphaned, err := h.host.RestartHost(ctx)
			if err != nil {
				return err
			}
			select {
			case <-orphaned:
			case <-time.After(funchost.OrphanWait + 5*time.Second):
			}
			return nil
		}},
	}
}

// TestHostRestartsDuringHandover: a following drain handed over from tick
// to tick (every 3 s) while a producer writes; the host restarts the
// handler twice, each way; nothing is lost and nothing duplicated.
func TestHostRestartsDuringHandover(t *testing.T) {
	for _, r := range hostRestarts() {
		t.Run(r.name, func(t *testing.T) { hostRestartDuringHandover(t, r) })
	}
}

func hostRestartDuringHandover(t *testing.T, r hostRestart) {
	e := newEnv(t, envConfig{})
	ctx := context.Background()
	h := e.startHandler("a", map[string]string{config.MirrorSchedule: "*/3 * * * * *", config.MirrorFollow: "true", config.MirrorDeduplicate: "true"})
	p := e.startProducer(producerConfig{Batch: 4})
	stopSched := h.fireSchedule(ctx)
	handedOver := h.handedOver
	const restarts = 2
	for i := range restarts {
		want := handedOver() + 1
		deadline := time.Now().Add(4 * time.Minute)
		for handedOver() < want {
			if time.Now().After(deadline) {
				t.Fatalf("restart %d: no invocation handed its drain over within 4 min; output:\n%s", i, tail(h.out.Stdout(), 4000))
			}
			sleepCtx(ctx, 5*time.Millisecond)
		}
		if r.inFlight {
			// 1 s into the next window: the following invocation runs.
			sleepCtx(ctx, time.Second)
		}
		where := "between ticks"
		if r.inFlight {
			where = "during a following invocation"
		}
		e.inject(r.name + " " + where)
		start := time.Now()
		if err := r.restart(ctx, h); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
		t.Logf("restart %d: %s %s took %s", i, r.name, where, time.Since(start).Round(time.Millisecond))
	}
	stopSched()
	p.stop()
	h.settle(ctx)
	verifyNothingLostNorDuplicated(t, e, r.name)
}

// TestHostRestartsDuringCatchUp: a background catch-up runs (no invocation
// holds it) when the host restarts the handler; the run dies with the
// process, and its status_url reads it as lost on the new one (the run's
// shared record is no longer re-written); the next drain goes on from the
// committed positions; nothing is lost and nothing duplicated.
func TestHostRestartsDuringCatchUp(t *testing.T) {
	for _, r := range hostRestarts() {
		t.Run(r.name, func(t *testing.T) {
			e := newEnv(t, envConfig{})
			ctx := context.Background()
			// A small in-flight bound makes the catch-up of the backlog
			// last seconds.
			h := e.startHandler("a", map[string]string{config.MirrorDeduplicate: "true", config.MirrorInFlightBytes: "8KiB"})
			p := e.startProducer(producerConfig{Batch: 8})
			sleepCtx(ctx, 2*time.Second)
			// Slow acknowledgements keep the catch-up running for
			// seconds.
			e.emu.Faults().DelayDispositions(40 * time.Millisecond)
			code, cu, err := h.startCatchUp(ctx, `{"max_duration":"60s"}`)
			if err != nil || code != http.StatusAccepted {
				t.Fatalf("catch-up: %d %+v %v", code, cu, err)
			}
			deadline := time.Now().Add(time.Minute)
			for {
				_, st, err := h.status(ctx, cu.ID)
				if err == nil && st.Run != nil && st.Run.Records > 0 && st.Run.State == mirror.CatchUpRunning {
					break
				}
				if time.Now().After(deadline) || (st.Run != nil && st.Run.State != mirror.CatchUpRunning) {
					t.Fatalf("the catch-up did not run long enough to be restarted under: %+v %v", st.Run, err)
				}
				sleepCtx(ctx, 20*time.Millisecond)
			}
			e.inject(r.name + " during a catch-up")
			if err := r.restart(ctx, h); err != nil {
				t.Fatal(err)
			}
			e.emu.Faults().DelayDispositions(0)
			// The new process reads the run as the dead one last
			// published it, and as lost once it is no longer re-written.
			restarted := time.Now()
			for {
				code, st, err := h.status(ctx, cu.ID)
				if err == nil && code == http.StatusOK && st.Run != nil && st.Run.State == mirror.CatchUpLost {
					t.Logf("after the restart, status?run=%s reads lost after %s: %s", cu.ID, time.Since(restarted).Round(time.Millisecond), st.Run.LastError)
					break
				}
				if time.Since(restarted) > mirror.RunLostAfter+15*time.Second {
					t.Fatalf("after the restart, status?run=%s: %d %+v %v; want the run read as lost within %s", cu.ID, code, st.Run, err, mirror.RunLostAfter)
				}
				sleepCtx(ctx, 500*time.Millisecond)
			}
			p.stop()
			h.settle(ctx)
			verifyNothingLostNorDuplicated(t, e, r.name+" during a catch-up")
		})
	}
}

// verifyNothingLostNorDuplicated reads every record from Kafka and checks
// each is in Event Hubs exactly once.
func verifyNothingLostNorDuplicated(t *testing.T, e *env, what string) {
	t.Helper()
	recs, err := e.readKafka(context.Background(), e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	t.Logf("%s: produced %d, mirrored %d, lost %d, duplicates %d, unexpected %d, mismatched %d", what, v.Produced, v.Mirrored, v.Lost, v.Duplicates, v.Unexpected, v.Mismatched)
	if v.Produced == 0 || v.Lost != 0 || v.Unexpected != 0 || v.Mismatched != 0 || v.Duplicates != 0 {
		t.Errorf("%s with MIRROR_DEDUPLICATE=true: produced %d, lost %d, duplicates %d, unexpected %d, mismatched %d; want nothing lost and nothing duplicated", what, v.Produced, v.Lost, v.Duplicates, v.Unexpected, v.Mismatched)
		e.diagnose()
	}
}
