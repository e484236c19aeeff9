package mirror

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
		{0, mib, 64 * mib, 20, mib},                     // not measured yet
		{3 * time.Millisecond, mib, 64 * mib, 20, mib},  // loopback
		{20 * time.Millisecond, mib, 64 * mib, 20, mib}, // under one step
		{50 * time.Millisecond, mib, 64 * mib, 20, 48 * mib / 20},
		{50 * time.Millisecond, mib, 64 * mib, 4, 3 * mib},
		{100 * time.Millisecond, mib, 64 * mib, 4, 5 * mib},
		{time.Second, mib, 1 << 30, 1, 8 * mib},         // at most 8 × FetchBytes
		{100 * time.Millisecond, mib, 4 * mib, 20, mib}, // share below FetchBytes: FetchBytes
		{100 * time.Millisecond, mib, 1 * mib, 1, mib},  // no budget at all
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
