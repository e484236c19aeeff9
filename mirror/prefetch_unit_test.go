package mirror

import (
	"cmp"
	"context"
	"math"
	"runtime"
	"slices"
	"sync"
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
		{0, mib, 64 * mib, 20, mib},                                // not measured yet
		{3 * time.Millisecond, mib, 64 * mib, 20, mib},             // loopback
		{20 * time.Millisecond, mib, 64 * mib, 20, mib},            // under one hand-over time
		{50 * time.Millisecond, mib, 64 * mib, 20, mib},            // 20 partitions hand 1 MiB over in 84 ms
		{100 * time.Millisecond, mib, 64 * mib, 20, 32 * mib / 20}, // one more per 84 ms, within the share
		{50 * time.Millisecond, mib, 64 * mib, 4, 3 * mib},         // 4 partitions: one more per 17 ms
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
		{64 << 20, 32 << 20}, {4 << 20, 2 << 20}, {2 << 20, 1 << 20}, {1, 1},
	} {
		if got := fetchBudget(c.inflight); got != c.want {
			t.Errorf("fetchBudget(%d) = %d, want %d", c.inflight, got, c.want)
		}
	}
	for _, c := range []struct {
		fetch      int
		inflight   int64
		partitions int
		want       int
	}{
		{mib, 64 * mib, 20, 32 * mib / 20},
		{mib, 64 * mib, 1000, 32 * mib / 1000},
		{mib, 64 * mib, 5000, minFetchAsk},  // at least minFetchAsk: fetches take turns
		{4 << 10, 64 * mib, 10000, 4 << 10}, // or FetchBytes when smaller
		{mib, 64 << 10, 1, 32 << 10},        // never more than the budget
		{mib, 16 << 10, 20, 8 << 10},        // even when below minFetchAsk
	} {
		if got := fetchShare(c.fetch, c.inflight, c.partitions); got != c.want {
			t.Errorf("fetchShare(%d, %d, %d) = %d, want %d", c.fetch, c.inflight, c.partitions, got, c.want)
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

// The fetch budget is a semaphore of bytes that a fetch bringing more than
// it asked for overdraws: the overdraft is given back first and holds off
// every other charge until then.
func TestFetchBudgetOverdraws(t *testing.T) {
	const mib = 1 << 20
	b := newByteBudget(4 * mib)
	for i := range 4 {
		if !b.tryAcquire(mib) {
			t.Fatalf("charge %d of 1 MiB refused within the 4 MiB budget", i+1)
		}
	}
	if b.tryAcquire(1) {
		t.Fatal("a byte was charged beyond the budget")
	}
	b.force(2 * mib) // a fetch brought 2 MiB more than it asked for
	b.release(mib)
	if b.tryAcquire(1) {
		t.Fatal("a charge was taken while the budget was overdrawn")
	}
	b.release(mib)
	if b.tryAcquire(1) {
		t.Fatal("a charge was taken while the budget was full")
	}
	b.release(mib)
	if !b.tryAcquire(mib) || b.tryAcquire(1) {
		t.Fatal("the budget did not have exactly the MiB given back once the overdraft was paid")
	}
	b.release(mib)
	b.force(mib) // fits: no overdraft
	if got := b.debt.Load(); got != 0 {
		t.Fatalf("overdraft %d after a force that fit", got)
	}
	b.release(4 * mib)
	if !b.tryAcquire(4*mib) || b.debt.Load() != 0 {
		t.Fatal("the whole budget is not free after every release")
	}
	b.release(4 * mib)

	// Concurrent charges, forces and releases never lose a byte.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if g%2 == 0 && i%3 == 0 {
					b.force(mib)
					runtime.Gosched()
					b.release(mib)
				} else if b.tryAcquire(mib) {
					runtime.Gosched()
					b.release(mib)
				}
			}
		}()
	}
	wg.Wait()
	if !b.tryAcquire(4*mib) || b.debt.Load() != 0 {
		t.Fatal("the whole budget is not free after concurrent use")
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
		d := &drain{m: &Mirror{source: src, opts: Options{FetchBytes: mib, InFlightBytes: 64 * mib}}, inflight: semaphore.NewWeighted(64 * mib), fetches: newByteBudget(32 * mib), clock: newReadClock()}
		d.order = make([]*partitionState, 20)
		return &prefetcher{d: d, tp: TopicPartition{Topic: "orders", Partition: 0}}
	}
	fetch := func(p *prefetcher, offset int64) Fetched {
		t.Helper()
		f, charge, err := p.fetch(ctx, offset)
		if err != nil {
			t.Fatal(err)
		}
		p.d.releaseFetch(charge)
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
	if got, want := p.size(), 32*mib/20; got != want {
		t.Fatalf("prefetch 100 ms away asks for %d bytes, want %d (2 MiB, capped at the partition's share of the fetch budget)", got, want)
	}
}

