package mirror_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// commitDuringJoin is the real Kafka source, whose Claim runs beforeClaim
// once the drain's first watermark request has been answered: it stands
// for whatever happens on the cluster while a drain joins its group.
type commitDuringJoin struct {
	mirror.Source
	beforeClaim func()

	once     sync.Once
	answered chan struct{} // closed when the first Watermarks returned
}

func (s *commitDuringJoin) Watermarks(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]mirror.Watermarks, error) {
	defer s.once.Do(func() { close(s.answered) })
	return s.Source.Watermarks(ctx, tps)
}

func (s *commitDuringJoin) Claim(ctx context.Context, topics []string) (mirror.Claim, error) {
	select {
	case <-s.answered:
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("test: no watermark request before the claim")
	}
	s.beforeClaim()
	return s.Source.Claim(ctx, topics)
}

// A drain reads its watermarks while it joins the group. Records produced
// meanwhile, committed by the group's previous owner before it let go, put
// the committed offset past the log end read before the join. The drain
// must start at the committed offset as usual, not take the position for
// one past the log end (a recreated topic: failed, or restarted at the
// earliest offset, which would mirror everything again). With
// deduplication on, as without.
func TestCommitPastTheEarlyLogEndStartsAtTheCommit(t *testing.T) {
	for _, dedup := range []bool{false, true} {
		t.Run(fmt.Sprintf("deduplicate=%t", dedup), func(t *testing.T) { commitPastTheEarlyLogEnd(t, dedup) })
	}
}

func commitPastTheEarlyLogEnd(t *testing.T, dedup bool) {
	e := newEnv(t)
	const topic = "prod.test1"
	produceTo := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "o%d", i)})
		}
		e.produce(recs...)
	}
	produceTo(0, 10)
	e.commitAs(e.newSource(), topic, 0, 5, "")

	src := &commitDuringJoin{Source: e.newSource(), answered: make(chan struct{})}
	src.beforeClaim = func() {
		// The previous owner mirrored 10 new records up to offset 14
		// and committed 15, after the drain read the log end (10).
		produceTo(10, 20)
		e.commitAs(e.newSource(), topic, 0, 15, "")
	}
	sink := e.newSink()
	m, err := mirror.New(src, sink, mirror.Options{Logger: testLogger(), CommitInterval: 100 * time.Millisecond, Deduplicate: dedup})
	if err != nil {
		t.Fatal(err)
	}
	rep := e.drain(m, mirror.Limits{MaxDuration: time.Minute})
	if rep.Failed() || rep.Records != 5 || !rep.CaughtUp() || rep.LagAfter != 0 {
		t.Fatalf("drain: want 5 records (offsets 15..19), caught up: %s\n%s", rep.Summary(), strings.Join(rep.Lines(), "\n"))
	}
	for _, p := range rep.Partitions {
		if p.Note != "" || p.Error != "" {
			t.Errorf("partition %s/%d: note %q, error %q; want neither", p.Topic, p.Partition, p.Note, p.Error)
		}
	}
	evs := e.mirrored(topic, 4)[0]
	if len(evs) != 5 || evs[0].Offset != 15 || evs[4].Offset != 19 {
		t.Errorf("hub partition 0 holds %d events, want offsets 15..19", len(evs))
	}
	if got := e.committed(m, topic)[0]; got != 20 {
		t.Errorf("committed %d, want 20", got)
	}
}

// A join that waits for a rebalance takes seconds, in which retention may
// move a partition's log start past the one the drain read as it began
// joining. A partition the group never committed must start at the log
// start of now, not meet an out-of-range fetch that the gap policy (fail)
// takes for records the group lost: it never owned them. With
// deduplication on, as without.
func TestALongJoinReadsTheWatermarksAgain(t *testing.T) {
	for _, dedup := range []bool{false, true} {
		t.Run(fmt.Sprintf("deduplicate=%t", dedup), func(t *testing.T) { longJoinReadsTheWatermarksAgain(t, dedup) })
	}
}

func longJoinReadsTheWatermarksAgain(t *testing.T, dedup bool) {
	e := newEnv(t)
	const topic = "prod.test1"
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "o%d", i)})
	}
	e.produce(recs...)

	src := &commitDuringJoin{Source: e.newSource(), answered: make(chan struct{})}
	src.beforeClaim = func() {
		// Retention deletes offsets 0..9 while the join waits for a
		// rebalance, longer than early watermarks are trusted.
		if err := e.cluster.DeleteRecords(topic, 0, 10); err != nil {
			t.Errorf("deleting records: %v", err)
		}
		time.Sleep(2500 * time.Millisecond)
	}
	sink := e.newSink()
	m, err := mirror.New(src, sink, mirror.Options{Logger: testLogger(), CommitInterval: 100 * time.Millisecond, GapPolicy: mirror.GapFail, Deduplicate: dedup})
	if err != nil {
		t.Fatal(err)
	}
	rep := e.drain(m, mirror.Limits{MaxDuration: time.Minute})
	if rep.Failed() || rep.Records != 10 || !rep.CaughtUp() {
		t.Fatalf("drain: want 10 records (offsets 10..19), caught up, no failure: %s\n%s", rep.Summary(), strings.Join(rep.Lines(), "\n"))
	}
	evs := e.mirrored(topic, 4)[0]
	if len(evs) != 10 || evs[0].Offset != 10 || evs[9].Offset != 19 {
		t.Errorf("hub partition 0 holds %d events, want offsets 10..19", len(evs))
	}
	if got := e.committed(m, topic)[0]; got != 20 {
		t.Errorf("committed %d, want 20", got)
	}
}
