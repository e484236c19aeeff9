package mirror_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestCompactedTopicNeverRestarts (issue 11, finding 1): the log cleaner
// removing the last mirrored record (its key was written again) is not a
// recreated topic: the next drain sends only the new records and the
// committed offset never moves backwards.
func TestCompactedTopicNeverRestarts(t *testing.T) {
	e := newEnv(t, emulator.HubConfig{Name: "prod.compact", PartitionCount: 1})
	if err := e.cluster.CreateTopic("prod.compact", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			e.produce(&kgo.Record{Topic: "prod.compact", Key: fmt.Appendf(nil, "k%d", i%50), Value: fmt.Appendf(nil, "v%d", i)})
		}
	}
	m := e.newMirror(mirror.Options{})
	produce(0, 200)
	e.drain(m, mirror.Limits{})
	last := e.committed(m, "prod.compact")[0]
	if last != 200 {
		t.Fatalf("first drain committed %d, want 200", last)
	}
	sent := 200
	for round := range 3 {
		// Rewrite the key of the last mirrored record, then let the
		// cleaner remove it while the mirror has lag.
		produce(200+round*10-1, 10)
		e.cluster.Compact()
		rep := e.drain(m, mirror.Limits{})
		c := e.committed(m, "prod.compact")[0]
		if c < last {
			t.Fatalf("round %d: committed offset moved backwards %d -> %d: %v", round, last, c, rep.Lines())
		}
		last = c
		sent += 10
		if n := len(e.emu.Events("prod.compact", 0)); n != sent {
			t.Fatalf("round %d: %d events in the hub, want %d (only the new records): %v", round, n, sent, rep.Lines())
		}
	}
}

// TestRecreatedTopicDetectedAtStart (findings 1, 5): a commit written for
// the old topic that lands on a recreated one is recognised by its topic
// id, without any fetch, so a failing fetch cannot make the check pass.
func TestRecreatedTopicDetectedAtStart(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test3"
	for i := range 100 {
		e.produce(&kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "old%d", i)})
	}
	m := e.newMirror(mirror.Options{})
	e.drain(m, mirror.Limits{})
	src := e.newSource()
	meta := e.committedMetadata(src, topic, 0)
	if !strings.Contains(meta, "tid=") {
		t.Errorf("commit metadata %q has no topic id", meta)
	}
	if err := e.cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.CreateTopic(topic, 4, nil); err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, 150)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "new%d", i)}
	}
	e.produceFresh(recs...)
	// The old topic's commit arrives late and lands on the new topic.
	e.commitAs(src, topic, 0, 100, meta)
	// The first fetches fail: a check that needed
	// one could not run.
	var failed atomic.Int32
	e.cluster.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if failed.Add(1) > 3 {
			return nil, nil, false
		}
		return nil, fmt.Errorf("injected fetch failure"), true
	})
	rep := e.drain(m, mirror.Limits{})
	var news int
	for _, r := range e.mirrored(topic, 4)[0:4] {
		for _, rec := range r {
			if strings.HasPrefix(string(rec.Value), "new") {
				news++
			}
		}
	}
	if news != 150 {
		t.Fatalf("mirrored %d of the new topic's 150 records: %v", news, rep.Lines())
	}
	if p := findPartition(t, rep, topic, 0); !strings.Contains(p.Note, "deleted and recreated") {
		t.Errorf("report does not say why it started over: %+v", p)
	}
}

