package mirror

import (
	"cmp"
	"context"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sync/semaphore"
)

func TestPrefetchBytesFollowsTheRoundTrip(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		rtt        time.Duration
		fetch      int
		inflight   int64
		partitions int
		want       int
	}{
		{0, mib, 64 * mib, 20, mib},                          // not measured yet
		{3 * time.Millisecond, mib, 64 * mib, 20, mib},       // loopback
		{20 * time.Millisecond, mib, 64 * mib, 20, mib},      // under one hand-over time
		{50 * time.Millisecond, mib, 64 * mib, 20, mib},      // 20 partitions hand 1 MiB over in 84 ms
		{100 * time.Millisecond, mib, 64 * mib, 20, 2 * mib}, // one more per 84 ms
		{50 * time.Millisecond, mib, 64 * mib, 4, 3 * mib},   // 4 partitions: one more per 17 ms
		{100 * time.Millisecond, mib, 64 * mib, 4, 6 * mib},
		{50 * time.Millisecond, mib, 64 * mib, 1, 8 * mib}, // one partition: at most 8 × FetchBytes
		{time.Second, mib, 1 << 30, 1, 8 * mib},            // at most 8 × FetchBytes
		{100 * time.Millisecond, mib, 4 * mib, 20, mib},    // share below FetchBytes: FetchBytes
		{100 * time.Millisecond, mib, 1 * mib, 1, mib},     // no budget at all
	} {
		if got := prefetchBytes(c.rtt, c.fetch, c.inflight, c.partitions); got != c.want {
			t.Errorf("prefetchBytes(%s, %d, %d, %d) = %d, want %d", c.rtt, c.fetch, c.inflight, c.partitions, got, c.want)
		}
	}
	for _, c := range []struct{ inflight, want int64 }{
		{64 << 20, 48 << 20}, {4 << 20, 2 << 20}, {2 << 20, 0}, {1 << 20, 0},
	} {
		if got := prefetchBudget(c.inflight); got != c.want {
			t.Errorf("prefetchBudget(%d) = %d, want %d", c.inflight, got, c.want)
		}
	}
}

func TestFetchPipelineKeepsTheShortestRoundTrip(t *testing.T) {
	var fp fetchPipeline
	for _, d := range []time.Duration{80 * time.Millisecond, 52 * time.Millisecond, 0, 300 * time.Millisecond} {
		fp.observe(d)
	}
	if got := time.Duration(fp.rtt.Load()); got != 1 {
		t.Errorf("rtt %s after a 0 fetch, want 1ns", got)
	}
	var fp2 fetchPipeline
	fp2.observe(80 * time.Millisecond)
	fp2.observe(52 * time.Millisecond)
	fp2.observe(300 * time.Millisecond)
	if got := time.Duration(fp2.rtt.Load()); got != 52*time.Millisecond {
		t.Errorf("rtt %s, want 52ms", got)
	}
}

// Prefetches are charged to the in-flight bound: they take only what is
// free now, never more than the budget, and leave the reserve to events.
func TestPrefetchChargesTheInFlightBound(t *testing.T) {
	const mib = 1 << 20
	d := &drain{m: &Mirror{opts: Options{InFlightBytes: 8 * mib}}, inflight: semaphore.NewWeighted(8 * mib)}
	// Budget: 8 − max(2, 2) = 6 MiB.
	for i := range 6 {
		if !d.chargePrefetch(mib) {
			t.Fatalf("prefetch %d of 1 MiB refused within the 6 MiB budget", i+1)
		}
	}
	if d.chargePrefetch(mib) {
		t.Fatal("a seventh MiB of prefetch was charged beyond the budget")
	}
	// The reserve is left to events.
	if !d.inflight.TryAcquire(2 * mib) {
		t.Fatal("events cannot take the 2 MiB reserve")
	}
	d.releasePrefetch(mib)
	// Events hold the reserve and the bound is full but for the released
	// MiB: a prefetch of 2 MiB does not fit, one of 1 MiB does.
	if d.chargePrefetch(2 * mib) {
		t.Fatal("a 2 MiB prefetch was charged with 1 MiB free")
	}
	if !d.chargePrefetch(mib) {
		t.Fatal("a 1 MiB prefetch was refused with 1 MiB free")
	}
	d.inflight.Release(2 * mib)
	for range 6 {
		d.releasePrefetch(mib)
	}
	if got := d.pipe.charged.Load(); got != 0 {
		t.Fatalf("charged %d after every release, want 0", got)
	}
	if !d.inflight.TryAcquire(8 * mib) {
		t.Fatal("the whole bound is not free after every release")
	}
	d.inflight.Release(8 * mib)

	// Concurrent charges never pass the budget.
	var wg sync.WaitGroup
	var held, peak atomic.Int64 // successful charges not yet released
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				if d.chargePrefetch(mib) {
					h := held.Add(mib)
					for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
					}
					runtime.Gosched()
					held.Add(-mib)
					d.releasePrefetch(mib)
				}
			}
		}()
	}
	wg.Wait()
	if peak := peak.Load(); peak > 6*mib {
		t.Fatalf("prefetches held %d bytes at once, budget %d", peak, 6*mib)
	}
}

