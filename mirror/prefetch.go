package mirror

import (
	"context"
	"sync/atomic"
	"time"
)

// The fetch pipeline adapts to the distance to Kafka. Each reader keeps the
// next fetch of its partition in flight while it hands the previous one over
// to the senders, so that the round trip overlaps with the work. One fetch
// of FetchBytes covers a short round trip; a far Kafka (tens of
// milliseconds) needs more bytes per round trip, or the partition waits for
// its data. The pipeline therefore measures the round trip to Kafka and
// asks, per prefetch, for one more FetchBytes per handOverTime of it, at
// most maxFetchScale of them. handOverTime is how long a reader takes to
// hand FetchBytes over when the drain runs at prefetchRate spread over its
// partitions: a prefetch, sent as the reader takes the fetch before it,
// is in time when it arrives within that. So a drain of many partitions
// asks for less per partition than one of few: each of 20 partitions hands
// 1 MiB over in 84 ms, and one prefetch of 1 MiB covers a 50 ms round
// trip; each of 4 in 17 ms, and it takes 3 MiB. The rule before asked one
// more FetchBytes per 25 ms whatever the partitions (40 MB/s each): at 50 ms,
// 20 partitions' prefetches of 2.4 MiB held the in-flight bound their
// events needed (readers waited 40–59 % for it, 177–216 MB/s), where
// prefetches of 1 MiB mirrored 203–229 MB/s (bench runs, 2026-12-05).
//
// The round trip is the shortest of the drain's watermark request (sent as
// the drain starts, beside its group join (watermarks.go), with next to
// nothing for the broker to serve) and its fetches that returned records.
// Fetches alone measured the broker's serving time as much as the
// distance: on a busy machine a loopback fetch of 1 MiB took 56–170 ms,
// and the drain's first fetches, which all leave together and queue behind
// each other at the broker, took 163 ms at the fastest (bench runs,
// 2026-12-04). Every prefetch then asked for 2.4 MiB
// instead of 1 MiB, which a fetch does not serve faster, and for 100 B
// records the drain's heap doubled in its first second (kafka-go holds a
// fetched 100 B record in about 3.5 times its bytes). So neither each
// partition's first fetch nor a fetch that returned nothing (a long poll
// the broker held) is measured.
//
// Small records weigh more in flight than they take in a fetch: once handed
// over, a 100 B record is charged 692 B (InFlightWeight), so a fetch of 1 MiB
// of them becomes about 7 MiB of events, several times what a
// partition's share of the fetch budget (fetchbudget.go) holds at 20 partitions. Such a
// fetch's records wait in it for room in the bound, and the fetch's memory
// lives until its last record is in a batch. So after a partition's first
// fetch, every fetch asks for at most the partition's share of the fetch
// budget divided by the weight per byte of the records its last fetch
// brought (fetchBytesFor), but never less than a quarter of FetchBytes
// (FetchBytes for 1 KiB records and larger). The memory that saves lets each sender queue more events
// (senderQueue), so the senders fill larger batches (1,800–2,100 events of
// 100 B instead of about 1,000) within the same peak RSS
// (docs/performance.md, 2026-12-05 noon).
//
// Every fetch, prefetched or not, is charged to the drain's fetch budget
// before it is sent (fetchbudget.go), and its records until they are
// handed over. Each partition gets an equal share of the budget.
const (
	// prefetchRate is the drain throughput, in bytes per second, that
	// prefetches are sized for: about what one drain mirrors on two cores
	// (233–265 MB/s on the bench's machine).
	prefetchRate  = 250e6
	maxFetchScale = 8
	// minFetchFraction: a fetch sized by its records' weight asks for at
	// least FetchBytes / minFetchFraction.
	minFetchFraction = 4
	// weightSamples is how many of a fetch's records weightPerByte reads.
	weightSamples = 128
)

// fetchPipeline is a drain's state of the adaptive fetch pipeline; its zero
// value is ready.
type fetchPipeline struct {
	// rtt is the shortest fetch seen, in nanoseconds (0: none yet).
	rtt atomic.Int64
}

