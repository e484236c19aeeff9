package faults

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// Scenario 3d–3g: positions (issue 11).

// TestKafkaCompactedTopicWithLag (3d) makes prod.f2 a compacted topic (16
// keys) and runs the log cleaner every 300 ms while drains that stop after
// 50 records (so the group always has lag) run back to back. A compacted
// topic keeps its topic id: no drain may restart a partition, and committed
// offsets never move backwards. Records the cleaner removed before they were
// mirrored (superseded by a later record with the same key) are explained;
// kfake moves the log start to the first surviving record (Kafka does not),
// so the drains run with MIRROR_GAP_POLICY=resume-earliest.
func TestKafkaCompactedTopicWithLag(t *testing.T) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, "3d", "compacted topic with lag, log cleaner running during drains")
	ctx := context.Background()
	const topic = "prod.f2"
	var cerr error
	e.withKafka(func(c *kfake.Cluster) {
		if cerr = c.DeleteTopic(topic); cerr == nil {
			cerr = c.CreateTopic(topic, e.cfg.Partitions, map[string]string{"cleanup.policy": "compact"})
		}
	})
	if cerr != nil {
		t.Fatal(cerr)
	}
	m := e.newMirror(mirror.Options{GapPolicy: mirror.GapResumeEarliest})
	p := e.startProducer(producerConfig{Shape: func(seq int64, r *kgo.Record) {
		if r.Key == nil {
			r.Key = fmt.Appendf(nil, "key-%02d", seq%16) // a compacted topic needs keys
		}
	}})
	// Slow acknowledgements and short drains keep the group behind the
	// producer, so the cleaner removes records the mirror has not read.
	e.emu.Faults().DelayDispositions(20 * time.Millisecond)
	loop := e.startDrains(m, "drain", mirror.Limits{MaxRecords: 50, MaxDuration: 1500 * time.Millisecond})
	seen := newRecordSet()
	sleepCtx(ctx, time.Second)
	cleanings := scale(15, 200)
	for range cleanings {
		// Nothing is produced between the read and the cleaning, so every
		// record the cleaner removes was read.
		p.pause()
		recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen.add(recs)
		e.withKafka(func(c *kfake.Cluster) { c.Compact() })
		p.resume()
		e.inject("log cleaner")
		sleepCtx(ctx, 300*time.Millisecond)
	}
	loop.stop()
	p.stop()
	e.emu.Faults().Reset()
	reps, errs := loop.result()
	e.settle(ctx, m, mirror.Limits{})
	final, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	present := newRecordSet()
	present.add(final)
	seen.add(final)
	v := e.verify(expectation{Records: seen.order, Explain: func(r kafkaRecord) string {
		if r.Topic == topic && !present.byID[idOf(r.Topic, r.Partition, r.Offset, r.Value)] {
			return "removed by the log cleaner (a later record has its key) before it was mirrored"
		}
		return ""
	}})
	e.assert(f, v)
	restarts := 0
	for _, rep := range e.drainReports() {
		for _, pr := range rep.Partitions {
			if strings.Contains(pr.Note, "earlier topic") || strings.Contains(pr.Error, "created again") {
				restarts++
			}
		}
	}
	if restarts > 0 {
		t.Errorf("%d partition drains took the compacted topic for a recreated one", restarts)
	}
	f.note("%d cleaner runs during %d drains (%d could not start), each stopping after 50 records; %d records removed by the cleaner before they were mirrored; 0 partitions restarted", cleanings, len(reps), errs, v.Explained)
}

// TestKafkaCommitCutMidDrain (3e) closes the connection of one OffsetCommit
// in three while drains run: a cut commit must not stop the drain's later
// commits (each drain should still commit), and nothing is committed past
// unacknowledged records.
func TestKafkaCommitCutMidDrain(t *testing.T) {
	kafkaCommitCutMidDrain(t, "3e", "OffsetCommit connection cut mid-drain (one commit in three)", false)
}

