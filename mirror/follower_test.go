package mirror_test

// Issue 50, defects 3 to 6: in the deployed shape (two instances on one
// group, only one running the timer and following through the handover,
// operator calls sent to the other), a handed-over follower must re-plan
// when what it was started with no longer holds. Each test failed before
// its fix.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/mirror"
)

// instances are two processes of the app on one consumer group: timer
// runs the schedule (following, handed over from tick to tick), other
// only answers operator calls.
type instances struct {
	timerM, otherM *mirror.Mirror
	timer, other   *mirror.Service
	stopTicks      func() []*mirror.Report
	ticksMu        sync.Mutex
	ticks          []*mirror.Report
}

// newInstances builds both instances with opts (each with its own Kafka
// member and Event Hubs sink); the timer instance's sink goes through
// wrapSink when set.
func newInstances(t *testing.T, e *env, opts mirror.Options, wrapSink func(*eventhubs.Sink) mirror.Sink) *instances {
	t.Helper()
	in := &instances{}
	in.timerM = e.newMirrorWith(opts, wrapSink, withControl)
	in.otherM = e.newMirrorWith(opts, nil, withControl)
	in.timer = mirror.NewService(in.timerM, mirror.Limits{MaxDuration: 60 * time.Second})
	in.other = mirror.NewService(in.otherM, mirror.Limits{MaxDuration: 60 * time.Second})
	t.Cleanup(in.other.Close)
	t.Cleanup(in.timer.Close)
	return in
}

// tick runs the timer instance's schedule in the background: invocations
// back to back, each following for period, as the Functions host fires a
// schedule of that period; in.stopTicks stops it after the invocation
// running and returns every invocation's report.
func (in *instances) tick(t *testing.T, period time.Duration) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			until := time.Now().Add(period)
			rep, err := in.timer.DrainFollowing(context.Background(), "timer", until)
			// The next invocation comes at the next tick, also after
			// one that returned early.
			select {
			case <-stop:
			case <-time.After(time.Until(until)):
			}
			if err != nil {
				t.Errorf("timer invocation: %v", err)
				return
			}
			in.ticksMu.Lock()
			in.ticks = append(in.ticks, rep)
			in.ticksMu.Unlock()
		}
	}()
	var once sync.Once
	in.stopTicks = func() []*mirror.Report {
		once.Do(func() { close(stop); <-done })
		in.ticksMu.Lock()
		defer in.ticksMu.Unlock()
		return in.ticks
	}
	t.Cleanup(func() { in.stopTicks() })
}

// produceN produces n records on topic, spread over its 4 partitions.
func (e *env) produceN(topic, tag string, n int) {
	e.t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", tag, i)})
	}
	e.produce(recs...)
}

// lagZero waits until the group has no lag on m's unpaused topics.
func lagZero(t *testing.T, m *mirror.Mirror, within time.Duration, what string) {
	t.Helper()
	waitFor(t, within, what, func() bool {
		lag, err := m.Lag(context.Background(), nil)
		return err == nil && lag.Unpaused() == 0
	})
}

