package randmsg_test

import (
	"context"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/scripts/produce/randmsg"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// TestCommitPartCommitsHalfOfEachPartition: a group gets committed offsets
// half-way through every partition, as Kafka's OffsetFetch reads them back
// (issue 47 item 5: a group to try the cut-over on).
func TestCommitPartCommitsHalfOfEachPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics := randmsg.TopicNames("c", 5)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cluster := kafkaconn.Config{Brokers: c.ListenAddrs()}
	if _, err := randmsg.Produce(ctx, cluster, randmsg.Options{TopicBase: "c", Count: 600, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	commits, err := randmsg.CommitPart(ctx, cluster, "orders-app", topics, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if len(commits) != 15 {
		t.Fatalf("%d partitions committed, want 15: %v", len(commits), commits)
	}
	client := &kafkago.Client{Addr: kafkago.TCP(c.ListenAddrs()...)}
	req := &kafkago.OffsetFetchRequest{GroupID: "orders-app", Topics: map[string][]int{}}
	for _, t := range topics {
		req.Topics[t] = []int{0, 1, 2}
	}
	got, err := client.OffsetFetch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, pc := range commits {
		if want := pc.Start + (pc.End-pc.Start)/2; pc.Offset != want || pc.End == 0 {
			t.Errorf("%+v: offset %d, want %d in a non-empty partition", pc, pc.Offset, want)
		}
		total += pc.End
		var committed int64 = -2
		for _, p := range got.Topics[pc.Topic] {
			if p.Partition == pc.Partition {
				committed = p.CommittedOffset
			}
		}
		if committed != pc.Offset {
			t.Errorf("%s/%d: Kafka has %d committed, want %d", pc.Topic, pc.Partition, committed, pc.Offset)
		}
	}
	if total != 600 {
		t.Errorf("the partitions hold %d records, want 600", total)
	}
	if _, err := randmsg.CommitPart(ctx, cluster, "g", topics, 1.5); err == nil {
		t.Error("a fraction above 1 was accepted")
	}
}
