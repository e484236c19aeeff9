package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/mirror"
)

// Scenario 4: the handler process is killed with SIGKILL in the middle of a
// drain, at random points, restarted, and drained again. SIGKILL gives the
// handler no chance to commit what Event Hubs acknowledged: the records
// acknowledged since the last periodic commit are sent again by the next
// drain (duplicates within the bound), and nothing may be committed that
// Event Hubs did not acknowledge (no loss).

// killPoint is where in a drain the kill lands.
type killPoint int

const (
	// killAtStart: a random 0–40 ms after the invocation arrived, while the
	// handler lists topics, resolves hubs and joins the group.
	killAtStart killPoint = iota
	// killMidSend: after a random share of the backlog was stored in Event
	// Hubs, with acknowledgements outstanding.
	killMidSend
	// killAfterCommit: after the drain committed at least once (commits
	// run every second), plus a random 0–300 ms.
	killAfterCommit
	killPoints
)

func (k killPoint) String() string {
	switch k {
	case killAtStart:
		return "at start"
	case killMidSend:
		return "mid-send"
	case killAfterCommit:
		return "after a commit"
	}
	return fmt.Sprintf("killPoint(%d)", int(k))
}

// kill is what one kill did.
type kill struct {
	point  killPoint
	crash  bool          // Kill (a crash, the host's restart policy) rather than Restart
	after  time.Duration // from the invocation to the kill
	stored int64         // events Event Hubs stored during the invocation before the kill
	// committed counts partitions whose committed offset moved during the
	// invocation before the kill.
	committed int
	backlog   int64
	missed    bool // the drain had finished before the kill point
	oldPID    int
	newPID    int
	invErr    error
}

func (k kill) String() string {
	how := "Restart"
	if k.crash {
		how = "Kill (crash)"
	}
	if k.missed {
		return fmt.Sprintf("%s: drain finished first, not killed", k.point)
	}
	return fmt.Sprintf("%s by %s after %s: %d of a backlog of %d events stored, %d partitions committed; pid %d -> %d; invocation: %v",
		k.point, how, k.after.Round(time.Millisecond), k.stored, k.backlog, k.committed, k.oldPID, k.newPID, k.invErr)
}

// TestHandlerKilledMidDrain (4) kills the real handler process with SIGKILL
// in the middle of timer drains at random points (while joining, mid-send
// with acknowledgements outstanding, after a periodic commit), restarts it
// (once through the host's crash policy, otherwise as the platform
// restarts a worker) and drains again, while records are produced
// continuously. The restarted process's first claim waits for the dead
// member's session (6 s) to expire.
func TestHandlerKilledMidDrain(t *testing.T) {
	handlerKilledMidDrain(t, "4", "handler process killed with SIGKILL mid-drain at random points, restarted, drained again", false)
}

// TestHandlerKilledMidDrainDeduplicated (4d) is scenario 4 with
// MIRROR_DEDUPLICATE=true: the drain after each kill reads back what the
// killed one published, so no record may arrive twice.
func TestHandlerKilledMidDrainDeduplicated(t *testing.T) {
	handlerKilledMidDrain(t, "4d", "as 4, with MIRROR_DEDUPLICATE=true: zero duplicates", true)
}

// stormRecords is how many keyed records a soak run's kill storm produces
// at least; maxStormKills ends a storm that could not produce them.
const (
	stormRecords  = 200_000
	maxStormKills = 200
)

