package mirror

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestHealthLastOutcome(t *testing.T) {
	h := newHealthTracker()
	part := func(committed, lagAfter, records int64) PartitionReport {
		return PartitionReport{Topic: "t", Partition: 0, Hub: "h", Committed: committed, LagAfter: lagAfter, Records: records}
	}
	drain := func(ps ...PartitionReport) {
		h.observe(&Report{Run: "timer", Started: time.Now(), Stopped: StopCaughtUp, Partitions: ps})
	}
	drain(part(10, 0, 10))
	if s := h.snapshot(nil, nil); !s.OK {
		t.Fatalf("healthy drain: %+v", s)
	}
	// Lag that does not move for StallDrains drains is a problem.
	for range StallDrains {
		if s := h.snapshot(nil, nil); !s.OK {
			t.Fatalf("stalled too early: %+v", s)
		}
		drain(part(10, 5, 0))
	}
	if s := h.snapshot(nil, nil); s.OK || s.Problems[0].Kind != KindStalled || !strings.HasPrefix(s.Reason, "stalled on 1 partition (lag 5") {
		t.Fatalf("stall not reported: %+v", s)
	}
	drain(part(15, 0, 5))
	if s := h.snapshot(nil, nil); !s.OK {
		t.Fatalf("progress did not clear the stall: %+v", s)
	}
	// A gap, an oversized skip and a throttled partition are reported.
	gap := part(15, 0, 0)
	gap.Gap = 3
	over := PartitionReport{Topic: "t", Partition: 1, Hub: "h", SkippedOffsets: []int64{7}}
	thr := PartitionReport{Topic: "u", Partition: 0, Hub: "h2", Error: "gave up", Kind: KindThrottled, LagAfter: 4}
	drain(gap, over, thr)
	s := h.snapshot(nil, nil)
	kinds := []string{}
	for _, p := range s.Problems {
		kinds = append(kinds, p.Kind)
	}
	if strings.Join(kinds, ",") != "gap,oversized,throttled" || !strings.Contains(s.Reason, "(and 2 more causes)") {
		t.Fatalf("problems %v, reason %q", kinds, s.Reason)
	}
	// A generic error does not hide a problem of a known kind in the reason.
	generic := PartitionReport{Topic: "a", Partition: 0, Hub: "h0", Error: "context deadline exceeded", Kind: KindError, LagAfter: 1}
	drain(generic, thr)
	if s := h.snapshot(nil, nil); s.Problems[0].Kind != KindError || strings.Contains(s.Reason, "context deadline exceeded") {
		t.Fatalf("reason %q names the generic error, want the throttled partition", s.Reason)
	}
	// A hub error stays until a partition of that hub is mirrored again.
	h.observe(&Report{Run: "timer", Stopped: StopNothingToDo, Errors: []string{`topic "x" -> event hub "hx": nope`},
		HubErrors: []HubError{{Topic: "x", Hub: "hx", Kind: KindHubMissing, Error: "nope"}}})
	if s := h.snapshot(nil, nil); s.OK || s.Problems[0].Hub != "hx" || s.Problems[0].Kind != KindHubMissing {
		t.Fatalf("hub problem: %+v", s)
	}
}

func TestPartitionKind(t *testing.T) {
	ps := newPartitionState(TopicPartition{Topic: "t"}, "h", 0)
	ps.err = fmt.Errorf("sending: %w", ErrThrottled)
	if k := partitionKind(ps); k != KindThrottled {
		t.Errorf("throttled: %q", k)
	}
	ps.err, ps.gap = errors.New("gap: 3 records were removed by retention"), 3
	if k := partitionKind(ps); k != KindGap {
		t.Errorf("gap: %q", k)
	}
	ps.changedLog = true
	if k := partitionKind(ps); k != KindRecreated {
		t.Errorf("recreated: %q", k)
	}
}

// A problem that only said Kafka could not be reached clears as soon as
// Kafka answers (the status read the lag), not at the next drain.
func TestKafkaProblemClearsWhenKafkaAnswers(t *testing.T) {
	h := newHealthTracker()
	h.observe(&Report{Run: "timer", Started: time.Now(), Stopped: StopFailed, Errors: []string{"listing Kafka topics: dial tcp 127.0.0.1:9092: connect: connection refused"}})
	if s := h.snapshot(nil, nil); s.OK || s.Problems[0].Kind != KindKafka {
		t.Fatalf("Kafka down: %+v", s)
	}
	h.kafkaAnswered()
	if s := h.snapshot(nil, nil); !s.OK {
		t.Fatalf("still not OK after Kafka answered: %+v", s)
	}
}

