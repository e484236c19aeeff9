package mirror_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestAcknowledgedRecordsAreNotSentAgainByTheSameProcess (issue 28): at the
// namespace's quota, with hash partitioning, a drain ends with a batch of
// one hub partition still refused while the other hub partitions stored
// records above it; the commit stays below the refused batch. The next
// drain of the same process does not publish again what Event Hubs already
// acknowledged: no duplicate, nothing lost.
func TestAcknowledgedRecordsAreNotSentAgainByTheSameProcess(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	atQuota(t, e, topic)
	var recs []*kgo.Record
	for i := range 3000 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%d", i%97), Value: fmt.Appendf(nil, "v%d", i)})
	}
	e.produce(recs...)
	m := e.newMirror(mirror.Options{})
	var resent int64
	for range 20 {
		rep := e.drain(m, mirror.Limits{MaxDuration: 2 * time.Second})
		resent += alreadyMirrored(rep)
		done := true
		for p := range int32(2) {
			done = done && e.committed(m, topic)[p] == 1500
		}
		if done {
			break
		}
	}
	counts := e.tally(topic, 4)
	lost, dups := 0, 0
	for p := range int32(2) {
		for off := range int64(1500) {
			switch n := counts[provenance{topic, p, off}]; {
			case n == 0:
				lost++
			case n > 1:
				dups += n - 1
			}
		}
	}
	t.Logf("%d records not sent again because this process had them acknowledged", resent)
	if lost > 0 || dups > 0 {
		t.Fatalf("%d lost, %d duplicates in 3000 records (committed %v)", lost, dups, e.committed(m, topic))
	}
}

// TestAcknowledgementsForgottenAfterAResetByAnotherProcess (issue 50,
// defect 1): process A ends a drain with records acknowledged above its
// commit and remembers them; process B mirrors the partition, then an
// operator resets it on B to exactly A's old commit (the dry run says those
// records are sent again). A's next drain starts at the same offset of the
// same topic, but the commit is B's now (another writer token): A must
// send every record again, as the reset said, not skip what it remembered
// (Event Hubs retention may have dropped them since).
func TestAcknowledgementsForgottenAfterAResetByAnotherProcess(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	atQuota(t, e, topic)
	var n int64 // records produced
	produce := func() {
		var recs []*kgo.Record
		for range 1500 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "k%d", n%97), Value: fmt.Appendf(nil, "v%d", n)})
			n++
		}
		e.produce(recs...)
	}
	a := e.newMirrorWith(mirror.Options{}, nil, withControl)
	// A drains at the quota until it ends with records acknowledged above
	// its commit (a drain that fits in the quota's window gets more).
	var from int64
	for try := 0; ; try++ {
		if from == n {
			produce()
		}
		e.drain(a, mirror.Limits{MaxDuration: time.Second})
		from = e.committed(a, topic)[0]
		counts := e.tally(topic, 4)
		above := 0
		for off := from; off < n; off++ {
			if counts[provenance{topic, 0, off}] > 0 {
				above++
			}
		}
		if from >= 0 && from < n && above > 0 {
			t.Logf("A committed %d of %d with %d records acknowledged above it", from, n, above)
			break
		}
		if try == 10 {
			t.Fatalf("A never ended with records acknowledged above its commit (committed %d of %d)", from, n)
		}
	}
	b := e.newMirrorWith(mirror.Options{}, nil, withControl)
	for range 30 {
		if e.committed(b, topic)[0] == n {
			break
		}
		e.drain(b, mirror.Limits{MaxDuration: 2 * time.Second})
	}
	if c := e.committed(b, topic)[0]; c != n {
		t.Fatalf("B committed %d of %d", c, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.ResetOffsets(ctx, mirror.ResetRequest{Topics: []string{topic}, Partitions: []int32{0}, To: mirror.ResetOffset, Offset: from, Apply: true, By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resent != n-from {
		t.Fatalf("the reset says it sends %d again, want %d: %+v", res.Resent, n-from, res.Partitions)
	}
	before := e.tally(topic, 4)
	for range 30 {
		if e.committed(a, topic)[0] == n {
			break
		}
		e.drain(a, mirror.Limits{MaxDuration: 2 * time.Second})
	}
	after := e.tally(topic, 4)
	notSent := 0
	for off := from; off < n; off++ {
		k := provenance{topic, 0, off}
		if after[k] <= before[k] {
			notSent++
		}
	}
	if notSent > 0 {
		t.Fatalf("after B's reset to %d, A did not send %d of the %d records again (it took them for acknowledged by its earlier drain)", from, notSent, n-from)
	}
}

// atQuota gives e an emulator whose namespace takes 400 events a second,
// with topic's hub of 4 partitions.
func atQuota(t *testing.T, e *env, topic string) {
	t.Helper()
	emu, err := emulator.Start(context.Background(), emulator.Config{Listen: "127.0.0.1:0",
		Hubs:  []emulator.HubConfig{{Name: topic, PartitionCount: 4}},
		Quota: emulator.Quota{ThroughputUnits: 1, IngressEventsPerUnit: 400, Period: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	e.emu = emu
}