// TestRecreatedTopicDetectedWhileReading (finding 8): a topic deleted,
// created again and refilled past the reader's position while a drain reads
// it is not committed; the next drain mirrors the new topic from its start.
func TestRecreatedTopicDetectedWhileReading(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test5"
	for i := range 300 {
		e.produce(&kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "old%d", i)})
	}
	// Slow fetches down so the drain is mid-partition when the topic goes,
	// and fail them while the topic is swapped, so the reader goes on at
	// its offset in the refilled topic.
	var paused atomic.Bool
	e.cluster.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if paused.Load() {
			return nil, fmt.Errorf("injected: topic being swapped"), true
		}
		time.Sleep(5 * time.Millisecond)
		return nil, nil, false
	})
	m := e.newMirror(mirror.Options{FetchBytes: 1})
	done := make(chan *mirror.Report, 1)
	go func() { done <- e.drain(m, mirror.Limits{MaxDuration: 20 * time.Second}) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.emu.Events(topic, 0))+len(e.emu.Events(topic, 1))+len(e.emu.Events(topic, 2))+len(e.emu.Events(topic, 3)) < 20 {
		if time.Now().After(deadline) {
			t.Fatal("drain did not start mirroring")
		}
		time.Sleep(5 * time.Millisecond)
	}
	paused.Store(true)
	time.Sleep(100 * time.Millisecond) // let fetches in flight finish
	if err := e.cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.CreateTopic(topic, 4, nil); err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, 400)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "new%d", i)}
	}
	e.produceFresh(recs...)
	paused.Store(false)
	rep := <-done
	if p := findPartition(t, rep, topic, 0); !strings.Contains(p.Error, "created again") {
		t.Errorf("first drain did not notice the recreation: %+v", p)
	}
	rep2 := e.drain(m, mirror.Limits{})
	seen := map[string]bool{}
	for _, r := range e.mirrored(topic, 4) {
		for _, rec := range r {
			seen[string(rec.Value)] = true
		}
	}
	for i := range 400 {
		if !seen[fmt.Sprintf("new%d", i)] {
			t.Fatalf("record new%d of the recreated topic never mirrored: %v / %v", i, rep.Lines(), rep2.Lines())
		}
	}
}

// TestFailClosedWhenIdentityCannotBeChecked (finding 5): when the topic
// listing that confirms a topic's identity fails, records read since the
// last confirmation are not committed, and the report says why; the next
// drain mirrors them again and commits.
func TestFailClosedWhenIdentityCannotBeChecked(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test4"
	for i := range 50 {
		e.produce(&kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i)})
	}
	m := e.newMirror(mirror.Options{})
	// Metadata v10+ requests are the mirror's topic listings (kafka-go's
	// own stop at v8): the first (drain start) passes, the rest fail.
	var listings atomic.Int32
	var healed atomic.Bool
	e.cluster.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if healed.Load() || req.GetVersion() < 10 || listings.Add(1) == 1 {
			return nil, nil, false
		}
		return nil, fmt.Errorf("injected: metadata unavailable"), true
	})
	rep := e.drain(m, mirror.Limits{})
	p := findPartition(t, rep, topic, 0)
	// Offset 0, where the drain started, was confirmed by the listing at
	// the start; nothing read after it is.
	if p.Records != 50 || p.Committed != 0 || !strings.Contains(p.Note, "identity could not be checked") {
		t.Fatalf("identity unchecked: %+v (%v)", p, rep.Errors)
	}
	healed.Store(true)
	if c := e.committed(m, topic)[0]; c != 0 {
		t.Fatalf("committed %d without an identity check", c)
	}
	rep = e.drain(m, mirror.Limits{})
	if c := e.committed(m, topic)[0]; c != 50 {
		t.Fatalf("after the listing recovered: committed %d, want 50: %v", c, rep.Lines())
	}
}

