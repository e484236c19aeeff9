package mirror_test

// Issue 22: ten defects between positions, deduplication, offset reset,
// pause and follow mode, each reproduced over kfake and the emulator. Each
// test failed before its fix.

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

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// faultySink is the real Event Hubs adapter with faults injected into its
// read-back: reads of the last sequence number fail while failLast is set,
// and each event read back is delayed by readDelay.
type faultySink struct {
	*eventhubs.Sink
	failLast  atomic.Bool
	readDelay time.Duration
}

func (f *faultySink) LastSequence(ctx context.Context, hub, partitionID string) (int64, error) {
	if f.failLast.Load() {
		return 0, errors.New("injected: management read failed")
	}
	return f.Sink.LastSequence(ctx, hub, partitionID)
}

func (f *faultySink) ReadAfter(ctx context.Context, hub, partitionID string, after, until int64, fn func(mirror.StoredEvent)) error {
	return f.Sink.ReadAfter(ctx, hub, partitionID, after, until, func(ev mirror.StoredEvent) {
		if f.readDelay > 0 {
			time.Sleep(f.readDelay)
		}
		fn(ev)
	})
}

// delayedControl is the real Kafka control with the drains' writes to the
// kept pause slot delayed, so that they land after an operator's decision.
type delayedControl struct {
	*kafka.Source
	keptDelay time.Duration
	keptWrite chan struct{} // closed when a delayed write started
	once      sync.Once
}

func (c *delayedControl) WriteControlRecord(ctx context.Context, slot, topic, record string) error {
	if slot == mirror.ControlSlotKept && c.keptDelay > 0 {
		c.once.Do(func() { close(c.keptWrite) })
		time.Sleep(c.keptDelay)
	}
	return c.Source.WriteControlRecord(ctx, slot, topic, record)
}

// withControl makes the source the mirror's Control (newMirrorWith).
func withControl(s *kafka.Source) mirror.Control { return s }

// uncleanEnd mirrors 4 x n keyed records of topic with deduplication on
// and every commit after the first cut: an unclean end, the records in the
// hub, the group's offsets at 0 with floors.
func uncleanEnd(t *testing.T, e *env, topic string, n int, opts mirror.Options) {
	t.Helper()
	gate := newCommitGate(e)
	e.produceKeyed(topic, 4, n, "a")
	gate.cut()
	rep := e.drain(e.newMirror(opts), mirror.Limits{})
	gate.open()
	if rep.Records != int64(4*n) {
		t.Fatalf("unclean drain sent %d records, want %d: %v", rep.Records, 4*n, rep.Lines())
	}
}

// Defect 1: a partition added to a mirrored topic is mirrored by a running
// process (its member rejoins), from its earliest offset under latest.
func TestAddedPartitionIsMirroredByARunningProcess(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	m := e.newMirror(mirror.Options{StartOffset: mirror.StartLatest})
	e.produce(&kgo.Record{Topic: topic, Partition: 0, Value: []byte("before")})
	e.drain(m, mirror.Limits{}) // first deployment: starts at the end
	e.addPartitions(topic, 5)
	var recs []*kgo.Record
	for i := range 7 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 4, Value: fmt.Appendf(nil, "new%d", i)})
	}
	e.produceFresh(recs...)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		e.drain(m, mirror.Limits{MaxDuration: 3 * time.Second})
		if e.committed(m, topic)[4] == 7 {
			counts := e.tally(topic, 4)
			for off := range int64(7) {
				if counts[provenance{topic, 4, off}] != 1 {
					t.Fatalf("record %s/4/%d mirrored %d times", topic, off, counts[provenance{topic, 4, off}])
				}
			}
			return
		}
		time.Sleep(300 * time.Millisecond) // within the membership's idle grace
	}
	t.Fatalf("partition 4 never mirrored: committed %v", e.committed(m, topic))
}

// Defect 2: a drain that cannot read a hub's last sequence numbers after an
// unclean end must leave the unclean metadata for the next drain.
func TestDedupUnreadableHubKeepsTheUncleanMark(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	opts := mirror.Options{Deduplicate: true}
	uncleanEnd(t, e, topic, 50, opts)
	var fs *faultySink
	m := e.newMirrorWith(opts, func(s *eventhubs.Sink) mirror.Sink { fs = &faultySink{Sink: s}; return fs }, nil)
	fs.failLast.Store(true)
	if rep := e.drain(m, mirror.Limits{}); rep.Records != 0 {
		t.Fatalf("a drain that could not read back sent %d records: %v", rep.Records, rep.Lines())
	}
	fs.failLast.Store(false)
	rep := e.drain(m, mirror.Limits{})
	if rep.Records != 0 || alreadyMirrored(rep) != 200 {
		t.Fatalf("after the failed read-back: %d sent, %d found in the hub (want 0 and 200): %v", rep.Records, alreadyMirrored(rep), rep.Lines())
	}
	exactlyOnce(t, e, topic, map[string]int64{topic: 50})
}