// A prefetch holds its ask of the fetch budget while it is on its way and
// what it fetched once it arrived; the reader taking it gets that charge,
// to give back as it hands the records over.
func TestPrefetchHoldsWhatItFetched(t *testing.T) {
	const mib, bound = 1 << 20, 64 << 20
	ctx := context.Background()
	src := &stubFetches{delay: 50 * time.Millisecond, seen: map[TopicPartition]bool{}}
	d := &drain{m: &Mirror{source: src, opts: Options{FetchBytes: mib, InFlightBytes: bound}}, inflight: semaphore.NewWeighted(bound), fetches: newByteBudget(fetchBudget(bound)), clock: newReadClock()}
	d.order = make([]*partitionState, 20)
	budget := fetchBudget(bound)
	p := &prefetcher{d: d, tp: TopicPartition{Topic: "orders", Partition: 0}, fetched: true}
	p.start(ctx, 0)
	if d.fetches.tryAcquire(budget - mib + 1) {
		t.Fatalf("on its way, the prefetch holds less than its ask %d of the fetch budget", mib)
	}
	<-p.pending.done
	held := fetchedWeight(&p.pending.f)
	if held != 1024+int64(unsafe.Sizeof(Record{})) {
		t.Fatalf("a fetch of one 1 KiB record weighs %d", held)
	}
	if !d.fetches.tryAcquire(budget - held) {
		t.Fatal("arrived, the rest of the prefetch's ask was not given back to the fetch budget")
	}
	if d.fetches.tryAcquire(1) {
		t.Fatal("arrived, the prefetch holds less than what it fetched")
	}
	d.fetches.release(budget - held)
	_, charge, err := p.fetch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if charge != held {
		t.Fatalf("taken, the fetch hands the reader a charge of %d, want what it fetched, %d", charge, held)
	}
	d.releaseFetch(charge)
	if !d.fetches.tryAcquire(budget) {
		t.Fatal("the fetch budget is not free once the reader gave the charge back")
	}
	if !d.inflight.TryAcquire(bound) {
		t.Fatal("a fetch was charged to the in-flight bound, which is the events'")
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
		// 32 MiB / 20 partitions / 6.92 bytes per byte is below
		// FetchBytes / 4.
		{"100 B records", small, mib, 64 * mib, 20, mib / 4},
		{"100 B records, 4 partitions", small, mib, 64 * mib, 4, mib},
		// The floor of FetchBytes / 4 is above the share: the share.
		{"100 B records, 200 partitions", small, mib, 64 * mib, 200, 32 * mib / 200},
		{"records without bytes", math.Inf(1), mib, 64 * mib, 20, mib / 4},
		// 128 MiB / 20 / 6.92.
		{"a larger bound", small, mib, 256 * mib, 20, 969781},
		{"no fetch yet, 1,000 partitions", 0, mib, 64 * mib, 1000, 32 * mib / 1000},
		{"1 KiB records, 1,000 partitions", large, mib, 64 * mib, 1000, 32 * mib / 1000},
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
// its share of the fetch budget holds of the records it fetched last:
// less for small records, FetchBytes for large ones.
func TestFetchesOfSmallRecordsAskForLess(t *testing.T) {
	const mib, bound = 1 << 20, 64 << 20
	ctx := context.Background()
	for _, c := range []struct {
		valueSize int
		want      int
	}{{100, mib / 4}, {1024, mib}} {
		src := &stubFetches{valueSize: c.valueSize, seen: map[TopicPartition]bool{}}
		d := &drain{m: &Mirror{source: src, opts: Options{FetchBytes: mib, InFlightBytes: bound}}, inflight: semaphore.NewWeighted(bound), fetches: newByteBudget(fetchBudget(bound)), clock: newReadClock()}
		d.order = make([]*partitionState, 20)
		p := &prefetcher{d: d, tp: TopicPartition{Topic: "orders", Partition: 0}}
		f, _, err := p.fetch(ctx, 0) // the first: FetchBytes
		if err != nil {
			t.Fatal(err)
		}
		if f, _, err = p.fetch(ctx, f.Next); err != nil { // not prefetched
			t.Fatal(err)
		}
		p.start(ctx, f.Next)
		if _, _, err := p.fetch(ctx, f.Next); err != nil { // prefetched
			t.Fatal(err)
		}
		p.stop()
		if want := []int{mib, c.want, c.want}; !slices.Equal(src.asked, want) {
			t.Errorf("%d B records: fetches asked for %v, want %v", c.valueSize, src.asked, want)
		}
	}
}

// A fetch whose records bring more than it asked for (a compressed batch,
// or one larger than the ask) makes the partition's next fetches ask for
// less by as many times, so the fetch budget holds what they bring.
func TestFetchesAfterACompressedOneAskForLess(t *testing.T) {
	const kib, bound = 1 << 10, 4 << 20
	ctx := context.Background()
	src := &stubFetches{valueSize: 256 * kib, seen: map[TopicPartition]bool{}}
	d := &drain{m: &Mirror{source: src, opts: Options{FetchBytes: 64 * kib, InFlightBytes: bound}}, inflight: semaphore.NewWeighted(bound), fetches: newByteBudget(fetchBudget(bound)), clock: newReadClock()}
	d.order = make([]*partitionState, 4)
	p := &prefetcher{d: d, tp: TopicPartition{Topic: "orders", Partition: 0}}
	f, charge, err := p.fetch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.releaseFetch(charge)
	src.mu.Lock()
	src.valueSize = 16 * kib
	src.mu.Unlock()
	if f, charge, err = p.fetch(ctx, f.Next); err != nil {
		t.Fatal(err)
	}
	d.releaseFetch(charge)
	if _, charge, err = p.fetch(ctx, f.Next); err != nil {
		t.Fatal(err)
	}
	d.releaseFetch(charge)
	// 64 KiB asked, 256 KiB brought: a quarter; then 16 KiB asked and
	// brought: the full ask again.
	if want := []int{64 * kib, 16 * kib, 64 * kib}; !slices.Equal(src.asked, want) {
		t.Errorf("fetches asked for %v, want %v", src.asked, want)
	}
	if !d.fetches.tryAcquire(fetchBudget(bound)) {
		t.Error("the fetch budget is not free once every charge was given back")
	}
}
