package kafka

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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
