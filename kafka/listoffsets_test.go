package kafka

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

// Watermarks asks each partition leader once per offset (earliest, latest)
// for all the partitions it leads, not once per partition and offset as
// kafka-go's Client.ListOffsets does: 2 requests per broker, however many
// partitions, each answered by the right leader (kfake refuses a partition
// it does not lead). OffsetsForTime asks once per leader.
func TestWatermarksAskEachLeaderOnce(t *testing.T) {
	c := newCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(6, testTopics...))
	var requests atomic.Int64
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		requests.Add(1)
		return nil, nil, false
	})
	cl := newProducer(t, c.ListenAddrs())
	var tps []mirror.TopicPartition
	for _, topic := range testTopics {
		for p := range int32(6) {
			tps = append(tps, mirror.TopicPartition{Topic: topic, Partition: p})
			produceN(t, cl, topic, p, int(p)+1)
		}
	}
	s := newTestSource(t, c.ListenAddrs(), "g-watermarks")
	ctx := ctxT(t, 30*time.Second)
	if _, err := s.Topics(ctx); err != nil { // the Transport's metadata
		t.Fatal(err)
	}
	before := requests.Load()
	wms, err := s.Watermarks(ctx, tps)
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n > 6 {
		t.Errorf("watermarks of %d partitions on 3 brokers took %d ListOffsets requests, want at most 6", len(tps), n)
	}
	for _, tp := range tps {
		if want := (mirror.Watermarks{Start: 0, End: int64(tp.Partition) + 1}); wms[tp] != want {
			t.Errorf("%s: watermarks %+v, want %+v", tp, wms[tp], want)
		}
	}

	before = requests.Load()
	offs, err := s.OffsetsForTime(ctx, tps, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n > 3 {
		t.Errorf("offsets for a time of %d partitions on 3 brokers took %d ListOffsets requests, want at most 3", len(tps), n)
	}
	for _, tp := range tps {
		if offs[tp] != 0 {
			t.Errorf("%s: offset an hour ago %d, want 0", tp, offs[tp])
		}
	}
}
