package mirror_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

// runningDrain returns the one drain running in m, failing when there is
// not exactly one.
func runningDrain(t *testing.T, m *mirror.Mirror) mirror.RunningDrain {
	t.Helper()
	r := m.Running()
	if len(r) != 1 {
		t.Fatalf("%d drains running, want 1: %+v", len(r), r)
	}
	return r[0]
}

// The next scheduled invocation adopts the following drain of the one
// before: records produced between the two invocations reach Event Hubs
// before the second arrives (the drain never stopped: same drain, same
// claim, no rejoin), each invocation's report counts its own window, and
// without a third invocation the drain stops and commits everything within
// the grace, logging what it mirrored after the last window.
func TestHandoverKeepsFollowingBetweenInvocations(t *testing.T) {
	e := newEnv(t)
	m := e.newMirror(mirror.Options{})
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	defer svc.Close()
	ctx := context.Background()
	n := 0
	produce := func() {
		e.produce(followRecord(int32(n%4), n))
		n++
	}
	for range 8 {
		produce()
	}

	rep1, err := svc.DrainFollowing(ctx, "timer", time.Now().Add(1500*time.Millisecond))
	if err != nil {
		t.Fatalf("first invocation: %v", err)
	}
	if rep1.Stopped != mirror.StopHandedOver || rep1.Records != 8 || rep1.Failed() {
		t.Fatalf("first invocation: stopped %q, records %d, lines %q; want %q, 8", rep1.Stopped, rep1.Records, rep1.Lines(), mirror.StopHandedOver)
	}
	before := runningDrain(t, m)

	// Between the invocations: records are mirrored by the drain that
	// goes on, not left for the next invocation.
	for range 4 {
		produce()
	}
	waitEvents(t, e, int64(n), 2*time.Second)
	if got := runningDrain(t, m); !got.Started.Equal(before.Started) {
		t.Fatalf("the drain between invocations started at %v, want the first invocation's (%v)", got.Started, before.Started)
	}

	rep2, err := svc.DrainFollowing(ctx, "timer", time.Now().Add(time.Second))
	if err != nil {
		t.Fatalf("second invocation: %v", err)
	}
	if after := runningDrain(t, m); !after.Started.Equal(before.Started) {
		t.Fatalf("the second invocation started a drain (%v); want it to adopt the first's (%v)", after.Started, before.Started)
	}
	if rep2.Stopped != mirror.StopHandedOver || rep2.Records != 4 || rep2.Failed() {
		t.Fatalf("second invocation: stopped %q, records %d, lines %q; want %q and the 4 records of the gap", rep2.Stopped, rep2.Records, rep2.Lines(), mirror.StopHandedOver)
	}
	// Its readers' time is this window's, not the drain's since the first.
	if rt, most := rep2.ReadTime, time.Duration(len(rep2.Partitions))*(rep2.Duration+100*time.Millisecond); rt.Total <= 0 || rt.Total > most {
		t.Fatalf("second invocation: readers' time %v over %d partitions in a window of %v; want (0, %v]", rt.Total, len(rep2.Partitions), rep2.Duration, most)
	}

	// No third invocation: the drain stops within the grace and commits.
	for range 3 {
		produce()
	}
	waitEvents(t, e, int64(n), 2*time.Second)
	deadline := time.Now().Add(mirror.HandoverGrace + 5*time.Second)
	for len(m.Running()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the drain still runs %s after its last window", mirror.HandoverGrace+5*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	lag, err := m.Lag(ctx, nil)
	if err != nil || lag.Total != 0 {
		t.Fatalf("lag after the drain stopped: %+v, %v; want everything committed", lag, err)
	}
	reps := svc.Reports()
	tail := reps[len(reps)-1]
	if len(reps) != 3 || tail.Stopped != mirror.StopFollowed || tail.Records != 3 || tail.Failed() {
		t.Fatalf("reports %d, the last: stopped %q, records %d, lines %q; want 3, the tail %q with the 3 records after the last window", len(reps), tail.Stopped, tail.Records, tail.Lines(), mirror.StopFollowed)
	}
	if got := e.emu.Stats().EventsStored; got != int64(n) {
		t.Fatalf("%d events for %d records", got, n)
	}
}

// A manual (not following) run while a drain waits in its grace stops it
// first and then drains as before: the partitions are not busy.
func TestManualRunStopsAFollowerInItsGrace(t *testing.T) {
	e := newEnv(t)
	m := e.newMirror(mirror.Options{})
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	defer svc.Close()
	ctx := context.Background()
	e.produce(followRecord(0, 0), followRecord(1, 1))
	if rep, err := svc.DrainFollowing(ctx, "timer", time.Now().Add(time.Second)); err != nil || rep.Stopped != mirror.StopHandedOver {
		t.Fatalf("invocation: %v, %+v", err, rep)
	}
	e.produce(followRecord(2, 2))
	rep, err := svc.DrainFollowing(ctx, "timer (past due)", time.Time{})
	if err != nil {
		t.Fatalf("manual run: %v", err)
	}
	if rep.Stopped == mirror.StopBusy || !rep.CaughtUp() || rep.Failed() {
		t.Fatalf("manual run: %q", rep.Lines())
	}
	if got := e.emu.Stats().EventsStored; got != 3 {
		t.Fatalf("%d events for 3 records", got)
	}
}

// A topic resumed while a drain is handed over is mirrored from the next
// invocation: the drain mirrors the topics it found when it started, so
// the invocation does not adopt it and starts a new one.
func TestResumeWhileHandedOverStartsANewDrain(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	m := e.newMirrorWith(mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)}}, nil, withControl)
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	defer svc.Close()
	ctx := context.Background()
	if _, err := svc.SetPaused(ctx, mirror.TopicSelection{Names: []string{topic}}, true, "test", "maintenance"); err != nil {
		t.Fatal(err)
	}
	e.produce(&kgo.Record{Topic: "prod.test2", Partition: 0, Value: []byte("a")}, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("b")})
	rep1, err := svc.DrainFollowing(ctx, "timer", time.Now().Add(time.Second))
	if err != nil || rep1.Stopped != mirror.StopHandedOver || rep1.Records != 1 {
		t.Fatalf("first invocation: %v, %q", err, rep1.Lines())
	}
	first := runningDrain(t, m)
	if _, err := svc.SetPaused(ctx, mirror.TopicSelection{Names: []string{topic}}, false, "test", ""); err != nil {
		t.Fatal(err)
	}
	rep2, err := svc.DrainFollowing(ctx, "timer", time.Now().Add(2*time.Second))
	if err != nil || rep2.Stopped != mirror.StopHandedOver || len(rep2.Paused) != 0 || len(rep2.Partitions) != 8 {
		t.Fatalf("invocation after the resume: %v, %q; want both topics", err, rep2.Lines())
	}
	if got := runningDrain(t, m); got.Started.Equal(first.Started) {
		t.Fatalf("the drain that started with %s paused was adopted after its resume", topic)
	}
	// The resume's catch-up, or the new drain, mirrors the resumed topic;
	// a drain that found partitions busy (held by the catch-up) is not
	// adopted either: the next invocation's drain holds all of them.
	waitEvents(t, e, 2, 5*time.Second)
	waitFor(t, 10*time.Second, "the resume's catch-up ended", func() bool { _, active := svc.ActiveCatchUp(); return !active })
	rep3, err := svc.DrainFollowing(ctx, "timer", time.Now().Add(time.Second))
	if err != nil || rep3.Stopped != mirror.StopHandedOver || len(rep3.Partitions) != 8 {
		t.Fatalf("third invocation: %v, %q", err, rep3.Lines())
	}
	for _, p := range rep3.Partitions {
		if p.Busy {
			t.Fatalf("third invocation: %s busy: a drain kept partitions it never got", p)
		}
	}
}