// Defects 2 and 3: after an unclean end retention removes records. Under
// the fail policy the partition is failed and must keep its unclean mark;
// under resume-earliest the records above the gap are read back, not sent
// again.
func TestDedupRetentionGapAfterAnUncleanEnd(t *testing.T) {
	for _, failFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail-first=%v", failFirst), func(t *testing.T) {
			e := newEnv(t)
			const topic = "prod.test1"
			uncleanEnd(t, e, topic, 50, mirror.Options{Deduplicate: true})
			if err := e.cluster.DeleteRecords(topic, 0, 10); err != nil {
				t.Fatal(err)
			}
			want := int64(190)
			if failFirst {
				// The other partitions are reconciled and committed clean;
				// partition 0 fails and keeps its unclean mark.
				rep := e.drain(e.newMirror(mirror.Options{Deduplicate: true}), mirror.Limits{})
				if rep.Records != 0 || rep.Partitions[0].Gap != 10 || alreadyMirrored(rep) != 150 {
					t.Fatalf("fail policy: %v", rep.Lines())
				}
				want = 40
			}
			rep := e.drain(e.newMirror(mirror.Options{Deduplicate: true, GapPolicy: mirror.GapResumeEarliest}), mirror.Limits{})
			if rep.Records != 0 || alreadyMirrored(rep) != want {
				t.Fatalf("resume-earliest after the gap: %d sent, %d found (want 0 and %d): %v", rep.Records, alreadyMirrored(rep), want, rep.Lines())
			}
			counts := e.tally(topic, 4)
			for p := range int32(4) {
				for off := range int64(50) {
					if c := counts[provenance{topic, p, off}]; c != 1 {
						t.Fatalf("%s/%d/%d mirrored %d times", topic, p, off, c)
					}
				}
			}
		})
	}
}

// Defect 4: an applied offset reset keeps the deduplication state of the
// position it replaces: a reset to the same offsets (resent 0) publishes
// nothing twice.
func TestDedupResetKeepsTheReadBack(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	opts := mirror.Options{Deduplicate: true}
	uncleanEnd(t, e, topic, 25, opts)
	m := e.newMirrorWith(opts, nil, withControl)
	req := mirror.ResetRequest{Topics: []string{topic}, To: mirror.ResetOffset, Offset: 0, By: "test"}
	dry, err := m.ResetOffsets(context.Background(), req)
	if err != nil || dry.Resent != 0 || dry.Skipped != 0 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	req.Apply = true
	if res, err := m.ResetOffsets(context.Background(), req); err != nil || res.Resent != dry.Resent || res.Skipped != dry.Skipped {
		t.Fatalf("applied: %+v %v (dry run %+v)", res, err, dry)
	}
	rep := e.drain(m, mirror.Limits{})
	if rep.Records != 0 || alreadyMirrored(rep) != 100 {
		t.Fatalf("after the reset: %d sent, %d found (want 0 and 100): %v", rep.Records, alreadyMirrored(rep), rep.Lines())
	}
	exactlyOnce(t, e, topic, map[string]int64{topic: 25})
}

// Defect 5: a read-back longer than its bound goes on in the next drain
// instead of starting over (it never finished before), and the commit
// after a read-back that used its whole bound has time of its own.
func TestDedupLongReadBackProgresses(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	opts := mirror.Options{Deduplicate: true}
	uncleanEnd(t, e, topic, 40, opts)
	// 160 events over 4 hub partitions at 50 ms each: 2 s per hub
	// partition, against a 2 s read-back bound.
	m := e.newMirrorWith(opts, func(s *eventhubs.Sink) mirror.Sink { return &faultySink{Sink: s, readDelay: 50 * time.Millisecond} }, nil)
	var sent, found int64
	for range 8 {
		rep := e.drain(m, mirror.Limits{MaxDuration: 4 * time.Second})
		sent += rep.Records
		found += alreadyMirrored(rep)
		done := true
		for _, c := range e.committed(m, topic) {
			done = done && c == 40
		}
		if done {
			break
		}
	}
	if sent != 0 || found != 160 {
		t.Fatalf("over the drains: %d sent, %d found (want 0 and 160); committed %v", sent, found, e.committed(m, topic))
	}
	exactlyOnce(t, e, topic, map[string]int64{topic: 40})
}

