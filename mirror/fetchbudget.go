package mirror

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sync/semaphore"
)

// Every byte a drain fetches is charged before the fetch is sent, whatever
// the number of partitions: to the drain's fetch budget, a bound of its own
// beside the in-flight bound (Options.InFlightBytes) that the events are
// charged to. The fetch budget is half the in-flight bound (fetchBudget), so
// what a drain holds of records read and not yet acknowledged is at most
// 1.5 × MIRROR_INFLIGHT_BYTES, whether it reads 20 partitions or 1,000.
// Before, each partition's fetch asked for 1 MiB (the first) or at least
// 256 KiB (the others) uncharged, and a drain of 1,000 backlogged partitions
// held about 1 GiB of fetches at once (issue 48).
//
// A fetch is charged its ask while it is on its way and what it fetched
// (fetchedWeight) once it arrived, until its last record is handed over to
// the senders: each run of records handed over gives its part back before
// its events are charged to the in-flight bound, and the rest is given back
// when the fetch is done with (records skipped, the reader stopping). The
// two bounds are independent, so neither can wait for the other: a reader
// waiting for room for events waits only for acknowledgements, and one
// waiting for room for a fetch only for other readers to hand their fetches
// over.
//
// Asks are sized so that every partition's fetch fits at once: at most the
// partition's share of the budget (fetchBudget / partitions), but not less
// than minFetchAsk (or FetchBytes, when smaller). Beyond budget /
// minFetchAsk partitions, fetches take turns. A reader's fetch waits for
// room in the budget; a prefetch takes only room that is free now. A broker
// returns at least one whole record batch whatever the ask (KIP-74), so a
// fetch can bring more than it asked for, and a compressed batch
// decompresses into more than its bytes on the wire: the excess is charged when it
// arrives, overdrawing the budget, and the overdraft is paid back first, by the
// releases that follow; and the partition's next fetches ask for less by as many
// times as its last one brought more than it asked for (compressed topics).
// The budget therefore holds as long as the producers' batches are no
// larger than the asks (the Java producer's batch.size is 16 KiB by
// default) and once each partition's compression is known; the first fetch
// of a compressed partition, and batches larger than the asks, overdraw it
// by at most what one fetch brings per fetch in flight.
const (
	// minFetchAsk is the least a fetch asks for when the partitions'
	// shares of the fetch budget are smaller.
	minFetchAsk = 16 << 10
	// minExpandedAsk is the least a fetch asks for after one whose
	// records took more than it asked for.
	minExpandedAsk = 1 << 10
)

// fetchBudget is the part of memory a drain's fetches may hold, for an
// in-flight bound of inflight bytes.
func fetchBudget(inflight int64) int64 {
	return max(inflight/2, 1)
}

// fetchShare is the most a fetch of one of partitions partitions asks for:
// its share of the fetch budget, but at least minFetchAsk (or fetchBytes
// when smaller) and at most the whole budget.
func fetchShare(fetchBytes int, inflight int64, partitions int) int {
	budget := fetchBudget(inflight)
	share := budget / int64(max(partitions, 1))
	share = max(share, int64(min(fetchBytes, minFetchAsk)))
	return int(max(min(share, budget), 1))
}

// byteBudget is a weighted semaphore of bytes that a charge may also
// overdraw (force): the overdraft is given back first, by the next
// releases, before they free room for other charges.
type byteBudget struct {
	sem  *semaphore.Weighted
	mu   sync.Mutex
	debt atomic.Int64 // the overdraft not yet given back
}

// newByteBudget returns a budget of n bytes.
func newByteBudget(n int64) *byteBudget {
	return &byteBudget{sem: semaphore.NewWeighted(n)}
}

// acquire takes n bytes, waiting for room until ctx ends.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	return b.sem.Acquire(ctx, n)
}

// tryAcquire takes n bytes when there is room now.
func (b *byteBudget) tryAcquire(n int64) bool {
	return b.sem.TryAcquire(n)
}

// force takes n bytes now, overdrawing the budget when it has no room.
func (b *byteBudget) force(n int64) {
	if n <= 0 || b.sem.TryAcquire(n) {
		return
	}
	b.mu.Lock()
	b.debt.Add(n)
	b.mu.Unlock()
}

// release gives n bytes back, the overdraft first.
func (b *byteBudget) release(n int64) {
	if n <= 0 {
		return
	}
	if b.debt.Load() > 0 {
		b.mu.Lock()
		pay := min(b.debt.Load(), n)
		b.debt.Add(-pay)
		b.mu.Unlock()
		n -= pay
	}
	if n > 0 {
		b.sem.Release(n)
	}
}

// recordFetchedWeight is what one fetched record holds until it is handed
// over: its key, value and headers, and the record itself.
func recordFetchedWeight(r *Record) int64 {
	w := int64(unsafe.Sizeof(Record{})) + int64(len(r.Value)+len(r.Key))
	for _, h := range r.Headers {
		w += int64(len(h.Key)+len(h.Value)) + headerMemory
	}
	return w
}

// fetchedWeight is what a fetch's records hold until they are handed over.
func fetchedWeight(f *Fetched) int64 {
	var w int64
	for i := range f.Records {
		w += recordFetchedWeight(&f.Records[i])
	}
	return w
}

// chargeFetch takes n bytes of the fetch budget for a fetch about to be
// sent, waiting for room. The time waited counts as waiting for the
// in-flight bound, not for Kafka: the reader counts the whole fetch as
// waiting for Kafka (drain.read), so it is taken off that here.
func (d *drain) chargeFetch(ctx context.Context, n int64) error {
	if d.fetches.tryAcquire(n) {
		return nil
	}
	t0 := time.Now()
	err := d.fetches.acquire(ctx, n)
	w := int64(time.Since(t0))
	d.clock.inFlight.Add(w)
	d.clock.kafka.Add(-w)
	return err
}

// settleFetch turns a fetch's charge of its ask into one of what it
// fetched, and returns the new charge.
func (d *drain) settleFetch(charge int64, f *Fetched) int64 {
	held := fetchedWeight(f)
	if held < charge {
		d.fetches.release(charge - held)
	} else {
		d.fetches.force(held - charge)
	}
	return held
}

// releaseFetch gives n bytes of a fetch's charge back.
func (d *drain) releaseFetch(n int64) {
	if n > 0 {
		d.fetches.release(n)
	}
}
