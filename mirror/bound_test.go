package mirror

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
)

// An overdraft takes the bound's room when it has some and is owed
// otherwise; releases pay what is owed back before they free room.
func TestInFlightBoundPaysItsOverdraftBackFirst(t *testing.T) {
	b := newInFlightBound(10)
	b.Overdraw(3)
	if b.owed.Load() != 0 || b.TryAcquire(8) || !b.TryAcquire(7) {
		t.Fatal("an overdraft that fits did not take the bound's room")
	}
	b.Release(10)

	if err := b.Acquire(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	b.Overdraw(4)
	if got := b.owed.Load(); got != 4 {
		t.Fatalf("owed %d past a full bound, want 4", got)
	}
	b.Release(6) // 4 pay the overdraft back, 2 free room
	if b.owed.Load() != 0 || !b.TryAcquire(2) || b.TryAcquire(1) {
		t.Fatal("a release did not pay the overdraft back before it freed room")
	}
	b.Release(4 + 4 + 2)
	if !b.TryAcquire(10) {
		t.Fatal("the bound is not free after every release")
	}
}

// Concurrent charges and releases, overdrafts among them, leave the bound
// whole (a semaphore panics when released more than it holds).
func TestInFlightBoundUnderConcurrency(t *testing.T) {
	const size = 1000
	b := newInFlightBound(size)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []int64
			for range 2000 {
				n := 1 + rand.Int64N(200)
				switch rand.IntN(3) {
				case 0:
					if b.TryAcquire(n) {
						held = append(held, n)
					}
				case 1:
					b.Overdraw(n)
					held = append(held, n)
				default:
					if len(held) > 0 {
						b.Release(held[0])
						held = held[1:]
					}
				}
			}
			for _, n := range held {
				b.Release(n)
			}
		}()
	}
	wg.Wait()
	if got := b.owed.Load(); got != 0 {
		t.Fatalf("owed %d after every release", got)
	}
	if !b.TryAcquire(size) {
		t.Fatal("the bound is not free after every release")
	}
}
