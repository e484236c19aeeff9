package mirror

import (
	"context"
	"sync"
	"time"
)

// itemQueue is a sender's queue: a bounded first-in first-out list of items
// that readers add to in runs and its sender takes from in runs, one lock
// each. A channel of items took two channel operations per record, and the
// readers' and senders' goroutines woke each other per record: in a profile
// of a 100 B keyed drain, 0.6 s of channel operations and about 0.3 s of the
// readers' per-record locks, of 25.8 s (docs/performance.md, "The evening
// engine"). Any number of readers may add; one sender takes.
//
// The ring starts small and doubles as items wait in it, up to the queue's
// capacity: a drain has a sender per hub partition, and one whose partition
// gets few records would otherwise hold its full ring (48 KiB at the
// default capacity), outside the in-flight bound, for the drain's life.
type itemQueue struct {
	mu       sync.Mutex
	ring     []item // grows up to capacity
	capacity int    // the most items the queue holds
	head     int    // ring[head] is the oldest item
	n        int    // items queued
	closed   bool
	// ready holds a token once items were added to an empty queue, or the
	// queue was closed: the sender waits on it when it found none.
	ready chan struct{}
	// room is closed, and set to nil, when the sender takes items while
	// readers wait for room; nil when none waits.
	room chan struct{}
}

// itemQueueStart is the size of a queue's ring before it first grows.
const itemQueueStart = 64

// newItemQueue returns an empty queue of capacity items.
func newItemQueue(capacity int) *itemQueue {
	return &itemQueue{ring: make([]item, min(capacity, itemQueueStart)), capacity: capacity, ready: make(chan struct{}, 1)}
}

// grow doubles the ring, up to the queue's capacity, keeping the queued
// items in order from its start. q.mu is held.
func (q *itemQueue) grow() {
	ring := make([]item, min(2*len(q.ring), q.capacity))
	k := copy(ring, q.ring[q.head:min(q.head+q.n, len(q.ring))])
	copy(ring[k:], q.ring[:q.n-k])
	q.ring, q.head = ring, 0
}

// put adds items, in order, waiting for room while the queue is full. It
// returns how many it added: fewer than len(items) only when ctx ended
// first, and then the rest were not queued.
func (q *itemQueue) put(ctx context.Context, items []item) int {
	added := 0
	for {
		q.mu.Lock()
		if q.n == 0 && len(items) > added {
			select {
			case q.ready <- struct{}{}:
			default:
			}
		}
		for added < len(items) && q.n < q.capacity {
			if q.n == len(q.ring) {
				q.grow()
			}
			q.ring[(q.head+q.n)%len(q.ring)] = items[added]
			q.n++
			added++
		}
		if added == len(items) {
			q.mu.Unlock()
			return added
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return added
		}
	}
}

// take moves up to cap(dst) queued items into dst[:0], oldest first, without
// waiting. closed is true when the queue is empty and closed: no item will
// come.
func (q *itemQueue) take(dst []item) (items []item, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(q.n, cap(dst))
	dst = dst[:k]
	for i := range dst {
		j := (q.head + i) % len(q.ring)
		dst[i] = q.ring[j]
		q.ring[j] = item{} // the queue keeps no record alive
	}
	q.head = (q.head + k) % len(q.ring)
	q.n -= k
	if k > 0 && q.room != nil {
		close(q.room)
		q.room = nil
	}
	return dst, k == 0 && q.closed
}

// wait waits until items may have been added or the queue closed since take
// found none, or until deadline (the zero time: no deadline). It reports
// whether it was woken before the deadline.
func (q *itemQueue) wait(deadline time.Time) bool {
	if deadline.IsZero() {
		<-q.ready
		return true
	}
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-q.ready:
		return true
	case <-t.C:
		return false
	}
}