// stubFetches answers fetches of one record of valueSize bytes (0: 1 KiB)
// at offset, or of none while empty is set, each after delay (the first of
// each partition after firstDelay instead). It records the bytes each fetch
// asked for.
type stubFetches struct {
	Source // nil: only Fetch is called

	mu                sync.Mutex
	delay, firstDelay time.Duration
	empty             bool
	seen              map[TopicPartition]bool
	valueSize         int
	asked             []int
}

func (s *stubFetches) set(delay time.Duration, empty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay, s.empty = delay, empty
}

func (s *stubFetches) Fetch(ctx context.Context, tp TopicPartition, offset int64, maxBytes int) (Fetched, error) {
	s.mu.Lock()
	delay, empty := s.delay, s.empty
	if !s.seen[tp] {
		delay = s.firstDelay
	}
	s.seen[tp] = true
	s.asked = append(s.asked, maxBytes)
	size := cmp.Or(s.valueSize, 1024)
	s.mu.Unlock()
	if !sleep(ctx, delay) {
		return Fetched{Next: offset}, ctx.Err()
	}
	if empty {
		return Fetched{Next: offset}, nil
	}
	return Fetched{Records: []Record{{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, Value: make([]byte, size)}}, Next: offset + 1}, nil
}

// The round trip that sizes prefetches is measured neither on a
// partition's first fetch (the drain's first fetches queue behind each other
// at the broker) nor on a fetch that returned nothing (a long poll), only on
// fetches that returned records.
func TestPrefetchMeasuresNeitherTheFirstFetchNorALongPoll(t *testing.T) {
	const mib = 1 << 20
	ctx := context.Background()
	newPrefetcher := func(src Source) *prefetcher {
		d := &drain{m: &Mirror{source: src, opts: Options{FetchBytes: mib, InFlightBytes: 64 * mib}}, inflight: semaphore.NewWeighted(64 * mib)}
		d.order = make([]*partitionState, 20)
		return &prefetcher{d: d, tp: TopicPartition{Topic: "orders", Partition: 0}}
	}
	fetch := func(p *prefetcher, offset int64) Fetched {
		t.Helper()
		f, err := p.fetch(ctx, offset)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	// A slow first fetch: the first prefetch asks for FetchBytes.
	src := &stubFetches{firstDelay: 150 * time.Millisecond, seen: map[TopicPartition]bool{}}
	p := newPrefetcher(src)
	f := fetch(p, 0)
	if rtt := p.d.pipe.rtt.Load(); rtt != 0 {
		t.Fatalf("round trip %s measured on the partition's first fetch", time.Duration(rtt))
	}
	if got := p.size(); got != mib {
		t.Fatalf("prefetch after a slow first fetch asks for %d bytes, want FetchBytes %d", got, mib)
	}
	// A long poll that returned nothing after 150 ms is not a round trip.
	src.set(150*time.Millisecond, true)
	p.start(ctx, f.Next)
	if f = fetch(p, f.Next); len(f.Records) != 0 {
		t.Fatalf("want an empty fetch, got %d records", len(f.Records))
	}
	if rtt := p.d.pipe.rtt.Load(); rtt != 0 {
		t.Fatalf("round trip %s measured on a fetch that returned nothing", time.Duration(rtt))
	}
	// A fetch that returned records at once is one.
	src.set(0, false)
	p.start(ctx, f.Next)
	fetch(p, f.Next)
	if rtt := time.Duration(p.d.pipe.rtt.Load()); rtt <= 0 || rtt >= 25*time.Millisecond {
		t.Fatalf("round trip %s after a fetch that returned at once, want above 0 and below 25 ms", rtt)
	}
	p.stop()

	// Kafka 100 ms away: from the second fetch on, prefetches ask for
	// more: one more FetchBytes per 84 ms (what each of 20 partitions
	// takes to hand 1 MiB over at prefetchRate).
	src = &stubFetches{delay: 100 * time.Millisecond, firstDelay: 100 * time.Millisecond, seen: map[TopicPartition]bool{}}
	p = newPrefetcher(src)
	f = fetch(p, 0)
	p.start(ctx, f.Next)
	fetch(p, f.Next)
	if got, want := p.size(), 2*mib; got != want {
		t.Fatalf("prefetch 100 ms away asks for %d bytes, want %d", got, want)
	}
}

// A prefetch holds its ask of the in-flight bound while it is on its way
// and what it fetched once it arrived; the reader taking it frees the rest.
func TestPrefetchHoldsWhatItFetched(t *testing.T) {
	const mib, bound = 1 << 20, 64 << 20
	ctx := context.Background()
	src := &stubFetches{delay: 50 * time.Millisecond, seen: map[TopicPartition]bool{}}
	d := &drain{m: &Mirror{source: src, opts: Options{FetchBytes: mib, InFlightBytes: bound}}, inflight: semaphore.NewWeighted(bound)}
	d.order = make([]*partitionState, 20)
	p := &prefetcher{d: d, tp: TopicPartition{Topic: "orders", Partition: 0}, fetched: true}
	p.start(ctx, 0)
	if got := d.pipe.charged.Load(); got != mib {
		t.Fatalf("on its way, the prefetch holds %d bytes of the bound, want its ask %d", got, mib)
	}
	<-p.pending.done
	held := fetchedWeight(&p.pending.f)
	if held != 1024+int64(unsafe.Sizeof(Record{})) {
		t.Fatalf("a fetch of one 1 KiB record weighs %d", held)
	}
	if got := d.pipe.charged.Load(); got != held {
		t.Fatalf("arrived, the prefetch holds %d bytes of the bound, want what it fetched, %d", got, held)
	}
	if !d.inflight.TryAcquire(bound - held) {
		t.Fatal("the rest of the ask was not given back to the bound")
	}
	d.inflight.Release(bound - held)
	if _, err := p.fetch(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := d.pipe.charged.Load(); got != 0 {
		t.Fatalf("taken, the prefetch still holds %d bytes", got)
	}
	if !d.inflight.TryAcquire(bound) {
		t.Fatal("the bound is not free once the reader took the prefetch")
	}
}

func TestFetchBytesFollowTheRecordsWeight(t *testing.T) {
	const mib, kib = 1 << 20, 1 << 10
	small := weightPerByte(&Fetched{Records: []Record{{Value: make([]byte, 100)}}})
	if want := float64(100+itemMemory+BatchedEventMemory) / 100; small != want {
		t.Fatalf("weightPerByte of a 100 B record = %v, want %v", small, want)
	}
	large := weightPerByte(&Fetched{Records: []Record{{Value: make([]byte, kib)}}})
	for _, c := range []struct {
		name          string
		weightPerByte float64
		fetch         int
		inflight      int64
		partitions    int
		want          int
	}{
		{"no fetch yet", 0, mib, 64 * mib, 20, mib},
		{"1 KiB records", large, mib, 64 * mib, 20, mib},
		// 48 MiB / 20 partitions / 6.92 bytes per byte.
		{"100 B records", small, mib, 64 * mib, 20, 363667},
		{"100 B records, 4 partitions", small, mib, 64 * mib, 4, mib},
		{"100 B records, 200 partitions", small, mib, 64 * mib, 200, mib / 4},
		{"records without bytes", math.Inf(1), mib, 64 * mib, 20, mib / 4},
		{"a larger bound", small, mib, 256 * mib, 20, mib},
	} {
		if got := fetchBytesFor(c.weightPerByte, c.fetch, c.inflight, c.partitions); got != c.want {
			t.Errorf("%s: fetchBytesFor(%v, %d, %d, %d) = %d, want %d", c.name, c.weightPerByte, c.fetch, c.inflight, c.partitions, got, c.want)
		}
	}
	if got := weightPerByte(&Fetched{Records: []Record{{Offset: 1}}}); !math.IsInf(got, 1) {
		t.Errorf("weightPerByte of a record without bytes = %v, want +Inf", got)
	}
	if got := weightPerByte(&Fetched{}); got != 0 {
		t.Errorf("weightPerByte of an empty fetch = %v, want 0", got)
	}
}

// After a partition's first fetch, its fetches and prefetches ask for what
// its share of the prefetch budget holds of the records it fetched last:
// less for small records, FetchBytes for large ones.
func TestFetchesOfSmallRecordsAskForLess(t *testing.T) {
	const mib, bound = 1 << 20, 64 << 20
	ctx := context.Background()
	for _, c := range []struct {
		valueSize int
		want      int
	}{{100, 363667}, {1024, mib}} {
		src := &stubFetches{valueSize: c.valueSize, seen: map[TopicPartition]bool{}}
		d := &drain{m: &Mirror{source: src, opts: Options{FetchBytes: mib, InFlightBytes: bound}}, inflight: semaphore.NewWeighted(bound)}
		d.order = make([]*partitionState, 20)
		p := &prefetcher{d: d, tp: TopicPartition{Topic: "orders", Partition: 0}}
		f, err := p.fetch(ctx, 0) // the first: FetchBytes
		if err != nil {
			t.Fatal(err)
		}
		if f, err = p.fetch(ctx, f.Next); err != nil { // not prefetched
			t.Fatal(err)
		}
		p.start(ctx, f.Next)
		if _, err := p.fetch(ctx, f.Next); err != nil { // prefetched
			t.Fatal(err)
		}
		p.stop()
		if want := []int{mib, c.want, c.want}; !slices.Equal(src.asked, want) {
			t.Errorf("%d B records: fetches asked for %v, want %v", c.valueSize, src.asked, want)
		}
	}
}