// A drain whose claim the group ends in the middle of its window (a
// heartbeat answered "rebalance in progress", as when heartbeats come late
// on a loaded machine) joins again for the rest of the window when the
// group has no other member: records produced after the loss are mirrored
// within the window, not left to the next invocation.
func TestClaimLostMidWindowRejoins(t *testing.T) {
	e := newEnv(t)
	m := e.newMirrorWith(mirror.Options{}, nil, withControl)
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 60 * time.Second})
	defer svc.Close()
	ctx := context.Background()
	e.produce(followRecord(0, 0))
	until := time.Now().Add(15 * time.Second)
	done := make(chan *mirror.Report, 1)
	go func() {
		rep, _ := svc.DrainFollowing(ctx, "timer", until)
		done <- rep
	}()
	waitEvents(t, e, 1, 5*time.Second)
	e.cluster.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		hb, ok := req.(*kmsg.HeartbeatRequest)
		if !ok || hb.Group != e.group {
			e.cluster.KeepControl()
			return nil, nil, false
		}
		resp := hb.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil, true
	})
	waitFor(t, 10*time.Second, "the drain ended by the lost claim", func() bool {
		for _, r := range svc.Reports() {
			if r.Stopped == mirror.StopRebalanced {
				return true
			}
		}
		return false
	})
	e.produce(followRecord(1, 1), followRecord(2, 2))
	waitEvents(t, e, 3, time.Until(until))
	rep := <-done
	if rep.Stopped != mirror.StopHandedOver || rep.Records != 2 {
		t.Fatalf("the invocation: %q; want its drain joined again and handed over with the 2 records after the loss", rep.Lines())
	}
}

