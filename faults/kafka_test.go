package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

// Scenario 3: Kafka faults.

// TestKafkaBrokerRestart (3a) closes the broker in the middle of drains and
// starts it again on the same port with its data directory (log and
// committed offsets survive, as with a real broker restart). Drains fail or
// cannot start while it is down; the producer blocks and resumes.
func TestKafkaBrokerRestart(t *testing.T) {
	e := newEnv(t, envConfig{Restartable: true})
	f := newFigures(t, "3a", "Kafka broker restarted mid-drain (same port, same data dir)")
	ctx := context.Background()
	s := inProcess{e: e, f: f, m: e.newMirror(mirror.Options{}), lim: mirror.Limits{MaxDuration: 2 * time.Second}, warmup: time.Second}
	restarts := scale(2, 12)
	s.run(ctx, func(ctx context.Context) {
		for range restarts {
			e.inject("kafka restart")
			before, _ := e.offsets()
			if err := e.restartKafka(time.Second); err != nil {
				t.Fatal(err)
			}
			e.inject("kafka restarted")
			// Wait for a drain to commit again before the next restart.
			waitCommitProgress(ctx, e, before, 20*time.Second)
		}
	})
	f.note("broker restarted %d times mid-drain, 1 s down each time", restarts)
}

// waitCommitProgress waits until some committed offset moved past before.
func waitCommitProgress(ctx context.Context, e *env, before map[mirror.TopicPartition]partitionOffsets, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		now, ok := e.offsets()
		if ok {
			for tp, o := range now {
				if o.committed > before[tp].committed {
					return
				}
			}
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	e.t.Errorf("no commit progress within %v", timeout)
}

// TestKafkaCoordinatorErrors (3b) makes the group coordinator fail the
// mirror's group requests while drains run: commits refused
// (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR), a commit applied but
// answered REQUEST_TIMED_OUT, heartbeats refused (the claim is lost), joins
// and syncs refused, offset fetches refused, and (through a control hook) a
// commit whose connection is closed before any answer.
func TestKafkaCoordinatorErrors(t *testing.T) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, "3b", "Kafka group coordinator errors (commit, heartbeat, join, sync, fetch; connection closed mid-commit)")
	ctx := context.Background()
	s := inProcess{e: e, f: f, m: e.newMirror(mirror.Options{}), lim: mirror.Limits{MaxDuration: 2 * time.Second}, warmup: time.Second}
	g := e.group
	rounds := []kfake.Fault{
		{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: g, Err: kerr.CoordinatorNotAvailable, Count: 3},
		{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: g, Err: kerr.NotCoordinator, Count: 2},
		{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: g, Err: kerr.RequestTimedOut, Count: 2},
		{Keys: []kmsg.Key{kmsg.JoinGroup}, Group: g, Err: kerr.CoordinatorLoadInProgress, Count: 2},
		{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: g, Err: kerr.NotCoordinator, Count: 3},
		{Keys: []kmsg.Key{kmsg.SyncGroup}, Group: g, Err: kerr.RebalanceInProgress, Count: 1},
		{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: g, Err: kerr.RebalanceInProgress, Count: 1},
		{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: g, Err: kerr.CoordinatorLoadInProgress, Count: 2},
	}
	repeat := scale(1, 8)
	var handles []*kfake.FaultHandle
	closedMidCommit := 0
	s.run(ctx, func(ctx context.Context) {
		for r := range repeat * len(rounds) {
			fault := rounds[r%len(rounds)]
			e.withKafka(func(c *kfake.Cluster) { handles = append(handles, c.Fault(fault)) })
			e.inject(fmt.Sprintf("coordinator %v on %v", fault.Err, fault.Keys))
			sleepCtx(ctx, 500*time.Millisecond)
			if r%4 == 3 {
				// The coordinator goes away mid-commit: the connection is
				// closed with no answer.
				e.withKafka(func(c *kfake.Cluster) {
					c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
						if req.(*kmsg.OffsetCommitRequest).Group != g {
							return nil, nil, false
						}
						closedMidCommit++
						return nil, fmt.Errorf("fault injection: connection closed mid-commit"), true
					})
				})
				e.inject("connection closed mid-commit")
				sleepCtx(ctx, 500*time.Millisecond)
			}
		}
	})
	hits := 0
	for _, h := range handles {
		hits += h.Hits()
		h.Remove()
	}
	f.note("%d group requests failed by the coordinator faults, %d commits cut by closing the connection", hits, closedMidCommit)
	if hits == 0 {
		t.Error("no coordinator fault hit a request")
	}
}

