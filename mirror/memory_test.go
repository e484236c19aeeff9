package mirror_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// The live heap a drain of backlogged partitions adds is bounded by its
// settings, not by the number of partitions (issue 48): at most
// heapPerBound × MIRROR_INFLIGHT_BYTES plus heapFixed, for 20 partitions and
// for 500. The drain's charges hold up to 1.5 × the bound (its events and
// its fetch budget, fetchbudget.go); the rest of the multiple is what a
// fetch holds twice while it is decoded (kafka-go's response and the
// records copied out of it) and what the broker, kfake in this process,
// holds of the responses it is sending. The fixed part is the batches on
// their way to the hub's partitions, which the bound does not charge (one
// of up to 1 MiB per hub partition in the SDK, and one being received in the
// emulator, also in this process), plus 8 MiB.
const (
	heapPerBound  = 3
	hubPartitions = 8
	heapFixed     = 2*hubPartitions<<20 + 8<<20
)

func TestHeapBoundedBySettingsNotPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("produces 20–50 MB into kfake")
	}
	for _, c := range []struct{ partitions, perPartition int }{
		{20, 1000}, // 1 MiB backlogged per partition: a FetchBytes each
		{500, 100},
	} {
		t.Run(fmt.Sprintf("%d partitions", c.partitions), func(t *testing.T) {
			heapOfBacklogDrain(t, c.partitions, c.perPartition)
		})
	}
}

// heapOfBacklogDrain drains a backlog of perPartition records of 1 KiB in
// each of partitions partitions of one topic into a hub that keeps little of
// what it receives, with a bound of 4 MiB, and checks that the heap's growth
// over the drain, as each GC found it, stays within heapPerBound × the
// bound + heapFixed.
func heapOfBacklogDrain(t *testing.T, partitions, perPartition int) {
	const topic, bound = "wide", 4 << 20
	// The hub keeps 64 KiB per partition: what it received would
	// otherwise be counted in this process's heap. The producer's batches
	// are of at most 16 KiB, the Java producer's default batch.size, not
	// compressed: a compressed batch brings more than a fetch asks for
	// (see fetchbudget.go).
	e := newBareEnv(t, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topic)},
		[]emulator.HubConfig{{Name: topic, PartitionCount: hubPartitions, MaxPartitionBytes: 64 << 10}},
		kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	recs := make([]*kgo.Record, 0, partitions*perPartition)
	for i := range perPartition {
		for p := range partitions {
			v := make([]byte, 1<<10)
			copy(v, fmt.Sprintf("p%d-o%d-", p, i))
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: fmt.Appendf(nil, "k%d", i), Value: v})
		}
	}
	e.produce(recs...)
	recs = nil
	m := e.newMirror(mirror.Options{InFlightBytes: bound})

	// A low GC target samples the live heap often.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	base := heapObjects()
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				h := heapObjects()
				peak = max(peak, h)
			}
		}
	}()
	rep := e.drain(m, mirror.Limits{MaxDuration: 2 * time.Minute})
	close(stop)
	wg.Wait()

	grew := int64(peak) - int64(base)
	limit := int64(heapPerBound*bound + heapFixed)
	t.Logf("%d partitions: the heap grew by %.1f MiB at most over the drain (limit %d × %d MiB + %d MiB = %.0f MiB); %s",
		partitions, float64(grew)/(1<<20), heapPerBound, bound>>20, heapFixed>>20, float64(limit)/(1<<20), rep.Summary())
	if grew > limit {
		t.Errorf("%d partitions: the heap grew by %.1f MiB over the drain, more than %d × MIRROR_INFLIGHT_BYTES (%d MiB) + %d MiB",
			partitions, float64(grew)/(1<<20), heapPerBound, bound>>20, heapFixed>>20)
	}
	want := partitions * perPartition
	if rep.Failed() || rep.Records != int64(want) || !rep.CaughtUp() || rep.LagAfter != 0 {
		t.Fatalf("drain mirrored %d records of %d: %s", rep.Records, want, rep.Summary())
	}
}

// heapObjects is the bytes of the heap's objects that the last GC found
// live.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
