package faults

import (
	"context"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// Scenario 5: the timer drain, a catch-up run and a second handler process
// drain the same consumer group at the same time. Each process has one
// group member shared by its drains (the catch-up and the timer of process A
// share A's), so the group rebalances when a process joins or leaves; the
// coordinator fences the commits of a generation that ended, and within a
// process a partition held by one drain is reported busy to the other.

// TestConcurrentDrains (5) runs, while records are produced: timer
// invocations back to back on handler process A, catch-up runs started
// through A's HTTP front end (POST /api/catchup with a function key), and
// timer invocations back to back on a second handler process B. Every
// invocation and every catch-up drain counts as faulted (any of them may be
// cut by a rebalance).
func TestConcurrentDrains(t *testing.T) {
	concurrentDrains(t, "5", "timer drain, catch-up run and a second handler process on one group at once", false)
}

// TestConcurrentDrainsDeduplicated (5d) is 5 with MIRROR_DEDUPLICATE=true:
// no record may arrive twice. A drain whose claim a rebalance ended
// publishes nothing more; its member rejoins only once the drain's sends on
// the wire are over and it committed what Event Hubs acknowledged, so the
// partitions' next owner starts from there, and reconciles whatever an
// unclean end left.
func TestConcurrentDrainsDeduplicated(t *testing.T) {
	concurrentDrains(t, "5d", "as 5, with MIRROR_DEDUPLICATE=true", true)
}

func concurrentDrains(t *testing.T, id, title string, dedup bool) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, id, title)
	ctx := context.Background()
	// Slow acknowledgements and a small in-flight bound make each drain
	// last long enough for the others to join the group while it runs.
	settings := map[string]string{"MIRROR_MAX_DURATION": "3s", "MIRROR_INFLIGHT_BYTES": "16KiB", "MIRROR_DEDUPLICATE": strconv.FormatBool(dedup)}
	// B follows (the default): its timer drains hand over and hold their
	// partitions between invocations. A does not: a following drain holds
	// every partition of its process, so catch-ups on A would find them
	// all busy, and the catch-ups are a drainer this scenario overlaps.
	aSettings := maps.Clone(settings)
	aSettings["MIRROR_FOLLOW"] = "false"
	a := e.startHandler("a", aSettings)
	b := e.startHandler("b", settings)
	e.emu.Faults().DelayDispositions(30 * time.Millisecond)
	p := e.startProducer(producerConfig{})
	sleepCtx(ctx, 300*time.Millisecond)

	window := scale(10*time.Second, 4*time.Minute)
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var wg sync.WaitGroup
	type tally struct {
		invocations, failed, rebalanced atomic.Int64
		records                         atomic.Int64
	}
	var timers [2]tally
	// A's timer yields to a catch-up that has not mirrored anything yet,
	// so the two drainers of one process take turns on its partitions:
	// back-to-back timer drains would leave the catch-up (backing off up
	// to seconds between attempts) only gaps it can miss. The catch-up
	// still overlaps B's drains and A's next ones.
	var catchUpStarving atomic.Bool
	for i, h := range []*handler{a, b} {
		wg.Go(func() {
			for !stopped() {
				if h == a && catchUpStarving.Load() {
					sleepCtx(ctx, 20*time.Millisecond)
					continue
				}
				res, err := h.timer(ctx, true)
				if err != nil {
					t.Errorf("handler %s: %v", h.name, err)
					return
				}
				timers[i].invocations.Add(1)
				n, why, _ := drainSummary(res)
				timers[i].records.Add(n)
				if !res.Succeeded() {
					timers[i].failed.Add(1)
				}
				if why == mirror.StopRebalanced {
					timers[i].rebalanced.Add(1)
				}
			}
		})
	}
	var catchUps, catchUpDrains atomic.Int64
	var catchUpRecords atomic.Int64
	// The catch-up's drains run inside process A; their times come from the
	// drain lines A logs (every drain writes one), and their in-flight
	// windows from offsets sampled all along.
	series := e.startOffsetSeries(50 * time.Millisecond)
	wg.Go(func() {
		for !stopped() {
			e.inject("catch-up started")
			// B's member is in the group all along (B follows): a catch-up
			// first watches B's drains for up to half its max duration
			// (mirror.CatchUpDeferWindow), and joins when they do not
			// bring the lag down (the producer outpaces them), so 8 s
			// leave it about 4 s of drains.
			code, cu, err := a.startCatchUp(ctx, `{"max_duration":"8s"}`)
			if err != nil || (code != http.StatusAccepted && code != http.StatusOK) {
				t.Errorf("catch-up: %d %+v %v", code, cu, err)
				return
			}
			catchUpStarving.Store(true)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			st, err := a.waitCatchUp(wctx, cu.ID, func(st mirror.CatchUpStatus) {
				if st.Records > 0 {
					catchUpStarving.Store(false)
				}
			})
			cancel()
			catchUpStarving.Store(false)
			if err != nil {
				t.Error(err)
				return
			}
			catchUps.Add(1)
			catchUpDrains.Add(int64(st.Drains))
			catchUpRecords.Add(st.Records)
			t.Logf("catch-up %s: %s after %d drains, %d records, lag %d %s", st.ID, st.State, st.Drains, st.Records, st.Lag, st.LastError)
		}
	})
	sleepCtx(ctx, window)
	close(stop)
	wg.Wait()
	series.stop()
	catchUpWindows := a.drainWindows(ctx, mirror.TriggerCatchUp, catchUpDrains.Load())
	for _, w := range catchUpWindows {
		e.ledger.addWindow(series.window(w.from, w.to))
	}
	if n := int64(len(catchUpWindows)); n < catchUpDrains.Load() {
		t.Errorf("handler A logged %d of the %d catch-up drains: the duplicate bound would miss some", n, catchUpDrains.Load())
	}
	p.stop()
	e.emu.Faults().Reset()
	a.settle(ctx)

	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	e.drains.Add(catchUpDrains.Load())
	e.assert(f, v)
	if dedup && v.Duplicates != 0 {
		t.Errorf("%d duplicates with MIRROR_DEDUPLICATE=true, want 0", v.Duplicates)
	}
	busy := 0
	for _, h := range []*handler{a, b} {
		h.mu.Lock()
		for _, r := range h.results {
			for _, l := range reportLines(r) {
				if strings.Contains(l, "busy: another drain in this process holds it") {
					busy++
				}
			}
		}
		h.mu.Unlock()
	}
	for i, name := range []string{"A", "B"} {
		t.Logf("process %s timer: %d invocations (%d failed, %d ended by a rebalance), %d records", name,
			timers[i].invocations.Load(), timers[i].failed.Load(), timers[i].rebalanced.Load(), timers[i].records.Load())
	}
	f.note("at most %d copies of one record", v.MaxCopies)
	f.note("process A timer %d invocations (%d records), process B timer %d invocations (%d records), %d catch-up runs on A (%d drains, %d records); %d drains ended by a rebalance; %d partitions reported busy to a timer drain",
		timers[0].invocations.Load(), timers[0].records.Load(), timers[1].invocations.Load(), timers[1].records.Load(),
		catchUps.Load(), catchUpDrains.Load(), catchUpRecords.Load(), timers[0].rebalanced.Load()+timers[1].rebalanced.Load(), busy)
	if timers[0].records.Load() == 0 || timers[1].records.Load() == 0 || catchUpRecords.Load() == 0 {
		t.Errorf("not every drainer mirrored records: the drains did not overlap as intended")
	}
}