// TestResetUnderFollowModeStopsTheFollower: in follow mode this process's
// drain is handed over from tick to tick and always holds its partitions,
// so Mirror.ResetOffsets alone is refused as busy; Service.ResetOffsets
// (what /api/offsets calls) hands the reset to the follower, which ends its
// drain (it commits what Event Hubs acknowledged and lets go), applies the
// reset and starts the next drain from the reset position within the same
// invocation's window (issue 50: before, the follower stopped for good and
// the records waited for the next tick).
func TestResetUnderFollowModeStopsTheFollower(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	m := e.newMirrorWith(mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test1$`)}}, nil, withControl)
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	defer svc.Close()
	for i := range 10 {
		e.produce(followRecord(0, i))
	}
	window := time.Now().Add(15 * time.Second)
	done := make(chan *mirror.Report, 1)
	go func() {
		rep, _ := svc.DrainFollowing(context.Background(), "timer", window)
		done <- rep
	}()
	waitEvents(t, e, 10, 10*time.Second)

	req := mirror.ResetRequest{Select: mirror.TopicSelection{Names: []string{topic}}, Partitions: []int32{0}, To: mirror.ResetShiftBy, Shift: -4, Apply: true, By: "test"}
	if _, err := m.ResetOffsets(context.Background(), req); !errors.Is(err, mirror.ErrBusy) {
		t.Fatalf("a reset beside the following drain: %v, want ErrBusy (the drain holds the partition)", err)
	}
	res, err := svc.ResetOffsets(context.Background(), req)
	if err != nil {
		t.Fatalf("the operator's reset under follow mode: %v", err)
	}
	if len(res.Partitions) != 1 || res.Partitions[0].After != 6 || res.Resent != 4 {
		t.Fatalf("reset: %+v, want partition 0 moved to 6 with 4 records to send again", res)
	}
	// The follower takes the partition back from the reset position
	// within the same window.
	waitEvents(t, e, 14, 10*time.Second)
	waitFor(t, 10*time.Second, "the records above the reset committed again", func() bool { return e.committed(m, topic)[0] == 10 })
	select {
	case rep := <-done:
		t.Fatalf("the following invocation ended before its window's end: %q", rep.Lines())
	default:
	}
	if rep := <-done; rep.Failed() || rep.Stopped != mirror.StopHandedOver {
		t.Fatalf("the invocation: %q, want handed over without errors", rep.Lines())
	}
}

// TestDedupHandover: with deduplication on, a following drain is adopted by
// the next invocation and then stops in its grace, and every commit after
// its floors is cut, as if the process died after sending. The next drain
// (another process) sends none of it again and finds all of it: the floors
// written when the drain started cover what it sent in every invocation and
// in the gaps between them.
func TestDedupHandover(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test3"
	opts := mirror.Options{Deduplicate: true, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test3$`)}}
	gate := newCommitGate(e)
	m := e.newMirror(opts)
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	defer svc.Close()
	ctx := context.Background()
	e.produceKeyed(topic, 4, 5, "a")
	gate.cut()

	rep1, err := svc.DrainFollowing(ctx, "timer", time.Now().Add(1500*time.Millisecond))
	if err != nil || rep1.Stopped != mirror.StopHandedOver || rep1.Records != 20 {
		t.Fatalf("first invocation: %v, stopped %q, records %d: %v", err, rep1.Stopped, rep1.Records, rep1.Lines())
	}
	e.produceKeyed(topic, 4, 5, "b") // between the invocations
	waitEvents(t, e, 40, 5*time.Second)
	rep2, err := svc.DrainFollowing(ctx, "timer", time.Now().Add(time.Second))
	if err != nil || rep2.Stopped != mirror.StopHandedOver {
		t.Fatalf("second invocation: %v, stopped %q: %v", err, rep2.Stopped, rep2.Lines())
	}
	e.produceKeyed(topic, 4, 5, "c") // after the last window, before the grace ends
	waitEvents(t, e, 60, 5*time.Second)
	deadline := time.Now().Add(mirror.HandoverGrace + 5*time.Second)
	for len(m.Running()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the drain still runs %s after its last window", mirror.HandoverGrace+5*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}

	gate.open()
	rep := e.drain(e.newMirror(opts), mirror.Limits{})
	if rep.Records != 0 || alreadyMirrored(rep) != 60 {
		t.Fatalf("the next drain sent %d, found %d; want 0 and 60: %v", rep.Records, alreadyMirrored(rep), rep.Lines())
	}
	exactlyOnce(t, e, topic, map[string]int64{topic: 15})
}

// An invocation whose budget (MIRROR_MAX_DURATION) leaves no follow window
// drains and returns instead of handing its drain over at once: its
// records are committed and reported by the invocation itself.
func TestNoFollowWindowLeftDrainsAndReturns(t *testing.T) {
	e := newEnv(t)
	m := e.newMirror(mirror.Options{})
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 2 * time.Second})
	defer svc.Close()
	e.produce(followRecord(0, 0), followRecord(1, 1))
	rep, err := svc.DrainFollowing(context.Background(), "timer", time.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("invocation: %v", err)
	}
	if rep.Stopped == mirror.StopHandedOver || !rep.CaughtUp() || rep.Records != 2 || rep.LagAfter != 0 {
		t.Fatalf("invocation with a 2 s budget: want a drain that caught up, committed both records and returned: %q", rep.Lines())
	}
	if got := e.committed(m, "prod.test1"); got[0] != 1 || got[1] != 1 {
		t.Errorf("committed %v, want offset 1 on partitions 0 and 1", got)
	}
}
