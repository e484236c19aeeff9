package mirror_test

import (
	"context"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/mirror"
)

// stallingSink is the real Event Hubs adapter whose sends hang, while
// stalled is set, until their context ends: a drain stuck on a hub that
// holds its partitions and mirrors nothing.
type stallingSink struct {
	*eventhubs.Sink
	stalled atomic.Bool
	hanging atomic.Int64
}

func (s *stallingSink) Send(ctx context.Context, b mirror.Batch) error {
	if s.stalled.Load() {
		s.hanging.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Sink.Send(ctx, b)
}

// A catch-up sent to one instance while the other instance's member holds
// the group's partitions without mirroring them (its following drain
// stuck on a hub): the catch-up watches only as long as that member makes
// progress, then joins and drains by itself, within the deferral window
// and a rebalance. Before the fix it watched the lag that never fell for
// its whole max duration and ended "max duration reached" after 0 drains.
func TestCatchUpDrainsWhenTheOtherInstanceStalls(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	var sink *stallingSink
	in := newInstances(t, e, mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test1$`)}}, func(s *eventhubs.Sink) mirror.Sink {
		sink = &stallingSink{Sink: s}
		sink.stalled.Store(true)
		return sink
	})
	e.produceN(topic, "a", 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = in.timer.DrainFollowing(ctx, "timer", time.Now().Add(60*time.Second))
	}()
	t.Cleanup(func() { sink.stalled.Store(false); cancel(); <-done })
	waitFor(t, 10*time.Second, "the stuck instance holds the partitions and sends", func() bool { return sink.hanging.Load() > 0 })

	t0 := time.Now()
	st, started, err := in.other.StartCatchUp(mirror.CatchUpRequest{MaxDuration: 40 * time.Second})
	if err != nil || !started {
		t.Fatalf("catch-up: %v, started %v", err, started)
	}
	within := mirror.CatchUpDeferWindow + 15*time.Second
	waitFor(t, within, "the catch-up ended", func() bool { got, _ := in.other.CatchUp(st.ID); return got.State != mirror.CatchUpRunning })
	got, _ := in.other.CatchUp(st.ID)
	if got.State != mirror.CatchUpCaughtUp || got.Drains == 0 || got.Records != 8 {
		t.Fatalf("the catch-up ended %q after %s: %+v; want caught up by its own drains, 8 records", got.State, time.Since(t0).Round(time.Millisecond), got)
	}
	waitEvents(t, e, 8, 5*time.Second)
	lagZero(t, in.otherM, 5*time.Second, "everything committed")
	for prov, n := range e.tally(topic, 4) {
		if n != 1 {
			t.Fatalf("%s mirrored %d times", prov, n)
		}
	}
}
