package kafka

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A member subscribed to 200 topics checks their partition counts with one
// Metadata request per interval, not one per topic (kafka-go's own watcher
// sent 100 a second here); a check that fails does not end the generation;
// and a partition added to one of the topics still ends it, so the group
// rebalances and the partition gets an owner.
func TestPartitionWatchAsksOnceForAllTopics(t *testing.T) {
	t.Parallel()
	var topics []string
	for i := range 200 {
		topics = append(topics, fmt.Sprintf("prod.w%03d", i))
	}
	c := newCluster(t, kfake.SeedTopics(1, topics...))
	s := newTestSource(t, c.ListenAddrs(), "g-watch")
	ctx := ctxT(t, 60*time.Second)
	cl, err := s.Claim(ctx, topics)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cl.Assigned()); got != len(topics) {
		t.Fatalf("assigned %d partitions, want %d", got, len(topics))
	}

	// Metadata requests that name topics: the watch's (kafka-go's routing
	// cache refreshes ask for every topic). While failing is set they
	// fail: the generation goes on.
	var named atomic.Int64
	var failing atomic.Bool
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.MetadataRequest).Topics == nil {
			return nil, nil, false
		}
		if failing.Load() {
			return nil, errors.New("injected: metadata unavailable"), true
		}
		named.Add(1)
		return nil, nil, false
	})
	failing.Store(true)
	select {
	case <-cl.Lost():
		t.Fatal("a failed partition watch ended the generation")
	case <-time.After(3 * partitionWatchInterval):
	}
	failing.Store(false)
	const window = 6 * time.Second
	time.Sleep(window)
	// Three watch intervals; with one request per topic it would be 600.
	if n := named.Load(); n < 2 || n > 5 {
		t.Errorf("%d Metadata requests naming topics in %s for %d topics, want one per %s", n, window, len(topics), partitionWatchInterval)
	}

	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topics[123], 2
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	res, err := req.RequestWith(ctx, newProducer(t, c.ListenAddrs()))
	if err != nil {
		t.Fatal(err)
	}
	if code := res.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create partitions: error %d", code)
	}
	t.Logf("generation ended %v after the partition was added", waitLost(t, cl, 10*time.Second))
}
