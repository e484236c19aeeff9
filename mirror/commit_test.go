package mirror_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// slowFetches makes every Fetch of the mirrors made after it take d
// longer, so a drain lasts long enough for periodic commits. The delay is
// the client's (distantSource), not kfake's SleepControl: kfake races on a
// request that queued behind a sleeping one and then sleeps itself, which
// fetches sharing a connection do.
func slowFetches(e *env, d time.Duration) {
	e.fetchDelay = d
}

// TestFailedCommitDoesNotStopLaterCommits (issue 11, finding 2): one
// OffsetCommit cut mid-drain does not keep the drain from committing
// afterwards.
func TestFailedCommitDoesNotStopLaterCommits(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test2"
	for i := range 100 { // one batch each: one fetch each
		e.produce(&kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i)})
	}
	slowFetches(e, 5*time.Millisecond)
	var commits atomic.Int32
	e.cluster.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if commits.Add(1) == 1 {
			return nil, fmt.Errorf("injected: connection cut"), true
		}
		return nil, nil, false
	})
	m := e.newMirror(mirror.Options{FetchBytes: 1})
	rep := e.drain(m, mirror.Limits{})
	if commits.Load() < 2 {
		t.Fatalf("only %d commits attempted: %v", commits.Load(), rep.Lines())
	}
	if c := e.committed(m, topic)[0]; c != 100 {
		t.Fatalf("committed %d after a cut commit, want 100: %v", c, rep.Lines())
	}
}

// TestCommitLatencyManyPartitions (finding 3): 500 partitions with 50 ms of
// injected broker latency on fetches and commits; every drain commits every
// partition. The commit latency is logged (run with -v), not asserted.
func TestCommitLatencyManyPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	const topic, parts = "prod.wide", 500
	e := newEnv(t, emulator.HubConfig{Name: topic, PartitionCount: 4})
	if err := e.cluster.CreateTopic(topic, parts, nil); err != nil {
		t.Fatal(err)
	}
	slowFetches(e, 50*time.Millisecond)
	m := e.newMirror(mirror.Options{CommitInterval: time.Second})
	e.cluster.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		e.cluster.SleepControl(func() { time.Sleep(50 * time.Millisecond) })
		return nil, nil, false
	})
	for round := range 2 {
		recs := make([]*kgo.Record, parts)
		for p := range recs {
			recs[p] = &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "r%d-%d", round, p)}
		}
		e.produce(recs...)
		start := time.Now()
		rep := e.drain(m, mirror.Limits{MaxDuration: 60 * time.Second})
		took := time.Since(start)
		committed := e.committed(m, topic)
		for p := range int32(parts) {
			if committed[p] != int64(round+1) {
				t.Fatalf("round %d: partition %d committed %d, want %d: %s %v", round, p, committed[p], round+1, rep.Summary(), rep.Errors)
			}
		}
		t.Logf("round %d: drain of %d partitions took %v (%s)", round, parts, took, rep.Summary())
	}
	// One commit of every partition, timed from the outside.
	src := e.newSource()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := src.Claim(ctx, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Release(ctx) }()
	offs := map[mirror.TopicPartition]mirror.CommitOffset{}
	for tp := range c.Assigned() {
		offs[tp] = mirror.CommitOffset{Offset: 2, Metadata: "ehmirror/2 tid=0123456789abcdef0123456789abcdef"}
	}
	start := time.Now()
	if err := c.CommitWithMetadata(ctx, offs); err != nil {
		t.Fatal(err)
	}
	t.Logf("commit latency: %v for %d partitions in one OffsetCommit (50 ms injected)", time.Since(start), len(offs))
}

// TestOversizeFailSendsNothingPastTheHeldRecord (finding 10): under the fail
// policy the records after an oversized one are not sent (they would be sent
// again by every drain, since the partition's commit stays before it).
func TestOversizeFailSendsNothingPastTheHeldRecord(t *testing.T) {
	e := newEnv(t, emulator.HubConfig{Name: "small", PartitionCount: 4, MaxMessageSize: 64 << 10})
	routes, _ := mirror.ParseRoutes(`prod\.test5=>small`)
	narrow, _ := mirror.CompileTopicFilter(`prod\.test5`, "")
	recs := []*kgo.Record{
		{Topic: "prod.test5", Partition: 0, Key: []byte("a"), Value: []byte("before")},
		{Topic: "prod.test5", Partition: 0, Key: []byte("b"), Value: bytes.Repeat([]byte("x"), 100<<10)},
	}
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: "prod.test5", Partition: 0, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "after%d", i)})
	}
	e.produce(recs...)
	m := e.newMirror(mirror.Options{Routes: routes})
	for range 2 {
		rep := e.drain(m, mirror.Limits{Topics: &narrow})
		if p := findPartition(t, rep, "prod.test5", 0); p.Committed != 1 || !strings.Contains(p.Error, "offset 1") {
			t.Fatalf("fail policy: %+v", p)
		}
	}
	if got := e.tally("small", 4); len(got) != 1 || got[provenance{"prod.test5", 0, 0}] != 1 {
		t.Fatalf("hub holds %v, want only offset 0 once", sortedKeys(got))
	}
}