// TestKafkaTopicDeletedAndRecreated (3c) deletes a mirrored topic while
// drains run and creates it again at once (new incarnation, offsets from
// 0), then keeps producing into it. Records of the old incarnation below the
// group's committed offset at the deletion must be in Event Hubs; the rest
// of the old incarnation was deleted by the operator. Every record of the
// new incarnation must be mirrored.
func TestKafkaTopicDeletedAndRecreated(t *testing.T) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, "3c", "Kafka topic deleted and recreated mid-drain")
	ctx := context.Background()
	m := e.newMirror(mirror.Options{})
	p := e.startProducer(producerConfig{})
	loop := e.startDrains(m, "drain", mirror.Limits{MaxDuration: 1500 * time.Millisecond})
	sleepCtx(ctx, time.Second)

	const topic = "prod.f2"
	var old []kafkaRecord
	committedAtDelete := map[mirror.TopicPartition]int64{}
	incarnations := scale(2, 10)
	for i := range incarnations {
		p.pause()
		recs, err := e.readKafka(ctx, []string{topic}, i)
		if err != nil {
			t.Fatal(err)
		}
		e.mon.pause(topic)
		var derr error
		e.withKafka(func(c *kfake.Cluster) {
			if gi := c.GroupInfo(e.group); gi != nil {
				for part, gc := range gi.Commits[topic] {
					committedAtDelete[mirror.TopicPartition{Topic: topic, Partition: part}] = gc.Offset
				}
			}
			if derr = c.DeleteTopic(topic); derr == nil {
				derr = c.CreateTopic(topic, e.cfg.Partitions, nil)
			}
		})
		if derr != nil {
			t.Fatal(derr)
		}
		e.inject("topic deleted and recreated")
		e.mon.resume(topic)
		// Keep the commits of this incarnation to explain its deleted
		// tail.
		for j := range recs {
			r := &recs[j]
			if c, ok := committedAtDelete[r.tp()]; ok && r.Offset < c {
				continue
			}
			r.Epoch = -(i + 1) // deleted before it was committed
		}
		old = append(old, recs...)
		clear(committedAtDelete)
		p.reconnect()
		p.resume()
		sleepCtx(ctx, 2*time.Second)
	}
	loop.stop()
	p.stop()
	reps, errs := loop.result()
	t.Logf("%d drains (%d failed, %d could not start)", len(reps), failedDrains(reps), errs)
	for _, r := range reps {
		if r.Failed() {
			t.Logf("failed drain: %s; %s", r.Summary(), firstProblem(r))
		}
	}
	e.settle(ctx, m, mirror.Limits{})

	current, err := e.readKafka(ctx, e.cfg.Topics, incarnations)
	if err != nil {
		t.Fatal(err)
	}
	inLast := 0
	for _, r := range current {
		if r.Topic == topic {
			inLast++
		}
	}
	t.Logf("%d records in the last incarnation of %s; %d produce errors", inLast, topic, p.errs.Load())
	if inLast == 0 {
		t.Errorf("nothing was produced into the recreated topic")
	}
	// Epochs: old incarnations i >= 0 committed part, -(i+1) for their
	// uncommitted tail; order is judged per incarnation.
	all := append(normalizeEpochs(old), current...)
	v := e.verify(expectation{Records: all, Explain: func(r kafkaRecord) string {
		if r.Epoch >= 1000 {
			return "topic deleted by the operator before the record was mirrored"
		}
		return ""
	}})
	e.assert(f, v)
	f.note("topic %s deleted and recreated %d times while drains ran", topic, incarnations)
}

// normalizeEpochs turns the "deleted before commit" marks (negative
// epochs) into epochs >= 1000 that keep their incarnation apart.
func normalizeEpochs(recs []kafkaRecord) []kafkaRecord {
	for i := range recs {
		if recs[i].Epoch < 0 {
			recs[i].Epoch = 1000 + (-recs[i].Epoch - 1)
		}
	}
	return recs
}
