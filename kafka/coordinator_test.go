package kafka

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

// countFindCoordinator counts the FindCoordinator requests c receives for
// group.
func countFindCoordinator(c *kfake.Cluster, group string) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.FindCoordinatorRequest)
		if r.CoordinatorKey == group || (len(r.CoordinatorKeys) == 1 && r.CoordinatorKeys[0] == group) {
			n.Add(1)
		}
		return nil, nil, false
	})
	return &n
}

// Commits and reads of the committed offsets go straight to the group's
// coordinator, found once (beside the join), instead of asking for it before
// each request: one round trip each instead of two. Of three brokers, only
// the coordinator takes them (kfake answers NOT_COORDINATOR elsewhere).
func TestGroupRequestsGoStraightToTheCoordinator(t *testing.T) {
	const group = "g-straight"
	c := newCluster(t, kfake.NumBrokers(3))
	finds := countFindCoordinator(c, group)
	s := newTestSource(t, c.ListenAddrs(), group)
	ctx := ctxT(t, 30*time.Second)
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Release(ctx) }()
	before := finds.Load()
	tp := mirror.TopicPartition{Topic: testTopics[0], Partition: 0}
	for i := range int64(5) {
		if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{tp: 10 + i}); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		got, err := s.Committed(ctx, []mirror.TopicPartition{tp})
		if err != nil {
			t.Fatalf("committed offsets: %v", err)
		}
		if got[tp] != 10+i {
			t.Fatalf("committed %d, want %d", got[tp], 10+i)
		}
	}
	if n := finds.Load() - before; n != 0 {
		t.Errorf("5 commits and 5 reads of the committed offsets asked for the coordinator %d times, want 0 (found beside the join)", n)
	}
}

// A coordinator that moved answers NOT_COORDINATOR: the router forgets it,
// and the retry finds the new one.
func TestGroupRequestsFollowAMovedCoordinator(t *testing.T) {
	const group = "g-moved"
	c := newCluster(t, kfake.NumBrokers(3))
	finds := countFindCoordinator(c, group)
	s := newTestSource(t, c.ListenAddrs(), group)
	ctx := ctxT(t, 30*time.Second)
	tp := mirror.TopicPartition{Topic: testTopics[0], Partition: 0}
	if _, err := s.Committed(ctx, []mirror.TopicPartition{tp}); err != nil {
		t.Fatal(err)
	}
	if n := finds.Load(); n != 1 {
		t.Fatalf("the first read asked for the coordinator %d times, want 1", n)
	}
	old := c.CoordinatorFor(group)
	for c.CoordinatorFor(group) == old {
		c.RehashCoordinators()
	}
	got, err := s.Committed(ctx, []mirror.TopicPartition{tp})
	if err != nil {
		t.Fatalf("read after the coordinator moved from node %d to %d: %v", old, c.CoordinatorFor(group), err)
	}
	if got[tp] != mirror.NoOffset {
		t.Fatalf("committed %d, want none", got[tp])
	}
	if n := finds.Load(); n != 2 {
		t.Fatalf("asked for the coordinator %d times in all, want 2 (once more after it moved)", n)
	}
	if _, err := s.Committed(ctx, []mirror.TopicPartition{tp}); err != nil || finds.Load() != 2 {
		t.Fatalf("read at the new coordinator: %v, %d lookups in all (want 2)", err, finds.Load())
	}
}