func handlerKilledMidDrain(t *testing.T, id, title string, dedup bool) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, id, title)
	ctx := context.Background()
	rng := newRand(t)
	// A small in-flight bound, and acknowledgements slowed down while the
	// killed drains run, make a drain of the backlog last seconds, so that
	// each kill point lands inside one.
	h := e.startHandler("a", map[string]string{config.MirrorInFlightBytes: "8KiB", config.MirrorDeduplicate: strconv.FormatBool(dedup)})
	p := e.startProducer(producerConfig{Batch: 4})

	// Under EHMIRROR_SOAK the storm goes on until stormRecords keyed
	// records were produced (a kill every few seconds), and at least 24
	// kills were made.
	kills, records := scale(3, 24), scale(int64(0), int64(stormRecords))
	var done []kill
	points := rng.Perm(int(killPoints))
	for i := 0; i < kills || (p.acked.Load() < records && i < maxStormKills); i++ {
		point := killPoint(points[i%len(points)])
		if i%len(points) == len(points)-1 {
			points = rng.Perm(int(killPoints))
		}
		// A backlog builds up between kills; a kill after a commit needs a
		// drain longer than the handler's 1 s commit interval.
		backlog := time.Duration(800+rng.IntN(800)) * time.Millisecond
		if point == killAfterCommit {
			backlog += 2 * time.Second
		}
		sleepCtx(ctx, backlog)
		var k kill
		for attempt := 0; ; attempt++ {
			k = h.killMidDrain(ctx, point, i == 0, rng)
			if !k.missed || attempt == 3 {
				break
			}
			t.Logf("kill %d: %s", i, k)
		}
		t.Logf("kill %d: %s", i, k)
		done = append(done, k)
		if k.missed {
			continue
		}
		if k.newPID == 0 || k.newPID == k.oldPID {
			t.Errorf("kill %d: the handler was not restarted (pid %d -> %d)", i, k.oldPID, k.newPID)
		}
		if k.invErr == nil {
			t.Logf("kill %d: the killed invocation still succeeded (the drain ended as it was killed)", i)
		}
		// Drained again: the new process's first drain claims the group
		// once the dead member's session expired, and goes on from the
		// committed offsets.
		start := time.Now()
		res, err := h.timer(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		n, stopped, _ := drainSummary(res)
		t.Logf("kill %d: drained again in %s: %d records, stopped: %s", i, time.Since(start).Round(time.Millisecond), n, stopped)
		if !res.Succeeded() {
			t.Errorf("kill %d: the drain after the restart failed: %v\n%s", i, res.Err, strings.Join(reportLines(res), "\n"))
		}
	}
	p.stop()
	e.emu.Faults().Reset()
	h.settle(ctx)

	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	e.assert(f, v)
	if dedup && v.Duplicates != 0 {
		t.Errorf("%d duplicates with MIRROR_DEDUPLICATE=true, want 0", v.Duplicates)
	}
	byPoint := map[killPoint]int{}
	missed := 0
	for _, k := range done {
		if k.missed {
			missed++
			continue
		}
		byPoint[k.point]++
	}
	f.note("%d SIGKILLs mid-drain (%d at start, %d mid-send, %d after a commit; 1 through the host's crash policy), %d kill points missed; each restart waited for the dead member's session",
		len(done)-missed, byPoint[killAtStart], byPoint[killMidSend], byPoint[killAfterCommit], missed)
	if missed > len(done)/3 {
		t.Errorf("%d of %d kill points missed their drain", missed, len(done))
	}
	if n := p.acked.Load(); n < records {
		t.Errorf("%d records produced during the storm, want %d", n, records)
	}
}

// killMidDrain fires MirrorTimer, waits for the kill point, kills the
// handler process with SIGKILL (Kill when crash, as a crash the host's
// restart policy handles; otherwise Restart, as the platform recycles a
// worker) and waits for the failed invocation. The invocation is accounted
// as a faulted drain. When the drain finished before the kill point, nothing
// is killed and missed is set.
func (h *handler) killMidDrain(ctx context.Context, point killPoint, crash bool, rng *rand.Rand) kill {
	e := h.e
	k := kill{point: point, crash: crash}
	_ = e.accounted(func() (bool, error) {
		before, _ := e.offsets()
		for _, o := range before {
			k.backlog += o.end - max(o.committed, o.start)
		}
		stored0 := e.emu.Stats().EventsStored
		e.emu.Faults().DelayDispositions(40 * time.Millisecond)
		defer e.emu.Faults().DelayDispositions(0)
		results := make(chan *funchost.Result, 1)
		start := time.Now()
		go func() {
			res, err := h.invokeTimer(ctx)
			if err != nil {
				res = &funchost.Result{Err: err}
			}
			results <- res
		}()
		finished := func() bool { return len(results) > 0 }
		switch point {
		case killAtStart:
			sleepCtx(ctx, time.Duration(rng.IntN(40))*time.Millisecond)
		case killMidSend:
			target := 1 + rng.Int64N(max(k.backlog*3/4, 1))
			for !finished() && e.emu.Stats().EventsStored-stored0 < target {
				sleepCtx(ctx, time.Millisecond)
			}
		case killAfterCommit:
			for !finished() && committedMoved(e, before) == 0 {
				sleepCtx(ctx, 2*time.Millisecond)
			}
			sleepCtx(ctx, time.Duration(rng.IntN(300))*time.Millisecond)
		}
		if finished() {
			k.missed = true
			res := <-results
			k.invErr = res.Err
			return !res.Succeeded(), nil
		}
		k.after = time.Since(start)
		k.stored = e.emu.Stats().EventsStored - stored0
		k.committed = committedMoved(e, before)
		k.oldPID = h.host.PID()
		e.inject("SIGKILL " + point.String())
		var err error
		if crash {
			err = h.host.Kill()
		} else {
			err = h.host.Restart(ctx)
		}
		if err != nil {
			h.t.Errorf("killing the handler: %v", err)
		}
		res := <-results
		k.invErr = res.Err
		// Kill returns once the host started the replacement; wait for it
		// to answer before reading its pid.
		if crash {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			for h.host.PID() == 0 || h.host.PID() == k.oldPID {
				if !sleepCtx(rctx, 10*time.Millisecond) {
					break
				}
			}
			cancel()
		}
		k.newPID = h.host.PID()
		return true, nil
	})
	return k
}

// committedMoved counts partitions whose committed offset is past before's.
func committedMoved(e *env, before map[mirror.TopicPartition]partitionOffsets) int {
	now, ok := e.offsets()
	if !ok {
		return 0
	}
	n := 0
	for tp, o := range now {
		if b, ok := before[tp]; ok && o.committed > b.committed {
			n++
		}
	}
	return n
}