// Defects 6 and 7: under KAFKA_START_OFFSET=latest a topic created after
// the group's first deployment starts at its earliest offset, also in a
// catch-up narrowed to it, and the reset dry run says so.
func TestLatestAndANarrowedCatchUpOfANewTopic(t *testing.T) {
	e := newEnv(t, emulator.HubConfig{Name: "prod.test6", PartitionCount: 2})
	opts := mirror.Options{StartOffset: mirror.StartLatest}
	m := e.newMirrorWith(opts, nil, withControl)
	e.produce(&kgo.Record{Topic: "prod.test1", Partition: 0, Value: []byte("before")})
	e.drain(m, mirror.Limits{})
	if err := e.cluster.CreateTopic("prod.test6", 2, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: "prod.test6", Partition: 0, Value: fmt.Appendf(nil, "new%d", i)})
	}
	e.produceFresh(recs...)
	dry, err := m.ResetOffsets(context.Background(), mirror.ResetRequest{Topics: []string{"prod.test6"}, Partitions: []int32{0}, To: mirror.ResetLatest})
	if err != nil || len(dry.Partitions) != 1 || dry.Partitions[0].From != 0 || dry.Skipped != 5 {
		t.Fatalf("dry run to latest: %+v %v (want from 0, skipped 5)", dry, err)
	}
	narrow := mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test6$`)}
	rep := e.drain(m, mirror.Limits{Topics: &narrow})
	if rep.Records != 5 {
		t.Fatalf("narrowed catch-up of the new topic mirrored %d records, want 5: %v", rep.Records, rep.Lines())
	}
	if c := e.tally("prod.test6", 2); len(c) != 5 {
		t.Fatalf("hub holds %d records of the new topic", len(c))
	}
}

// followWithTest2Paused mirrors 4 x 5 records of prod.test2, pauses it and
// starts a drain that follows prod.test1 for window; the returned channel
// gets its report. It returns once the follower holds prod.test1.
func followWithTest2Paused(t *testing.T, e *env, window time.Duration) (*mirror.Mirror, <-chan *mirror.Report) {
	t.Helper()
	m := e.newMirrorWith(mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)}}, nil, withControl)
	e.produceKeyed("prod.test2", 4, 5, "a")
	e.drain(m, mirror.Limits{})
	if _, err := m.SetPaused(context.Background(), "prod.test2", true, "test", "maintenance"); err != nil {
		t.Fatal(err)
	}
	done := make(chan *mirror.Report, 1)
	go func() {
		rep, err := m.Drain(context.Background(), "follow", mirror.Limits{MaxDuration: window + 8*time.Second, FollowUntil: time.Now().Add(window)})
		if err != nil {
			t.Errorf("following drain: %v", err)
		}
		done <- rep
	}()
	time.Sleep(2 * time.Second)
	return m, done
}

// Defect 8: under follow mode an operator resets a paused topic while the
// process follows the others.
func TestResetAPausedTopicWhileFollowing(t *testing.T) {
	e := newEnv(t)
	m, done := followWithTest2Paused(t, e, 12*time.Second)
	res, err := m.ResetOffsets(context.Background(), mirror.ResetRequest{Topics: []string{"prod.test2"}, To: mirror.ResetEarliest, Apply: true, By: "test"})
	if err != nil {
		t.Fatalf("reset of a paused topic under follow mode: %v", err)
	}
	if !res.Applied || res.Resent != 20 {
		t.Fatalf("reset: %+v", res)
	}
	if rep := <-done; rep.Stopped != mirror.StopFollowed {
		t.Errorf("the reset disturbed the follower: %v", rep.Lines())
	}
	for p, c := range e.committed(m, "prod.test2") {
		if c != 0 {
			t.Fatalf("partition %d committed %d after the reset to earliest", p, c)
		}
	}
}

// Defect 9: a paused topic stays in the group's subscription, so Kafka
// keeps its committed offsets however long the pause: it expires the
// offsets of topics a group with members does not subscribe to (KIP-496).
func TestPausedTopicKeepsItsOffsets(t *testing.T) {
	e := newEnv(t)
	m, done := followWithTest2Paused(t, e, 5*time.Second)
	expired := e.expireUnsubscribed([]string{"prod.test1", "prod.test2"})
	if rep := <-done; rep.Stopped != mirror.StopFollowed {
		t.Errorf("the following drain: %v", rep.Lines())
	}
	if len(expired) > 0 {
		t.Fatalf("Kafka would expire the offsets of %v while a drain follows the other topic", expired)
	}
	for p, c := range e.committed(m, "prod.test2") {
		if c != 5 {
			t.Fatalf("partition %d committed %d, want 5", p, c)
		}
	}
}

// Defect 10: a drain's re-write of a pause record that lands after an
// operator's resume does not undo the resume.
func TestDrainsPauseRefreshCannotUndoAResume(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	operator := e.newMirrorWith(mirror.Options{}, nil, withControl)
	if _, err := operator.SetPaused(context.Background(), topic, true, "ann", "maintenance"); err != nil {
		t.Fatal(err)
	}
	dc := &delayedControl{keptDelay: 1500 * time.Millisecond, keptWrite: make(chan struct{})}
	drainer := e.newMirrorWith(mirror.Options{PauseRefresh: time.Nanosecond}, nil, func(s *kafka.Source) mirror.Control { dc.Source = s; return dc })
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = drainer.Drain(context.Background(), "timer", mirror.Limits{MaxDuration: 10 * time.Second})
	}()
	select {
	case <-dc.keptWrite:
	case <-time.After(15 * time.Second):
		t.Fatal("the drain never re-wrote the pause record")
	}
	if _, err := operator.SetPaused(context.Background(), topic, false, "bob", "done"); err != nil {
		t.Fatal(err)
	}
	<-done
	pauses, err := operator.Pauses(context.Background(), []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := pauses[topic]; ok {
		t.Fatalf("the acknowledged resume was undone: %+v", p)
	}
}
