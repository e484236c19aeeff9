package mirror

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// inFlightBound is a drain's in-flight bound (Options.InFlightBytes): a
// weighted semaphore that can also be overdrawn. An overdraft is a charge
// taken past the bound for memory already held (a prefetch that brought
// more than it was charged while on its way, prefetch.go); it never waits,
// and the releases that follow pay it back before they give the bound any
// room, so the bound is exceeded by at most the overdrafts not yet repaid.
type inFlightBound struct {
	sem  *semaphore.Weighted
	owed atomic.Int64 // overdrawn bytes not yet paid back
}

// newInFlightBound returns a bound of n bytes.
func newInFlightBound(n int64) *inFlightBound {
	return &inFlightBound{sem: semaphore.NewWeighted(n)}
}

// Acquire waits for n bytes of room, or until ctx ends.
func (b *inFlightBound) Acquire(ctx context.Context, n int64) error {
	return b.sem.Acquire(ctx, n)
}

// TryAcquire takes n bytes when the bound has room for them now.
func (b *inFlightBound) TryAcquire(n int64) bool {
	return b.sem.TryAcquire(n)
}

// Overdraw takes n bytes now: from the bound's room when it has enough,
// past the bound otherwise.
func (b *inFlightBound) Overdraw(n int64) {
	if n > 0 && !b.sem.TryAcquire(n) {
		b.owed.Add(n)
	}
}

// Release gives back n bytes taken by Acquire, TryAcquire or Overdraw,
// paying back what is owed first.
func (b *inFlightBound) Release(n int64) {
	for n > 0 {
		owed := b.owed.Load()
		if owed == 0 {
			b.sem.Release(n)
			return
		}
		pay := min(owed, n)
		if b.owed.CompareAndSwap(owed, owed-pay) {
			n -= pay
		}
	}
}
