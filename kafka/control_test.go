package kafka

import (
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// TestControl: control records round-trip through the control group, are
// seen by another Source (another instance), and leave the main group's
// commits alone; group members are counted; offsets are found by time.
func TestControl(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	ctx := ctxT(t, 30*time.Second)
	a := newTestSource(t, addrs, "g-control")
	b := newTestSource(t, addrs, "g-control")

	if recs, err := a.ControlRecords(ctx, mirror.ControlSlotDecision, testTopics); err != nil || len(recs) != 0 {
		t.Fatalf("control records before any: %v %v", recs, err)
	}
	if err := a.WriteControlRecord(ctx, mirror.ControlSlotDecision, "prod.test1", `{"v":1,"paused":true}`); err != nil {
		t.Fatal(err)
	}
	recs, err := b.ControlRecords(ctx, mirror.ControlSlotDecision, testTopics)
	if err != nil || recs["prod.test1"] != `{"v":1,"paused":true}` || recs["prod.test2"] != "" {
		t.Fatalf("control records seen by another source: %v %v", recs, err)
	}
	tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 0}
	if got, err := b.Committed(ctx, []mirror.TopicPartition{tp}); err != nil || got[tp] != mirror.NoOffset {
		t.Fatalf("a control record touched the main group: %v %v", got, err)
	}

	if n, err := a.OtherMembers(ctx); err != nil || n != 0 {
		t.Fatalf("members of an unused group: %d %v", n, err)
	}
	if recs, err := b.ControlRecords(ctx, mirror.ControlSlotKept, testTopics); err != nil || len(recs) != 0 {
		t.Fatalf("a decision record showed in the kept slot: %v %v", recs, err)
	}
	cl, err := a.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.OtherMembers(ctx); err != nil || n != 1 {
		t.Errorf("members of other processes while a claim is held: %d %v", n, err)
	}
	if n, err := a.OtherMembers(ctx); err != nil || n != 0 {
		t.Errorf("the claiming process counted its own member: %d %v", n, err)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}

	p := newProducer(t, addrs)
	produceN(t, p, "prod.test1", 0, 5)
	time.Sleep(10 * time.Millisecond)
	mid := time.Now()
	time.Sleep(10 * time.Millisecond)
	produceN(t, p, "prod.test1", 0, 3)
	got, err := a.OffsetsForTime(ctx, []mirror.TopicPartition{tp, {Topic: "prod.test1", Partition: 1}}, mid)
	if err != nil || got[tp] != 5 || got[mirror.TopicPartition{Topic: "prod.test1", Partition: 1}] != 0 {
		t.Fatalf("offsets for time: %v %v (want 5 on partition 0, the end 0 on the empty partition 1)", got, err)
	}
	if got, err := a.OffsetsForTime(ctx, []mirror.TopicPartition{tp}, time.Now().Add(time.Minute)); err != nil || got[tp] != 8 {
		t.Fatalf("offsets after the last record: %v %v, want the end 8", got, err)
	}
}

// TestPartitionRecords: per-partition records (the live slot) are written
// in one request and read back by another Source, apart from the decision
// slot and from the main group's commits.
func TestPartitionRecords(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := ctxT(t, 30*time.Second)
	a := newTestSource(t, c.ListenAddrs(), "g-live")
	b := newTestSource(t, c.ListenAddrs(), "g-live")
	p0 := mirror.TopicPartition{Topic: "prod.test1", Partition: 0}
	p2 := mirror.TopicPartition{Topic: "prod.test1", Partition: 2}
	q1 := mirror.TopicPartition{Topic: "prod.test2", Partition: 1}
	all := []mirror.TopicPartition{p0, p2, q1}
	if err := a.WritePartitionRecords(ctx, mirror.ControlSlotLive, map[mirror.TopicPartition]string{p2: "two", q1: "one"}); err != nil {
		t.Fatal(err)
	}
	recs, err := b.PartitionRecords(ctx, mirror.ControlSlotLive, all)
	if err != nil || len(recs) != 2 || recs[p2] != "two" || recs[q1] != "one" {
		t.Fatalf("live records seen by another source: %v %v", recs, err)
	}
	if err := a.WritePartitionRecords(ctx, mirror.ControlSlotLive, map[mirror.TopicPartition]string{p2: ""}); err != nil {
		t.Fatal(err)
	}
	if recs, err := b.PartitionRecords(ctx, mirror.ControlSlotLive, all); err != nil || recs[p2] != "" || recs[q1] != "one" {
		t.Fatalf("after clearing one: %v %v", recs, err)
	}
	if recs, err := b.ControlRecords(ctx, mirror.ControlSlotDecision, testTopics); err != nil || len(recs) != 0 {
		t.Fatalf("a live record showed in the decision slot: %v %v", recs, err)
	}
	if got, err := b.Committed(ctx, all); err != nil || got[p2] != mirror.NoOffset {
		t.Fatalf("a live record touched the main group: %v %v", got, err)
	}
}
