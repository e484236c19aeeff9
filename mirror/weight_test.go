package mirror

import (
	"runtime"
	"testing"
	"time"
)

// retainedPerItem measures the heap that n items of 100 B keyed records
// hold beyond their key and value bytes: the records' keys and values sit in
// one slab per 1,000 records, as the Kafka adapter fetches them, and the
// items in a sender's queue, as handOver leaves them.
func retainedPerItem(n int) float64 {
	const size, keyLen, perSlab = 100, 16, 1000
	ps := &partitionState{tp: TopicPartition{Topic: "orders", Partition: 3}}
	recs := make([]Record, 0, n)
	for len(recs) < n {
		slab := make([]byte, perSlab*(size+keyLen))
		for range perSlab {
			key, val := slab[:keyLen:keyLen], slab[keyLen:keyLen+size:keyLen+size]
			slab = slab[keyLen+size:]
			recs = append(recs, Record{Topic: "orders", Partition: 3, Offset: int64(len(recs)) + 1e9, Key: key, Value: val, Time: time.UnixMilli(1.7e12)})
		}
	}
	q := make(chan *item, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range recs {
		r := &recs[i]
		q <- &item{ps: ps, weight: InFlightWeight(r), rec: *r}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(q)
	runtime.KeepAlive(recs)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestInFlightWeightCoversAnItem: the engine's share of a record's weight
// (itemMemory) covers what an item in a sender's queue holds on the heap,
// measured, and is not far above it (the bound would then hold less than
// it could). The slots of a batch's item list (one pointer, grown by
// doubling) are the rest of itemMemory.
func TestInFlightWeightCoversAnItem(t *testing.T) {
	const n = 50_000
	best := retainedPerItem(n)
	for range 2 { // the least of three: other goroutines only add
		best = min(best, retainedPerItem(n))
	}
	batchSlots := 16.0 // a pointer in a list grown by doubling
	t.Logf("an item in a queue holds %.0f B on the heap; itemMemory %d B", best, itemMemory)
	if best+batchSlots > itemMemory {
		t.Errorf("an item holds %.0f B (+%.0f B in a batch's list), more than itemMemory %d B", best, batchSlots, itemMemory)
	}
	if float64(itemMemory) > 1.25*(best+batchSlots) {
		t.Errorf("itemMemory %d B is more than 1.25 × the %.0f B an item holds", itemMemory, best+batchSlots)
	}
}

// TestInFlightWeight: key, value, item and batch shares, and headers.
func TestInFlightWeight(t *testing.T) {
	r := &Record{Key: make([]byte, 16), Value: make([]byte, 100)}
	if got, want := InFlightWeight(r), int64(116+itemMemory+BatchedEventMemory); got != want {
		t.Errorf("weight %d, want %d", got, want)
	}
	r.Headers = []Header{{Key: "trace", Value: make([]byte, 10)}}
	if got, want := InFlightWeight(r), int64(116+itemMemory+BatchedEventMemory+2*15+headerMemory); got != want {
		t.Errorf("weight with a header %d, want %d", got, want)
	}
}