// TestKafkaCommitCutMidDrainDeduplicated (3e-d) is 3e with
// MIRROR_DEDUPLICATE on: a drain after a cut commit reads back what was
// published since the last commit, so no record may arrive twice.
func TestKafkaCommitCutMidDrainDeduplicated(t *testing.T) {
	kafkaCommitCutMidDrain(t, "3e-d", "as 3e, with MIRROR_DEDUPLICATE=true: zero duplicates", true)
}

func kafkaCommitCutMidDrain(t *testing.T, id, title string, dedup bool) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, id, title)
	ctx := context.Background()
	var seen, cut, afterCut atomic.Int64
	var lastCut atomic.Bool
	e.withKafka(func(c *kfake.Cluster) {
		c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if req.(*kmsg.OffsetCommitRequest).Group != e.group {
				return nil, nil, false
			}
			if seen.Add(1)%3 == 0 {
				cut.Add(1)
				lastCut.Store(true)
				return nil, fmt.Errorf("fault injection: connection closed mid-commit"), true
			}
			if lastCut.Swap(false) {
				afterCut.Add(1)
			}
			return nil, nil, false
		})
	})
	s := inProcess{e: e, f: f, m: e.newMirror(mirror.Options{Deduplicate: dedup}), lim: mirror.Limits{MaxDuration: 2 * time.Second}, warmup: time.Second}
	rounds := scale(8, 60)
	_, v := s.run(ctx, func(ctx context.Context) {
		for range rounds {
			e.inject("commit cut")
			sleepCtx(ctx, 500*time.Millisecond)
		}
	})
	if dedup && v.Duplicates != 0 {
		t.Errorf("%d duplicates with MIRROR_DEDUPLICATE=true, want 0", v.Duplicates)
	}
	f.note("%d of %d OffsetCommits cut (connection closed, no answer); a commit was accepted after %d of them", cut.Load(), seen.Load(), afterCut.Load())
	if cut.Load() > 0 && afterCut.Load() == 0 {
		t.Error("no commit was accepted after a cut one")
	}
}

// TestKafkaManyPartitionsLatency (3f) mirrors one topic of 500 partitions
// while every OffsetCommit takes 50 ms more at the broker and every Fetch,
// topic listing, watermark read and committed-offset read of the mirror's
// Kafka source 50 ms more on its way (added by the client, farSource:
// kfake's SleepControl races when two slept requests share a connection,
// and the mirror's commits are one at a time). Every drain must commit: one
// OffsetCommit carries every advanced partition and the commit path fetches
// nothing.
func TestKafkaManyPartitionsLatency(t *testing.T) {
	e := newEnv(t, envConfig{Topics: []string{"prod.wide"}, Partitions: 500, HubPartitions: 4, KafkaDelay: 50 * time.Millisecond})
	f := newFigures(t, "3f", "500 partitions, 50 ms injected broker latency")
	ctx := context.Background()
	var commits, widest atomic.Int64
	e.withKafka(func(c *kfake.Cluster) {
		c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if oc, ok := req.(*kmsg.OffsetCommitRequest); ok && oc.Group == e.group {
				commits.Add(1)
				n := 0
				for _, t := range oc.Topics {
					n += len(t.Partitions)
				}
				for w := widest.Load(); int64(n) > w && !widest.CompareAndSwap(w, int64(n)); w = widest.Load() {
				}
			}
			c.SleepControl(func() { time.Sleep(50 * time.Millisecond) })
			return nil, nil, false
		})
	})
	e.inject("50 ms latency")
	m := e.newMirror(mirror.Options{})
	s := inProcess{e: e, f: f, m: m, lim: mirror.Limits{MaxDuration: 5 * time.Second}, warmup: time.Second,
		producer: producerConfig{Batch: 50}}
	var errs int
	reps, _ := s.run(ctx, func(ctx context.Context) { sleepCtx(ctx, scale(6*time.Second, time.Minute)) })
	errs = int(e.drains.Load()) - len(reps) - 1 // the settling drain is counted too
	committing := 0
	var problems []string
	for _, r := range reps {
		if r.Stopped != mirror.StopNothingToDo && !r.Failed() {
			committing++
		} else if r.Failed() {
			problems = append(problems, firstProblem(r))
		}
	}
	if len(problems) > 0 {
		f.note("failed drains: %s", strings.Join(problems, "; "))
	}
	var slowest time.Duration
	for _, r := range e.drainReports() {
		slowest = max(slowest, r.Duration)
	}
	f.note("%d drains (%d could not start), %d without error; %d OffsetCommits, up to %d partitions in one; slowest drain %v", len(reps), errs, committing, commits.Load(), widest.Load(), slowest.Round(time.Millisecond))
}

