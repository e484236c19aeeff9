package mirror

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// queued returns n items whose records carry offsets from, from+1, ….
func queued(from, n int) []item {
	out := make([]item, n)
	for i := range out {
		out[i] = item{weight: 1, rec: &Record{Offset: int64(from + i)}}
	}
	return out
}

// TestItemQueueKeepsOrderAcrossWraps: items come out in the order they went
// in, whatever the runs' sizes and however often the ring wraps, and the
// queue keeps no record alive once taken.
func TestItemQueueKeepsOrderAcrossWraps(t *testing.T) {
	q := newItemQueue(7)
	ctx := context.Background()
	dst := make([]item, 0, 3)
	next, want := 0, 0
	for round := range 40 {
		n := 1 + round%5
		if got := q.put(ctx, queued(next, n)); got != n {
			t.Fatalf("round %d: put %d of %d into a queue with room", round, got, n)
		}
		next += n
		for {
			var closed bool
			dst, closed = q.take(dst[:0])
			if closed {
				t.Fatal("an open queue said closed")
			}
			if len(dst) == 0 {
				break
			}
			for _, it := range dst {
				if it.rec.Offset != int64(want) {
					t.Fatalf("took offset %d, want %d", it.rec.Offset, want)
				}
				want++
			}
		}
	}
	if want != next {
		t.Fatalf("took %d items of %d", want, next)
	}
	for i, it := range q.ring {
		if it.rec != nil {
			t.Fatalf("slot %d still points at a taken record", i)
		}
	}
}

