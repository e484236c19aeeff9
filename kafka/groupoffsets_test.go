package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// TestApplicationGroup reads another consumer group than the mirror's: its
// members while a kgo consumer runs, and its committed offsets after.
func TestApplicationGroup(t *testing.T) {
	c := newCluster(t)
	addrs := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := newProducer(t, addrs)
	produceN(t, prod, "prod.test1", 0, 5)
	produceN(t, prod, "prod.test1", 2, 3)
	src := newTestSource(t, addrs, "mirror")

	tps := []mirror.TopicPartition{{Topic: "prod.test1", Partition: 0}, {Topic: "prod.test1", Partition: 1}, {Topic: "prod.test1", Partition: 2}}
	n, err := src.MembersOf(ctx, "app")
	if err != nil || n != 0 {
		t.Fatalf("MembersOf an unknown group = %d, %v; want 0", n, err)
	}
	got, err := src.CommittedOf(ctx, "app", tps)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range tps {
		if got[tp] != mirror.NoOffset {
			t.Fatalf("CommittedOf an unknown group: %s at %d", tp, got[tp])
		}
	}

	app, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup("app"), kgo.ConsumeTopics("prod.test1"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	var read int
	for read < 8 {
		fs := app.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		read += fs.NumRecords()
	}
	app.SetOffsets(map[string]map[int32]kgo.EpochOffset{"prod.test1": {0: {Epoch: -1, Offset: 4}, 2: {Epoch: -1, Offset: 3}}})
	if err := app.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n, err := src.MembersOf(ctx, "app"); err != nil || n != 1 {
		t.Fatalf("MembersOf while the consumer runs = %d, %v; want 1", n, err)
	}
	got, err = src.CommittedOf(ctx, "app", tps)
	if err != nil {
		t.Fatal(err)
	}
	want := map[mirror.TopicPartition]int64{tps[0]: 4, tps[1]: mirror.NoOffset, tps[2]: 3}
	for tp, o := range want {
		if got[tp] != o {
			t.Errorf("CommittedOf %s = %d, want %d", tp, got[tp], o)
		}
	}
	if mine, err := src.Committed(ctx, tps); err != nil || mine[tps[0]] != mirror.NoOffset {
		t.Errorf("the mirror's own group sees %v, %v; want nothing committed", mine, err)
	}
	app.LeaveGroup()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := src.MembersOf(ctx, "app")
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MembersOf after the consumer left = %d, %v; want 0", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