// observe records the duration of one fetch.
func (fp *fetchPipeline) observe(d time.Duration) {
	if d <= 0 {
		d = 1
	}
	for cur := fp.rtt.Load(); cur == 0 || int64(d) < cur; cur = fp.rtt.Load() {
		if fp.rtt.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// handOverTime is how long a reader takes to hand fetchBytes over when a
// drain of partitions runs at prefetchRate.
func handOverTime(fetchBytes, partitions int) time.Duration {
	return time.Duration(float64(fetchBytes) * float64(max(partitions, 1)) / prefetchRate * float64(time.Second))
}

// prefetchBytes is how much one prefetch asks for after a round trip of
// rtt: fetchBytes (the partition's fetch, fetchBytesFor), plus fetchBytes per
// handOverTime of the round trip, at most maxFetchScale times fetchBytes and
// at most one partition's share of the fetch budget (but never less than
// fetchBytes).
func prefetchBytes(rtt time.Duration, fetchBytes int, inflight int64, partitions int) int {
	scale := int64(maxFetchScale)
	if hand := handOverTime(fetchBytes, partitions); hand > 0 {
		scale = min(1+int64(rtt/hand), maxFetchScale)
	}
	want := min(int64(fetchBytes)*scale, int64(fetchShare(fetchBytes, inflight, partitions)))
	return int(max(want, int64(fetchBytes)))
}

// fetchBytesFor is how much a fetch asks for, before the round trip is
// taken into account, when the records of the partition's last fetch took
// weightPerByte bytes of the in-flight bound per byte fetched (0: no fetch
// yet): at most FetchBytes, and at most what a partition's share of the
// fetch budget holds once handed over, but at least FetchBytes /
// minFetchFraction; and never more than the partition's share of the fetch
// budget (fetchShare).
func fetchBytesFor(weightPerByte float64, fetchBytes int, inflight int64, partitions int) int {
	share := fetchShare(fetchBytes, inflight, partitions)
	n := fetchBytes
	if weightPerByte > 0 {
		n = int(min(float64(share)/weightPerByte, float64(fetchBytes)))
		n = max(n, fetchBytes/minFetchFraction)
	}
	return max(min(n, share), 1)
}

// weightPerByte is how many bytes of the in-flight bound f's records take
// once handed over per byte of their keys, values and headers, from at most
// weightSamples of them spread over the fetch; 0 when f has no records, +Inf
// when they have no bytes.
func weightPerByte(f *Fetched) float64 {
	var weight, bytes int64
	step := max(len(f.Records)/weightSamples, 1)
	for i := 0; i < len(f.Records); i += step {
		r := &f.Records[i]
		weight += InFlightWeight(r)
		bytes += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			bytes += int64(len(h.Key) + len(h.Value))
		}
	}
	if weight == 0 {
		return 0
	}
	return float64(weight) / float64(bytes) // +Inf when bytes is 0
}

// prefetcher keeps the next fetch of one partition in flight while the
// reader hands the records of the previous one over to the senders.
type prefetcher struct {
	d       *drain
	tp      TopicPartition
	pending *pendingFetch
	// fetched is set once the partition's first fetch returned: that one
	// is not measured (see above).
	fetched bool
	// weightPerByte is weightPerByte of the last fetch that returned
	// records (0: none yet); it sizes the fetches after it.
	weightPerByte float64
	// expansion is how many times what it asked for the last fetch that
	// returned records brought in keys, values and headers (at least 1):
	// compressed batches decompress
	// into more than the bytes a fetch asks for, so the fetches after it
	// ask for that much less (fetchbudget.go).
	expansion float64
	// asked is what the last fetch taken asked for.
	asked int
}

// pendingFetch is one fetch running in the background.
type pendingFetch struct {
	offset int64
	ask    int
	charge int64 // bytes of the fetch budget it holds
	done   chan struct{}
	f      Fetched
	err    error
	cancel context.CancelFunc
}

// fetch returns the fetch at offset, the prefetched one when it is for
// offset, a new one otherwise, with what it holds of the fetch budget: the
// caller gives that back as it hands the records over (handOverRun).
func (p *prefetcher) fetch(ctx context.Context, offset int64) (Fetched, int64, error) {
	f, charge, err := p.take(ctx, offset)
	if err == nil && len(f.Records) > 0 {
		p.weightPerByte = weightPerByte(&f)
		p.expansion = max(float64(payloadBytes(&f))/float64(max(p.asked, 1)), 1)
	}
	return f, charge, err
}

// take is fetch without sizing the fetches after it.
func (p *prefetcher) take(ctx context.Context, offset int64) (Fetched, int64, error) {
	if pf := p.pending; pf != nil {
		p.pending = nil
		if pf.offset == offset {
			p.asked = pf.ask
			select {
			case <-pf.done:
				pf.cancel()
				if pf.err != nil {
					p.d.releaseFetch(pf.charge)
					return pf.f, 0, pf.err
				}
				return pf.f, pf.charge, nil
			case <-ctx.Done():
				pf.cancel()
				<-pf.done
				p.d.releaseFetch(pf.charge)
				return Fetched{Next: offset}, 0, ctx.Err()
			}
		}
		pf.cancel()
		<-pf.done
		p.d.releaseFetch(pf.charge)
	}
	n := p.fetchBytes()
	p.asked = n
	if err := p.d.chargeFetch(ctx, int64(n)); err != nil {
		return Fetched{Next: offset}, 0, err
	}
	var f Fetched
	var err error
	if !p.fetched {
		f, err = p.d.m.source.Fetch(ctx, p.tp, offset, n)
		p.fetched = err == nil
	} else {
		f, err = p.timedFetch(ctx, offset, n)
	}
	if err != nil {
		p.d.releaseFetch(int64(n))
		return f, 0, err
	}
	return f, p.d.settleFetch(int64(n), &f), nil
}

// timedFetch fetches and records how long a fetch that returned records
// took.
func (p *prefetcher) timedFetch(ctx context.Context, offset int64, maxBytes int) (Fetched, error) {
	t0 := time.Now()
	f, err := p.d.m.source.Fetch(ctx, p.tp, offset, maxBytes)
	if err == nil && len(f.Records) > 0 {
		p.d.pipe.observe(time.Since(t0))
	}
	return f, err
}

// fetchBytes is how many bytes a fetch of the partition asks for before
// the round trip is taken into account (fetchBytesFor), less by the
// expansion of the last one, but at least minExpandedAsk.
func (p *prefetcher) fetchBytes() int {
	d := p.d
	n := fetchBytesFor(p.weightPerByte, d.m.opts.FetchBytes, d.m.opts.InFlightBytes, len(d.order))
	if p.expansion > 1 {
		n = min(max(int(float64(n)/p.expansion), minExpandedAsk), n)
	}
	return n
}

// size is how many bytes the next prefetch asks for.
func (p *prefetcher) size() int {
	d := p.d
	return prefetchBytes(time.Duration(d.pipe.rtt.Load()), p.fetchBytes(), d.m.opts.InFlightBytes, len(d.order))
}

// start fetches from offset in the background, for the next fetch call,
// when the fetch budget has room for it now; otherwise the next fetch call
// fetches.
func (p *prefetcher) start(ctx context.Context, offset int64) {
	p.stop()
	n, base := p.size(), p.fetchBytes()
	if !p.d.fetches.tryAcquire(int64(n)) {
		if n == base {
			return
		}
		n = base
		if !p.d.fetches.tryAcquire(int64(n)) {
			return
		}
	}
	fctx, cancel := context.WithCancel(ctx)
	pf := &pendingFetch{offset: offset, ask: n, charge: int64(n), done: make(chan struct{}), cancel: cancel}
	p.pending = pf
	go func() {
		defer close(pf.done)
		pf.f, pf.err = p.timedFetch(fctx, offset, n)
		if pf.err == nil {
			pf.charge = p.d.settleFetch(pf.charge, &pf.f)
		}
	}()
}

// stop abandons a pending fetch (nothing of it was consumed), waits for it
// to end and returns its charge.
func (p *prefetcher) stop() {
	if pf := p.pending; pf != nil {
		p.pending = nil
		pf.cancel()
		<-pf.done
		p.d.releaseFetch(pf.charge)
	}
}

// payloadBytes is the bytes of f's records' keys, values and headers.
func payloadBytes(f *Fetched) int64 {
	var n int64
	for i := range f.Records {
		r := &f.Records[i]
		n += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
	}
	return n
}
