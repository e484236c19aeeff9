package mirror_test

import (
	"fmt"
	"runtime"
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
// heapPerBound × MIRROR_INFLIGHT_BYTES plus heapFixed, plus the few KiB of
// bookkeeping each partition has (heapPerPartition: its state, its
// hand-over run, its reader), for 20 partitions and for 500. The drain's
// charges hold up to 1.5 × the bound (its events and its fetch budget,
// fetchbudget.go); the rest of the multiple is what a fetch holds twice
// while it is decoded (kafka-go's response and the records copied out of
// it) and what the broker, kfake in this process, holds of the responses it
// is sending. The fixed part is the batches on their way to the hub's
// partitions, which the bound does not charge: per hub partition, batches
// of up to 1 MiB, one filling and one being sent in the SDK with their
// encodings, and the emulator (also in this process) receiving them (2–4 MiB
// per hub partition in heap profiles at the peak; 8 MiB allowed); plus
// 8 MiB. Before the fetch budget, each partition's
// fetches were not charged, and the heap grew by 72 MiB for 20 partitions
// and 133–141 MiB for 500.
const (
	heapPerBound     = 3
	hubPartitions    = 4
	heapFixed        = 8*hubPartitions<<20 + 8<<20
	heapPerPartition = 16 << 10
)

func TestHeapBoundedBySettingsNotPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("produces 40–50 MB into kfake")
	}
	for _, c := range []struct{ partitions, perPartition int }{
		{20, 2000}, // 2 MiB backlogged per partition: two FetchBytes each
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
	e.client.Close() // its buffers are not the drain's
	m := e.newMirror(mirror.Options{InFlightBytes: bound})

	runtime.GC()
	base := liveHeap()
	var peak, samples uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A collection every 10 ms finds what is live: the drain holds
		// its bound full from its first fetches to its last.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.GC()
				peak = max(peak, liveHeap())
				samples++
			}
		}
	}()
	rep := e.drain(m, mirror.Limits{MaxDuration: 2 * time.Minute})
	close(stop)
	wg.Wait()

	if samples < 5 {
		t.Fatalf("%d samples of the heap over a drain of %s, want at least 5", samples, rep.Duration)
	}
	grew := int64(peak) - int64(base)
	limit := int64(heapPerBound*bound + heapFixed + partitions*heapPerPartition)
	t.Logf("%d partitions: the heap grew by %.1f MiB at most over the drain (limit %d × %d MiB + %d MiB + %d × %d KiB = %.1f MiB); %s",
		partitions, float64(grew)/(1<<20), heapPerBound, bound>>20, heapFixed>>20, partitions, heapPerPartition>>10, float64(limit)/(1<<20), rep.Summary())
	if grew > limit {
		t.Errorf("%d partitions: the heap grew by %.1f MiB over the drain, more than %d × MIRROR_INFLIGHT_BYTES (%d MiB) + %d MiB + %d KiB per partition",
			partitions, float64(grew)/(1<<20), heapPerBound, bound>>20, heapFixed>>20, heapPerPartition>>10)
	}
	want := partitions * perPartition
	if rep.Failed() || rep.Records != int64(want) || !rep.CaughtUp() || rep.LagAfter != 0 {
		t.Fatalf("drain mirrored %d records of %d: %s", rep.Records, want, rep.Summary())
	}
}

// liveHeap is the bytes of the heap's objects that the last GC found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