// A running drain's failure is a problem once it lasted LiveFailureAfter,
// and one still going on when a drain ended stays a problem until a later
// drain with partitions ends without it, or until a running drain's sends
// (or fetches) at its place are acknowledged again.
func TestOutagesAreProblems(t *testing.T) {
	h := newHealthTracker()
	now := time.Now()
	old := Outage{Kind: KindError, Hub: "h", HubPartition: "0", Since: now.Add(-2 * LiveFailureAfter), Last: now, Attempts: 20, Error: "refused"}
	s := h.snapshot([]RunningDrain{{Run: "timer", Outages: []Outage{old}}}, nil)
	if s.OK || !strings.Contains(s.Reason, "sends to event hub h partition 0 failing for") {
		t.Fatalf("ongoing outage: %+v", s)
	}
	part := PartitionReport{Topic: "t", Partition: 0, Hub: "h", LagAfter: 3}
	h.observe(&Report{Run: "timer", Started: now, Stopped: StopFollowed, Outages: []Outage{old}, Partitions: []PartitionReport{part}})
	if s := h.snapshot(nil, nil); s.OK {
		t.Fatal("an outage still going on at the drain's end is not a problem")
	}
	// A running drain's sends there acknowledged again before that outage's
	// last attempt do not clear it; after it, they do, at once.
	lt := newLiveTracker()
	lt.recover(old.key(), now.Add(-time.Second))
	if s := h.snapshot(nil, lt.recoveredAfter); s.OK {
		t.Fatal("a success before the outage's last attempt cleared it")
	}
	lt.recover(old.key(), now.Add(time.Second))
	if s := h.snapshot(nil, lt.recoveredAfter); !s.OK {
		t.Fatalf("the outage stays a problem after its sends were acknowledged again: %+v", s)
	}
	h.observe(&Report{Run: "timer", Started: now, Stopped: StopFollowed, Outages: []Outage{old}, Partitions: []PartitionReport{part}})
	ended := old
	ended.Until = now
	h.observe(&Report{Run: "timer", Started: now, Stopped: StopCaughtUp, Outages: []Outage{ended}, Partitions: []PartitionReport{part}})
	if s := h.snapshot(nil, nil); !s.OK {
		t.Fatalf("an outage that ended is still a problem: %+v", s)
	}
}

// A catch-up whose last drain could not reach Kafka does not keep that
// error once Kafka answers (a drain after a broker restart may run for its
// whole budget before it reports).
func TestCatchUpKafkaErrorClearsWhenKafkaAnswers(t *testing.T) {
	s := &Service{mirror: &Mirror{live: newLiveTracker()}, health: newHealthTracker()}
	kafka := &catchUp{status: CatchUpStatus{ID: "a", LastError: "reading pauses: OffsetFetch: unexpected EOF", LastErrorAt: time.Now()}, kafkaError: true}
	hub := &catchUp{status: CatchUpStatus{ID: "b", LastError: "unauthorized"}}
	s.runs = []*catchUp{kafka, hub}
	s.active = kafka
	s.Health(nil) // Kafka did not answer
	if st, _ := s.CatchUp("a"); st.LastError == "" {
		t.Fatal("cleared without Kafka answering")
	}
	s.Health(&LagReport{})
	if st, _ := s.ActiveCatchUp(); st.LastError != "" || !st.LastErrorAt.IsZero() {
		t.Errorf("the Kafka error stayed after Kafka answered: %+v", st)
	}
	if st, _ := s.CatchUp("b"); st.LastError != "unauthorized" {
		t.Errorf("an error that is not Kafka's was cleared: %+v", st)
	}
}

// The history keeps one point per HistoryStep over HistorySpan, the newest
// following the reads, with the delivered and committed rates between
// points.
func TestHistoryRing(t *testing.T) {
	var h history
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	for i := range 200 { // 100 min, a read every 30 s
		h.add(t0.Add(time.Duration(i)*HistoryStep), int64(1000-i), int64(10*i), int64(20*i))
		h.add(t0.Add(time.Duration(i)*HistoryStep+time.Second), int64(1000-i), int64(10*i), int64(20*i)) // a second read 1 s later moves the newest point
	}
	ps := h.snapshot()
	if n := len(ps); n < 115 || n > 122 {
		t.Fatalf("%d points over an hour at one per 30 s", n)
	}
	if first, last := ps[0].At, ps[len(ps)-1].At; last.Sub(first) > HistorySpan {
		t.Errorf("the history spans %s", last.Sub(first))
	}
	if p := ps[len(ps)-2]; p.RecordsPerSec < 0.3 || p.RecordsPerSec > 0.4 || p.CommittedPerSec < 0.6 || p.CommittedPerSec > 0.7 {
		t.Errorf("rates %+v, want 10 and 20 per 30 s", p)
	}
}