// addPartitions grows topic to n partitions (CreatePartitions).
func (e *env) addPartitions(ctx context.Context, topic string, n int32) error {
	cl := e.producerClient()
	defer cl.Close()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, n
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	res, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range res.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("create partitions of %s: error %d", t.Topic, t.ErrorCode)
		}
	}
	return nil
}

// TestKafkaPartitionAddedUnderLatest (3g) runs with KAFKA_START_OFFSET=latest:
// the records produced before the group's first drain are skipped (that is
// what latest means), but two partitions added to prod.f1 and a new topic
// prod.f4 get records before any drain saw them, and every one of those
// must be mirrored (they start at their earliest offset).
func TestKafkaPartitionAddedUnderLatest(t *testing.T) {
	e := newEnv(t, envConfig{ExtraHubs: []emulator.HubConfig{{Name: "prod.f4", PartitionCount: 4}}})
	f := newFigures(t, "3g", "partitions and a topic added under KAFKA_START_OFFSET=latest")
	ctx := context.Background()
	m := e.newMirror(mirror.Options{StartOffset: mirror.StartLatest})
	p := e.startProducer(producerConfig{})
	p.pause()
	p.produce(ctx, 300)
	if rep, err := e.runDrain(ctx, m, "first", mirror.Limits{MaxDuration: 5 * time.Second}); err != nil || rep.Failed() || rep.Records != 0 {
		t.Fatalf("first deployment under latest: %v %v", err, rep)
	}
	first, _ := e.offsets()
	p.resume()
	loop := e.startDrains(m, "drain", mirror.Limits{MaxDuration: 1500 * time.Millisecond})
	sleepCtx(ctx, time.Second)

	if err := e.addPartitions(ctx, "prod.f1", e.cfg.Partitions+2); err != nil {
		t.Fatal(err)
	}
	var cerr error
	e.withKafka(func(c *kfake.Cluster) { cerr = c.CreateTopic("prod.f4", 4, nil) })
	if cerr != nil {
		t.Fatal(cerr)
	}
	e.inject("partitions and a topic added")
	var recs []*kgo.Record
	for i := range 200 {
		r := &kgo.Record{Value: fmt.Appendf(nil, "late/%08d/", i)}
		if i%2 == 0 {
			r.Topic, r.Partition = "prod.f1", e.cfg.Partitions+int32(i/2%2)
		} else {
			r.Topic, r.Partition = "prod.f4", int32(i/2%4)
		}
		recs = append(recs, r)
	}
	manual, err := kgo.NewClient(kgo.SeedBrokers(e.brokers()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer manual.Close()
	if err := manual.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sleepCtx(ctx, 3*time.Second)
	loop.stop()
	p.stop()
	reps, errs := loop.result()
	e.settle(ctx, m, mirror.Limits{})
	all, err := e.readKafka(ctx, append(append([]string(nil), e.cfg.Topics...), "prod.f4"), 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: all, Explain: func(r kafkaRecord) string {
		if o, ok := first[r.tp()]; ok && r.Offset < o.committed {
			return "produced before the group's first deployment (KAFKA_START_OFFSET=latest)"
		}
		return ""
	}})
	e.assert(f, v)
	f.note("%d records before the first deployment skipped by latest; 200 records in 2 added partitions and a new topic, produced before a drain saw them, all mirrored; %d drains (%d could not start)", v.Explained, len(reps), errs)
}