// Defect 3: under follow mode, an offset reset sent to the instance that
// does not run the timer is applied by the follower that holds the group
// (it picks the request up from the control records, lets go of the
// partitions, applies it and takes them back), without the operator
// knowing which instance that is; the follower then mirrors from the reset
// position. Before the fix every attempt waited 8 s and answered busy.
func TestResetSentToTheOtherInstanceUnderFollowMode(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	in := newInstances(t, e, mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test1$`)}}, nil)
	for i := range 10 {
		e.produce(followRecord(0, i))
	}
	in.tick(t, 2*time.Second)
	waitEvents(t, e, 10, 10*time.Second)
	lagZero(t, in.otherM, 10*time.Second, "the backlog committed")

	req := mirror.ResetRequest{Select: mirror.TopicSelection{Names: []string{topic}}, Partitions: []int32{0}, To: mirror.ResetShiftBy, Shift: -4, Apply: true, By: "test"}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := in.other.ResetOffsets(ctx, req)
	if err != nil {
		t.Fatalf("a reset sent to the instance that does not run the timer, after %s: %v", time.Since(t0).Round(time.Millisecond), err)
	}
	if !res.Applied || len(res.Partitions) != 1 || res.Partitions[0].Before != 10 || res.Partitions[0].After != 6 || res.Resent != 4 {
		t.Fatalf("reset: %+v, want partition 0 moved from 10 to 6 with 4 records to send again", res)
	}
	// The follower takes the partition back from the reset position.
	waitEvents(t, e, 14, 10*time.Second)
	lagZero(t, in.otherM, 10*time.Second, "the records above the reset committed again")
	// A second reset, to the current position, with the topic paused
	// first (the README's remedy before): still through the holder.
	if _, err := in.other.SetPaused(ctx, mirror.TopicSelection{Names: []string{topic}}, true, "test", "maintenance"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the follower hands the paused partitions back
	res, err = in.other.ResetOffsets(ctx, mirror.ResetRequest{Select: mirror.TopicSelection{Names: []string{topic}}, To: mirror.ResetToCurrent, Apply: true, By: "test"})
	if err != nil || !res.Applied || res.Skipped != 0 || res.Resent != 0 {
		t.Fatalf("a reset of the paused topic sent to the other instance: %+v, %v", res, err)
	}
	for _, rep := range in.stopTicks() {
		if rep.Stopped == mirror.StopRebalanced {
			t.Errorf("a timer invocation ended %q: %q", rep.Stopped, rep.Lines())
		}
	}
}

// Defect 4: a topic paused and resumed within one schedule period (the
// decisions written by the other instance) is taken back by the follower
// that handed its partitions back: records produced after the resume are
// mirrored within a few seconds. Before the fix the follower, adopted tick
// after tick, never read the topic again. The resume's catch-up is left
// out (the other instance writes only the decision) so that only the
// follower can mirror the records; the catch-up is defect 6's test.
func TestPauseAndResumeWithinOnePeriodTakesTheTopicBack(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	in := newInstances(t, e, mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)}}, nil)
	e.produceN(topic, "before", 8)
	e.produceN("prod.test2", "other", 8)
	in.tick(t, 8*time.Second) // the pause and the resume fall within one period
	waitEvents(t, e, 16, 5*time.Second)

	ctx := context.Background()
	if _, err := in.otherM.SetPausedTopics(ctx, mirror.TopicSelection{Names: []string{topic}}, true, "test", "maintenance"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a pause check of the follower: it hands the partitions back
	e.produceN(topic, "paused", 8)
	time.Sleep(time.Second)
	if n := len(e.tally(topic, 4)); n != 8 {
		t.Fatalf("%d records of the paused topic in the hub, want 8", n)
	}
	if _, err := in.otherM.SetPausedTopics(ctx, mirror.TopicSelection{Names: []string{topic}}, false, "test", ""); err != nil {
		t.Fatal(err)
	}
	e.produceN(topic, "after", 8)
	waitFor(t, 12*time.Second, "the paused and resumed topic mirrored again", func() bool { return len(e.tally(topic, 4)) == 24 })
	lagZero(t, in.otherM, 10*time.Second, "everything committed")
	in.stopTicks()
	for prov, n := range e.tally(topic, 4) {
		if n != 1 {
			t.Fatalf("%s mirrored %d times", prov, n)
		}
	}
}

// hubFaultSink is the real Event Hubs adapter whose reads of one hub's last
// sequence numbers (deduplication's floors at a drain's start) fail while
// failing is set.
type hubFaultSink struct {
	*eventhubs.Sink
	hub     string
	failing atomic.Bool
}

func (f *hubFaultSink) LastSequence(ctx context.Context, hub, partitionID string) (int64, error) {
	if hub == f.hub && f.failing.Load() {
		return 0, errors.New("injected: Event Hubs did not answer the property read")
	}
	return f.Sink.LastSequence(ctx, hub, partitionID)
}

// Defect 5: with deduplication on, Event Hubs does not answer one hub's
// property reads for 1.5 s at the start of the follower's drain, so that
// topic's partitions send nothing in it, while another topic keeps the
// drain alive. The follower retries them with backoff once Event Hubs
// answers: their records are mirrored within a few seconds, exactly once.
// Before the fix they waited for a next drain that never came.
func TestPartitionsFailedAtTheStartAreRetriedUnderFollowMode(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	var sink *hubFaultSink
	opts := mirror.Options{Deduplicate: true, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)}}
	in := newInstances(t, e, opts, func(s *eventhubs.Sink) mirror.Sink {
		sink = &hubFaultSink{Sink: s, hub: topic}
		sink.failing.Store(true)
		return sink
	})
	e.produceKeyed(topic, 4, 10, "a")
	e.produceKeyed("prod.test2", 4, 10, "b")
	in.tick(t, 3*time.Second)
	waitFor(t, 10*time.Second, "the other topic mirrored", func() bool { return len(e.tally("prod.test2", 4)) == 40 })
	time.Sleep(1500 * time.Millisecond)
	sink.failing.Store(false)
	waitFor(t, 15*time.Second, "the topic whose hub did not answer at the start mirrored", func() bool { return len(e.tally(topic, 4)) == 40 })
	lagZero(t, in.otherM, 10*time.Second, "everything committed")
	in.stopTicks()
	exactlyOnce(t, e, topic, map[string]int64{topic: 10})
}

// Sixth defect: a catch-up sent to the instance that does not run the
// timer does not break the follower (before the fix the follower's drain
// ended "group rebalanced", the catch-up found nothing and ended, and
// nothing was mirrored until the next tick): records produced during and
// after the catch-up are mirrored at once, within the follower's window;
// so are those produced after a pause and a resume sent there.
func TestCatchUpOnTheOtherInstanceKeepsTheFollower(t *testing.T) {
	e := newEnv(t)
	in := newInstances(t, e, mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)}}, nil)
	e.produceN("prod.test1", "a", 8)
	until := time.Now().Add(30 * time.Second)
	done := make(chan *mirror.Report, 1)
	go func() {
		rep, _ := in.timer.DrainFollowing(context.Background(), "timer", until)
		done <- rep
	}()
	waitEvents(t, e, 8, 10*time.Second)

	st, started, err := in.other.StartCatchUp(mirror.CatchUpRequest{})
	if err != nil || !started {
		t.Fatalf("catch-up: %v, started %v", err, started)
	}
	e.produceN("prod.test2", "b", 8)
	waitFor(t, 15*time.Second, "the catch-up ended", func() bool { got, _ := in.other.CatchUp(st.ID); return got.State != mirror.CatchUpRunning })
	if got, _ := in.other.CatchUp(st.ID); got.State != mirror.CatchUpCaughtUp {
		t.Fatalf("the catch-up ended %q: %+v", got.State, got)
	}
	e.produceN("prod.test1", "c", 8)
	waitEvents(t, e, 24, 5*time.Second)
	lagZero(t, in.otherM, 5*time.Second, "everything committed")

	// A pause and a resume sent to the other instance: the resume's
	// catch-up watches the follower, which takes the topic back.
	sel := mirror.TopicSelection{Names: []string{"prod.test1"}}
	if _, err := in.other.SetPaused(context.Background(), sel, true, "test", "maintenance"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if _, err := in.other.SetPaused(context.Background(), sel, false, "test", ""); err != nil {
		t.Fatal(err)
	}
	e.produceN("prod.test1", "d", 8)
	waitEvents(t, e, 32, 6*time.Second)
	lagZero(t, in.otherM, 5*time.Second, "everything committed after the resume")
	select {
	case rep := <-done:
		t.Fatalf("the timer's invocation ended %s before its window's end: %q", time.Until(until).Round(time.Second), rep.Lines())
	default:
	}
	if rep := <-done; rep.Stopped != mirror.StopHandedOver || rep.Failed() {
		t.Fatalf("the timer's invocation: %q, want handed over", rep.Lines())
	}
}

// A reset sent to an instance while another one drains without a follower
// (a following drain of its own, not handed over): no follower takes the
// request, so the instance asked waits for the group to empty, as before,
// and applies the reset once; it is neither lost nor applied twice.
func TestResetNotTakenByAFollowerWaitsForTheGroup(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	in := newInstances(t, e, mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test1$`)}}, nil)
	for i := range 10 {
		e.produce(followRecord(0, i))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = in.timerM.Drain(context.Background(), "beside", mirror.Limits{MaxDuration: 30 * time.Second, FollowUntil: time.Now().Add(5 * time.Second)})
	}()
	waitEvents(t, e, 10, 10*time.Second)
	lagZero(t, in.otherM, 10*time.Second, "the backlog committed")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	res, err := in.other.ResetOffsets(ctx, mirror.ResetRequest{Select: mirror.TopicSelection{Names: []string{topic}}, Partitions: []int32{0}, To: mirror.ResetShiftBy, Shift: -4, Apply: true, By: "test"})
	if err != nil || !res.Applied || res.Partitions[0].Before != 10 || res.Partitions[0].After != 6 {
		t.Fatalf("reset: %+v, %v; want 10 -> 6", res, err)
	}
	<-done
	if c := e.committed(in.otherM, topic)[0]; c != 6 {
		t.Fatalf("committed %d after one shift by -4 from 10, want 6", c)
	}
}