// TestItemQueueGrowsUpToItsCapacity: a queue's ring starts small and
// doubles as items wait in it, keeping their order when it grows while the
// oldest items sit past the ring's wrap, and never beyond the queue's
// capacity: a put into a full queue still waits.
func TestItemQueueGrowsUpToItsCapacity(t *testing.T) {
	q := newItemQueue(300)
	if len(q.ring) != itemQueueStart {
		t.Fatalf("an empty queue's ring holds %d slots, want %d", len(q.ring), itemQueueStart)
	}
	ctx := context.Background()
	dst := make([]item, 0, 400)
	next, want := 0, 0
	takeAll := func() {
		t.Helper()
		dst, _ = q.take(dst[:0])
		for _, it := range dst {
			if it.rec.Offset != int64(want) {
				t.Fatalf("took offset %d, want %d", it.rec.Offset, want)
			}
			want++
		}
	}
	put := func(n int) {
		t.Helper()
		if got := q.put(ctx, queued(next, n)); got != n {
			t.Fatalf("put %d of %d into a queue with room", got, n)
		}
		next += n
	}
	// The oldest items past the wrap when the ring grows.
	put(60)
	if first, _ := q.take(make([]item, 0, 50)); len(first) != 50 {
		t.Fatalf("took %d of 60 items into room for 50", len(first))
	}
	want = 50
	put(60) // 10 queued from slot 50: the ring is full, wrapped, at the 54th
	if len(q.ring) != 128 {
		t.Fatalf("the ring holds %d slots after 70 items waited in 64, want 128", len(q.ring))
	}
	takeAll()
	if want != next {
		t.Fatalf("took up to offset %d, want %d", want, next)
	}
	// Filled to its capacity, and no further.
	put(300)
	if len(q.ring) != 300 {
		t.Fatalf("a full queue's ring holds %d slots, want its capacity 300", len(q.ring))
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if got := q.put(canceled, queued(next, 1)); got != 0 {
		t.Fatalf("a full queue took %d more items", got)
	}
	takeAll()
	if want != next {
		t.Fatalf("took up to offset %d, want %d", want, next)
	}
}

// TestItemQueuePutWaitsForRoom: a put into a full queue waits until the
// sender takes, then adds the rest in order; a put whose context ends while
// it waits returns how many it added, and the rest are not queued.
func TestItemQueuePutWaitsForRoom(t *testing.T) {
	q := newItemQueue(4)
	ctx := context.Background()
	done := make(chan int)
	go func() { done <- q.put(ctx, queued(0, 10)) }()
	var got []int64
	dst := make([]item, 0, 3)
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 10 && time.Now().Before(deadline) {
		dst, _ = q.take(dst[:0])
		for _, it := range dst {
			got = append(got, it.rec.Offset)
		}
		if len(dst) == 0 {
			q.wait(time.Now().Add(10 * time.Millisecond))
		}
	}
	if n := <-done; n != 10 {
		t.Fatalf("put added %d of 10", n)
	}
	for i, o := range got {
		if o != int64(i) {
			t.Fatalf("took %v, want 0…9 in order", got)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- q.put(cctx, queued(0, 6)) }()
	time.Sleep(20 * time.Millisecond) // the put fills the queue and waits
	cancel()
	if n := <-done; n != 4 {
		t.Fatalf("a put canceled while the queue was full added %d, want 4", n)
	}
	if dst, _ = q.take(make([]item, 0, 10)); len(dst) != 4 {
		t.Fatalf("the queue holds %d items, want the 4 added", len(dst))
	}
}

// TestItemQueueWakesItsSender: a sender waiting on an empty queue wakes
// when items are added, and when the queue is closed it takes what is left
// and then finds it closed; a wait with a deadline and nothing added ends at
// the deadline.
func TestItemQueueWakesItsSender(t *testing.T) {
	q := newItemQueue(16)
	if q.wait(time.Now().Add(20 * time.Millisecond)) {
		t.Fatal("a wait on an empty queue woke before its deadline")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var took []int64
	go func() {
		defer wg.Done()
		dst := make([]item, 0, 4)
		for {
			var closed bool
			dst, closed = q.take(dst[:0])
			for _, it := range dst {
				took = append(took, it.rec.Offset)
			}
			if closed {
				return
			}
			if len(dst) == 0 {
				q.wait(time.Time{})
			}
		}
	}()
	for i := range 5 {
		q.put(context.Background(), queued(3*i, 3))
		time.Sleep(time.Millisecond)
	}
	q.close()
	wg.Wait()
	if len(took) != 15 {
		t.Fatalf("the sender took %d items, want 15", len(took))
	}
	for i, o := range took {
		if o != int64(i) {
			t.Fatalf("took %v, want 0…14 in order", took)
		}
	}
}

// handOverDrain is a drain with one hub of n partitions, hashing keys, and
// a queue of capacity items per sender: enough to hand records over without
// Kafka or Event Hubs.
func handOverDrain(n, capacity int, bound int64) (*drain, *partitionState) {
	const hub = "orders"
	d := &drain{
		m:        &Mirror{opts: Options{InFlightBytes: bound, Partitioning: PartitionByHash}},
		inflight: semaphore.NewWeighted(bound),
		clock:    &readClock{},
		senders:  map[string][]*sender{},
		parts:    map[string]*partitioner{hub: {strategy: PartitionByHash, n: n}},
		fits:     map[string]*atomic.Int64{hub: new(atomic.Int64)},
	}
	d.fits[hub].Store(1 << 20) // every record fits: no batch is tried
	for i := range n {
		d.senders[hub] = append(d.senders[hub], &sender{d: d, hub: hub, partitionID: strconv.Itoa(i), in: newItemQueue(capacity)})
	}
	ps := newPartitionState(TopicPartition{Topic: hub, Partition: 0}, hub, NoOffset)
	ps.begin(100, 100+5000)
	return d, ps
}

// keyedRecords returns n records of ps's partition from offset from on, each
// with its own key.
func keyedRecords(from, n int) []Record {
	out := make([]Record, n)
	for i := range out {
		o := int64(from + i)
		out[i] = Record{Topic: "orders", Offset: o, Key: []byte("key-" + strconv.FormatInt(o, 10)), Value: make([]byte, 100)}
	}
	return out
}

// TestHandOverQueuesRunsInOrder: a fetch handed over in runs reaches each
// sender in offset order (its records keep their Kafka order in their hub
// partition), every record is pending in offset order, and the in-flight
// bound is charged exactly the records' weights.
func TestHandOverQueuesRunsInOrder(t *testing.T) {
	const n, records = 4, 1000 // several runs of maxHandOverRun
	d, ps := handOverDrain(n, records, 64<<20)
	recs := keyedRecords(100, records)
	var weight int64
	for i := range recs {
		weight += InFlightWeight(&recs[i])
	}
	if !d.handOver(context.Background(), ps, d.newHandOverRun("orders"), recs) {
		t.Fatal("handOver stopped reading with room everywhere")
	}
	seen := 0
	for i, s := range d.senders["orders"] {
		got, _ := s.in.take(make([]item, 0, records))
		for j, it := range got {
			if j > 0 && it.rec.Offset <= got[j-1].rec.Offset {
				t.Fatalf("sender %d: offset %d queued after %d", i, it.rec.Offset, got[j-1].rec.Offset)
			}
			if want := d.parts["orders"].index(it.rec); want != i {
				t.Fatalf("offset %d queued for sender %d, its key hashes to %d", it.rec.Offset, i, want)
			}
		}
		seen += len(got)
	}
	if seen != records {
		t.Fatalf("%d records queued, want %d", seen, records)
	}
	if len(ps.pending) != records {
		t.Fatalf("%d records pending, want %d", len(ps.pending), records)
	}
	for i, p := range ps.pending {
		if p.offset() != int64(100+i) || p.done() {
			t.Fatalf("pending[%d] = offset %d (done %v), want offset %d not done", i, p.offset(), p.done(), 100+i)
		}
	}
	if got := ps.readMark(); got != 100+records {
		t.Fatalf("read mark %d, want %d", got, 100+records)
	}
	if !d.inflight.TryAcquire(64<<20 - weight) {
		t.Fatal("the in-flight bound was charged more than the records' weights")
	}
	if d.inflight.TryAcquire(1) {
		t.Fatal("the in-flight bound was charged less than the records' weights")
	}
}

// TestHandOverCanceledAtAFullQueue: a reader canceled while a sender's queue
// is full stops; the records that were not queued give back their share of
// the in-flight bound and stay pending, so the commit point never passes
// them, even once every queued record is acknowledged.
func TestHandOverCanceledAtAFullQueue(t *testing.T) {
	const capacity = 10
	d, ps := handOverDrain(1, capacity, 64<<20)
	recs := keyedRecords(100, 30) // one run, one sender
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if d.handOver(ctx, ps, d.newHandOverRun("orders"), recs) {
		t.Fatal("handOver went on although its context ended at a full queue")
	}
	queued, _ := d.senders["orders"][0].in.take(make([]item, 0, 30))
	if len(queued) != capacity {
		t.Fatalf("%d records queued, want %d", len(queued), capacity)
	}
	var kept int64
	for i := range queued {
		kept += queued[i].weight
	}
	if !d.inflight.TryAcquire(64<<20 - kept) {
		t.Fatal("the records not queued did not give back their share of the in-flight bound")
	}
	evs := make([]batched, len(queued))
	for i := range queued {
		evs[i] = queued[i].batched()
	}
	ps.ack(evs, time.Now())
	ps.confirm(1 << 40) // the topic's identity is not in question here
	if got := ps.commitPoint(); got != 100+capacity {
		t.Fatalf("commit point %d with offsets 100…%d acknowledged, want %d (the first record not queued)", got, 100+capacity-1, 100+capacity)
	}
}
