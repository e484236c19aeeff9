package kafka

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

// TestTimedOutCommitNeverOvertakes (issue 11, finding 2): a commit whose
// caller gave up (the broker is slow) must not be applied after a later,
// higher commit; and the later commit is not refused because of it.
func TestTimedOutCommitNeverOvertakes(t *testing.T) {
	c := newCluster(t)
	s := newTestSource(t, c.ListenAddrs(), "g-order")
	ctx := ctxT(t, 30*time.Second)
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Release(ctx) }()
	var n atomic.Int32
	c.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n.Add(1) == 1 {
			c.SleepControl(func() { time.Sleep(1500 * time.Millisecond) }) // the first commit is slow
		}
		return nil, nil, false
	})
	tp := mirror.TopicPartition{Topic: testTopics[0], Partition: 0}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = cl.Commit(short, map[mirror.TopicPartition]int64{tp: 10})
	cancel()
	if err == nil {
		t.Fatal("slow commit returned before the broker answered")
	}
	start := time.Now()
	if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{tp: 20}); err != nil {
		t.Fatalf("later commit: %v", err)
	}
	t.Logf("later commit took %v (waited for the earlier request)", time.Since(start))
	time.Sleep(2 * time.Second) // anything late has landed by now
	got, err := s.Committed(ctx, []mirror.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if got[tp] != 20 {
		t.Fatalf("committed %d after commits of 10 then 20: an older commit overtook a newer one", got[tp])
	}
}

// A commit the coordinator answers with a retriable error (REQUEST_TIMED_OUT
// after applying it, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)
// is sent again while its caller waits, and succeeds once the coordinator
// takes it; an error retrying cannot fix is returned at once.
func TestCommitRetriesRetriableAnswers(t *testing.T) {
	c := newCluster(t)
	s := newTestSource(t, c.ListenAddrs(), "g-retry")
	ctx := ctxT(t, 30*time.Second)
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Release(ctx) }()
	tp := mirror.TopicPartition{Topic: testTopics[0], Partition: 0}
	h := c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.RequestTimedOut, Count: 2},
		kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.CoordinatorLoadInProgress, Count: 1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.CoordinatorNotAvailable, Count: 1},
	)
	defer h.Remove()
	if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{tp: 10}); err != nil {
		t.Fatalf("commit after retriable answers: %v", err)
	}
	if hits := h.Hits(); hits != 4 {
		t.Fatalf("the faults answered %d commits, want 4 (each retried)", hits)
	}
	got, err := s.Committed(ctx, []mirror.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if got[tp] != 10 {
		t.Fatalf("committed %d, want 10", got[tp])
	}

	// An answer retrying cannot fix ends the commit at once.
	h2 := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.OffsetMetadataTooLarge, Count: -1})
	defer h2.Remove()
	start := time.Now()
	if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{tp: 20}); err == nil || !errors.Is(err, kafkago.OffsetMetadataTooLarge) {
		t.Fatalf("commit refused for good: %v, want OFFSET_METADATA_TOO_LARGE", err)
	}
	if hits := h2.Hits(); hits != 1 {
		t.Fatalf("a commit refused for good was sent %d times", hits)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a commit refused for good took %v", took)
	}

	// Retries end when the caller stops waiting.
	h2.Remove()
	h3 := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.CoordinatorLoadInProgress, Count: -1})
	defer h3.Remove()
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = cl.Commit(short, map[mirror.TopicPartition]int64{tp: 30})
	cancel()
	if err == nil {
		t.Fatal("a commit the coordinator never took succeeded")
	}
	time.Sleep(time.Second)
	hits := h3.Hits()
	time.Sleep(time.Second)
	if h3.Hits() != hits {
		t.Fatal("a commit was still retried after its caller stopped waiting")
	}
}