// close ends the queue: the sender takes what is queued, then finds it
// closed. No item may be added after it.
func (q *itemQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// first returns the next queued item, waiting for one as long as it takes.
// ok is false when the queue is closed.
func (s *sender) first() (it item, ok bool) { return s.receive(time.Time{}, true) }

// next returns the next queued item. When none is queued it waits until
// deadline (not at all for a zero deadline). ok is false when the wait
// ended or the queue is closed.
func (s *sender) next(deadline time.Time) (it item, ok bool) { return s.receive(deadline, false) }

// receive returns the next item of the run last taken from the queue,
// taking the next run when none is left; when none is queued it waits until
// deadline, or for ever.
func (s *sender) receive(deadline time.Time, forever bool) (it item, ok bool) {
	if s.taken == nil {
		s.taken = make([]item, 0, senderTake)
	}
	for s.nextTaken == len(s.taken) {
		clear(s.taken[:cap(s.taken)]) // the sender keeps no record alive
		var closed bool
		s.taken, closed = s.in.take(s.taken[:0])
		s.nextTaken = 0
		switch {
		case len(s.taken) > 0:
			s.warm(s.taken)
		case closed, !forever && deadline.IsZero():
			return item{}, false
		case !s.in.wait(deadline):
			return item{}, false
		}
	}
	it = s.taken[s.nextTaken]
	s.nextTaken++
	return it, true
}

// warm loads the words of the records of items that building their events
// reads first, and their values' first bytes, before the first of them is
// built. The records were fetched long before (a sender's queue holds
// thousands of records), so they are not in the CPU's caches, and the event
// builder stalled on its first look at each record (0.6 s of 25.8 s in a
// profile of a 100 B keyed drain, docs/performance.md, "The evening
// engine"); loaded together, the records' memory latencies overlap one
// another.
func (s *sender) warm(items []item) {
	var w uintptr
	for i := range items {
		r := items[i].rec
		w += uintptr(len(r.Topic)) + uintptr(len(r.Value)) + uintptr(r.Timestamp)
		if len(r.Value) > 0 {
			w += uintptr(r.Value[0])
		}
	}
	s.warmed += w
}

// handOverRun is a run of records a reader hands over at once: up to
// maxHandOverRun records, charged to the in-flight bound, added to their
// partition's pending records and queued per sender together.
type handOverRun struct {
	senders  []*sender // the hub's
	bySender [][]item  // the run's items, per sender index
	used     []int     // the sender indexes with items, in first use
	offsets  []int64   // the run's offsets, in order
	weight   int64
	// fetchCharge is what the fetch being handed over still holds of the
	// fetch budget, and fetched what the run's records hold of it: flush
	// gives that back before it charges their events.
	fetchCharge, fetched int64
}

// maxHandOverRun bounds a run of records handed over at once.
const maxHandOverRun = 256

// newHandOverRun returns an empty run for the senders of event hub hub.
func (d *drain) newHandOverRun(hub string) *handOverRun {
	ss := d.senders[hub]
	return &handOverRun{senders: ss, bySender: make([][]item, len(ss)), offsets: make([]int64, 0, maxHandOverRun)}
}

// add adds it, bound for the sender at index, to the run.
func (h *handOverRun) add(index int, it item) {
	if len(h.bySender[index]) == 0 {
		h.used = append(h.used, index)
	}
	h.bySender[index] = append(h.bySender[index], it)
	h.offsets = append(h.offsets, it.rec.Offset)
	h.weight += it.weight
	h.fetched += recordFetchedWeight(it.rec)
}

// reset empties the run.
func (h *handOverRun) reset() {
	for _, i := range h.used {
		clear(h.bySender[i]) // the run keeps no record alive
		h.bySender[i] = h.bySender[i][:0]
	}
	h.used, h.offsets, h.weight, h.fetched = h.used[:0], h.offsets[:0], 0, 0
}

// handOver hands recs, a fetch's records of ps in offset order, to the
// senders of their hub partitions, in runs (see flush). It returns false
// when the partition must stop reading.
func (d *drain) handOver(ctx context.Context, ps *partitionState, run *handOverRun, recs []Record) bool {
	if ps.halted() {
		return false
	}
	maxWeight := max(d.m.opts.InFlightBytes/8, 1)
	for i := range recs {
		r := &recs[i]
		if d.isStopped() {
			run.reset() // not handed over: nothing past them commits
			return false
		}
		if len(ps.carried) > 0 {
			// Rare: an earlier drain left records acknowledged above
			// the commit. carriedDone adds to the pending records.
			if !d.flush(ctx, ps, run) {
				return false
			}
			if ps.carriedDone(r) {
				continue
			}
		}
		if d.dd != nil && d.dd.already(ps, r) {
			if !d.flush(ctx, ps, run) {
				return false
			}
			ps.addDone(r)
			continue
		}
		size := int64(len(r.Value))
		if d.lim.MaxRecords > 0 && d.records.Add(1) > d.lim.MaxRecords {
			d.flush(ctx, ps, run)
			d.stop(StopMaxRecords)
			return false
		}
		if d.lim.MaxBytes > 0 && d.bytes.Add(size) > d.lim.MaxBytes {
			d.flush(ctx, ps, run)
			d.stop(StopMaxBytes)
			return false
		}
		index := d.parts[ps.hub].index(r)
		if !d.fitsHub(ctx, run.senders[index], r) {
			// Decided here, before any later record of the partition is
			// handed over.
			if !d.flush(ctx, ps, run) {
				return false
			}
			ps.add(r)
			if err := d.oversized(ps, r.Offset, int(size), ps.hub, ErrEventTooLarge); err != nil {
				// Stop reading; the records queued before it are still sent.
				ps.hold(err)
				return false
			}
			continue
		}
		weight := min(InFlightWeight(r), d.m.opts.InFlightBytes)
		if len(run.offsets) > 0 && (len(run.offsets) == maxHandOverRun || run.weight+weight > maxWeight) {
			if !d.flush(ctx, ps, run) {
				return false
			}
		}
		run.add(index, item{ps: ps, weight: weight, rec: r})
	}
	return d.flush(ctx, ps, run)
}

// flush hands the run over: it charges the in-flight bound for it, waiting
// for room, adds its records to ps's pending records and queues their items
// with their senders, waiting for room in each queue. It returns false when
// the partition must stop reading; a record not queued then stays pending
// (if it was added), so nothing past it commits.
func (d *drain) flush(ctx context.Context, ps *partitionState, run *handOverRun) bool {
	if len(run.offsets) == 0 {
		return true
	}
	defer run.reset()
	if ctx.Err() != nil {
		return false // as Acquire would: a canceled reader hands nothing over
	}
	// The run's records leave the fetch budget before their events wait
	// for room in the in-flight bound (fetchbudget.go).
	given := min(run.fetched, run.fetchCharge)
	run.fetchCharge -= given
	d.releaseFetch(given)
	if !d.inflight.TryAcquire(run.weight) {
		t0 := time.Now()
		err := d.inflight.Acquire(ctx, run.weight)
		waited(&d.clock.inFlight, t0)
		if err != nil {
			return false
		}
	}
	if d.isStopped() || ps.halted() {
		d.inflight.Release(run.weight)
		return false
	}
	ps.addRun(run.offsets)
	unqueued := run.weight
	for _, i := range run.used {
		items := run.bySender[i]
		t0 := time.Now()
		n := run.senders[i].in.put(ctx, items)
		waited(&d.clock.sender, t0)
		for _, it := range items[:n] {
			unqueued -= it.weight
		}
		if n < len(items) {
			// Never handed over: they stay pending, so nothing past
			// them commits.
			d.inflight.Release(unqueued)
			return false
		}
	}
	return true
}