// An offset reset handed to another instance is applied at most once,
// whichever followers see its request before its deadline: the one that
// applied it, then a new follower of the same instance (the next tick
// after a manual run stopped the first), then the follower of the other
// instance (another process, as after a restart). The request here names
// a deadline a minute ahead so that each follower reads it several times.
// Before the fix each new follower applied it again: every application of
// a reset to offset 6 sends records 6 to 9 once more (with a reset to
// latest, records produced between two applications were skipped).
func TestResetRequestIsAppliedOnceAcrossFollowers(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	in := newInstances(t, e, mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test1$`)}}, nil)
	for i := range 10 {
		e.produce(followRecord(0, i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// follow runs an invocation that follows for window, then a manual
	// run, which stops the follower in its grace: the next invocation
	// starts a new one instead of adopting it.
	follow := func(svc *mirror.Service, run string, window time.Duration) error {
		for _, r := range []struct {
			run   string
			until time.Time
		}{{run, time.Now().Add(window)}, {run + " (manual)", time.Time{}}} {
			if rep, err := svc.DrainFollowing(ctx, r.run, r.until); err != nil || rep.Failed() {
				return fmt.Errorf("%s: %v, %q", r.run, err, rep.Lines())
			}
		}
		return nil
	}

	first := make(chan error, 1)
	go func() { first <- follow(in.timer, "tick 1", 8*time.Second) }()
	waitEvents(t, e, 10, 10*time.Second)
	lagZero(t, in.otherM, 10*time.Second, "the backlog committed")
	req := mirror.ResetRequest{Topics: []string{topic}, Partitions: []int32{0}, To: mirror.ResetOffset, Offset: 6, Apply: true, By: "test"}
	if _, err := in.otherM.WriteResetRequest(ctx, req, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, e, 14, 10*time.Second) // the first follower applied it: 6 to 9 sent again
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := follow(in.timer, "tick 2", 6*time.Second); err != nil {
		t.Fatal(err)
	}
	in.timer.Close()
	if err := follow(in.other, "other instance", 6*time.Second); err != nil {
		t.Fatal(err)
	}

	counts := e.tally(topic, 4)
	for off := range int64(10) {
		want := 1
		if off >= 6 {
			want = 2
		}
		if got := counts[provenance{topic, 0, off}]; got != want {
			t.Errorf("%s/0/%d mirrored %d times, want %d (one reset to offset 6, applied once)", topic, off, got, want)
		}
	}
	if c := e.committed(in.otherM, topic)[0]; c != 10 {
		t.Errorf("committed %d, want 10", c)
	}
}