// TestBrokerWithoutTopicIDs: on a broker that reports no topic ids (Kafka
// before 2.8, here kfake capped at Metadata v9) the mirror works, commits
// without an id, never restarts a compacted partition, and fails closed on
// a commit that carries an id it can no longer check.
func TestBrokerWithoutTopicIDs(t *testing.T) {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Metadata), 9)
	e := newEnvWith(t, []kfake.Opt{kfake.MaxVersions(v)}, emulator.HubConfig{Name: "prod.compact", PartitionCount: 1})
	if err := e.cluster.CreateTopic("prod.compact", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		e.produce(&kgo.Record{Topic: "prod.compact", Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "v%d", i)})
	}
	m := e.newMirror(mirror.Options{})
	e.drain(m, mirror.Limits{})
	src := e.newSource()
	if meta := e.committedMetadata(src, "prod.compact", 0); !regexp.MustCompile(`^ehmirror/2( ack=\d+)?$`).MatchString(meta) {
		t.Fatalf("commit metadata %q, want no topic id", meta)
	}
	for i := 99; i < 109; i++ {
		e.produce(&kgo.Record{Topic: "prod.compact", Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "v%d", i)})
	}
	e.cluster.Compact()
	rep := e.drain(m, mirror.Limits{})
	if n := len(e.emu.Events("prod.compact", 0)); n != 110 || e.committed(m, "prod.compact")[0] != 110 {
		t.Fatalf("after compaction: %d events, want 110: %v", n, rep.Lines())
	}

	e.commitAs(src, "prod.test1", 0, 0, "ehmirror/2 tid=0123456789abcdef0123456789abcdef")
	e.produce(&kgo.Record{Topic: "prod.test1", Partition: 0, Value: []byte("x")})
	rep = e.drain(m, mirror.Limits{})
	if p := findPartition(t, rep, "prod.test1", 0); p.Records != 0 || !strings.Contains(p.Error, "cannot be checked") {
		t.Fatalf("commit with an uncheckable topic id: %+v", p)
	}
}

// listingSource is the real Kafka source with the start of every topic
// listing recorded.
type listingSource struct {
	mirror.Source
	mu     sync.Mutex
	starts []time.Time
}

func (s *listingSource) Topics(ctx context.Context) ([]mirror.Topic, error) {
	s.mu.Lock()
	s.starts = append(s.starts, time.Now())
	s.mu.Unlock()
	return s.Source.Topics(ctx)
}

// slowSendSink is the real Event Hubs adapter with every send held for a
// while first, and the end of the last send recorded.
type slowSendSink struct {
	*eventhubs.Sink
	delay   time.Duration
	lastEnd atomic.Int64 // Unix nanoseconds
}

func (s *slowSendSink) Send(ctx context.Context, b mirror.Batch) error {
	time.Sleep(s.delay)
	err := s.Sink.Send(ctx, b)
	s.lastEnd.Store(time.Now().UnixNano())
	return err
}

// The final identity check needs only the reads: it runs while the senders
// still send what the readers handed over, so the final commit does not
// wait one more round trip to Kafka after the last acknowledgement. What it
// guards is unchanged: the commit still waits for it.
func TestFinalIdentityCheckRunsBesideTheLastSends(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	for p := range int32(4) {
		e.produce(&kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "v%d", p)})
	}
	src := &listingSource{Source: e.newSource()}
	sink := &slowSendSink{Sink: e.newSink(), delay: 500 * time.Millisecond}
	// No periodic identity check or commit: the listings are the drain's
	// start and its final check.
	m, err := mirror.New(src, sink, mirror.Options{Logger: testLogger(), CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rep := e.drain(m, mirror.Limits{})
	if rep.Failed() || rep.Records != 4 || !rep.CaughtUp() || rep.LagAfter != 0 {
		t.Fatalf("drain: want 4 records, caught up, no lag: %s\n%s", rep.Summary(), strings.Join(rep.Lines(), "\n"))
	}
	src.mu.Lock()
	starts := slices.Clone(src.starts) // before Lag lists the topics again
	src.mu.Unlock()
	for p, off := range e.committed(m, topic) {
		if off != 1 {
			t.Errorf("partition %d committed %d, want 1", p, off)
		}
	}
	if len(starts) < 2 {
		t.Fatalf("%d topic listings, want the start's and the final identity check's", len(starts))
	}
	lastSend := time.Unix(0, sink.lastEnd.Load())
	if final := starts[len(starts)-1]; !final.Before(lastSend) {
		t.Errorf("the final identity check started %v after the last send ended; want it beside the sends", final.Sub(lastSend).Round(time.Millisecond))
	}
}
