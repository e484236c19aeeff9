package mirror

import (
	"context"
	"runtime"
	"testing"
)

// retainedPerItem measures the heap that n items of 100 B keyed records
// hold beyond their key and value bytes, laid out as the reader leaves them:
// per fetch of 1,000 records, one slab of keys and values and one slice of
// records (as the Kafka adapter decodes them), and an item pointing at
// each, queued by value in a sender's queue (whose slots are the queue's
// fixed memory, so allocated in full before the measurement and not
// counted).
func retainedPerItem(n int) float64 {
	const size, keyLen, perFetch = 100, 16, 1000
	ps := &partitionState{tp: TopicPartition{Topic: "orders", Partition: 3}}
	q := newItemQueue(n)
	q.ring = make([]item, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	slabs := 0
	for queued := 0; queued < n; queued += perFetch {
		slab := make([]byte, perFetch*(size+keyLen))
		slabs += len(slab)
		recs := make([]Record, perFetch)
		for i := range recs {
			key, val := slab[:keyLen:keyLen], slab[keyLen:keyLen+size:keyLen+size]
			slab = slab[keyLen+size:]
			recs[i] = Record{Topic: "orders", Partition: 3, Offset: int64(queued+i) + 1e9, Key: key, Value: val, Timestamp: 1.7e12}
			q.put(context.Background(), []item{{ps: ps, weight: InFlightWeight(&recs[i]), rec: &recs[i]}})
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(q)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)-int64(slabs)) / float64(n)
}

// TestInFlightWeightCoversAnItem: the engine's share of a record's weight
// (itemMemory) covers what an item in a sender's queue holds on the heap,
// measured, and is not far above it (the bound would then hold less than
// it could).
func TestInFlightWeightCoversAnItem(t *testing.T) {
	const n = 50_000
	best := retainedPerItem(n)
	for range 2 { // the least of three: other goroutines only add
		best = min(best, retainedPerItem(n))
	}
	t.Logf("an item in a queue holds %.0f B on the heap; itemMemory %d B", best, itemMemory)
	if best > itemMemory {
		t.Errorf("an item holds %.0f B, more than itemMemory %d B", best, itemMemory)
	}
	if float64(itemMemory) > 1.25*best {
		t.Errorf("itemMemory %d B is more than 1.25 × the %.0f B an item holds", itemMemory, best)
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