// offsetSeries samples the group's offsets (offsets) at a fixed interval, so
// that the in-flight window of a drain seen only through its report (start
// and duration) can be computed afterwards.
type offsetSeries struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	times []time.Time
	snaps []map[mirror.TopicPartition]partitionOffsets
}

// startOffsetSeries samples e's offsets every interval until stop.
func (e *env) startOffsetSeries(interval time.Duration) *offsetSeries {
	ctx, cancel := context.WithCancel(context.Background())
	s := &offsetSeries{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			if snap, ok := e.offsets(); ok {
				s.mu.Lock()
				s.times = append(s.times, time.Now())
				s.snaps = append(s.snaps, snap)
				s.mu.Unlock()
			}
			if !sleepCtx(ctx, interval) {
				return
			}
		}
	}()
	e.t.Cleanup(s.stop)
	return s
}

func (s *offsetSeries) stop() {
	s.cancel()
	<-s.done
}

// window returns the last sample taken before from and the first taken
// after to (the closest ones when there are none): the snapshots that
// bracket a drain.
func (s *offsetSeries) window(from, to time.Time) (before, after map[mirror.TopicPartition]partitionOffsets) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snaps) == 0 {
		return nil, nil
	}
	i, _ := slices.BinarySearchFunc(s.times, from, func(a, b time.Time) int { return a.Compare(b) })
	before = s.snaps[max(i-1, 0)]
	j, _ := slices.BinarySearchFunc(s.times, to, func(a, b time.Time) int { return a.Compare(b) })
	after = s.snaps[min(j, len(s.snaps)-1)]
	return before, after
}

// drainWindow is the time span of one drain, read from its log line.
type drainWindow struct{ from, to time.Time }

// drainLineFields are the fields of a drain line (see [mirror.LogReport]) a
// drain window needs, as the handler's text logger writes them.
var drainLineFields = regexp.MustCompile(`^time=(\S+) level=\S+ msg=` + regexp.QuoteMeta(mirror.DrainLogMessage) + ` .*\btrigger=(\S+) .*\bduration_ms=(\d+)\b`)

// drainWindows returns the windows of the drains with the given trigger that
// h logged, oldest first, waiting up to ten seconds for want of them (the
// host copies output lines asynchronously). A line's time is when the drain
// ended, so a window reaches back from it by the drain's duration (the
// line's millisecond precision only widens it).
func (h *handler) drainWindows(ctx context.Context, trigger string, want int64) []drainWindow {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		var out []drainWindow
		for line := range strings.Lines(h.out.Stdout()) {
			m := drainLineFields.FindStringSubmatch(line)
			if m == nil || m[2] != trigger {
				continue
			}
			end, err := time.Parse(time.RFC3339Nano, m[1])
			ms, err2 := strconv.ParseInt(m[3], 10, 64)
			if err != nil || err2 != nil {
				h.t.Errorf("unreadable drain line %q", line)
				continue
			}
			out = append(out, drainWindow{from: end.Add(-time.Duration(ms+1) * time.Millisecond), to: end.Add(time.Millisecond)})
		}
		if int64(len(out)) >= want || !sleepCtx(ctx, 100*time.Millisecond) {
			slices.SortFunc(out, func(a, b drainWindow) int { return a.from.Compare(b.from) })
			return out
		}
	}
}
