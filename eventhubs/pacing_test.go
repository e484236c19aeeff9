package eventhubs

import (
	"context"
	"sync"
	"testing"
	"time"
)

// The management window lets n reads start at once, and no more than n in
// any period.
func TestWindowLetsNStartPerPeriod(t *testing.T) {
	const n, period = 5, 200 * time.Millisecond
	w := &window{n: n, period: period}
	start := time.Now()
	var mu sync.Mutex
	var starts []time.Duration
	var wg sync.WaitGroup
	for range 3 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.wait(context.Background()); err != nil {
				t.Error(err)
			}
			mu.Lock()
			starts = append(starts, time.Since(start))
			mu.Unlock()
		}()
	}
	wg.Wait()
	early, late := 0, 0
	for _, s := range starts {
		switch {
		case s < period/2:
			early++
		case s >= 2*period:
			late++
		}
	}
	if early != n {
		t.Errorf("%d of %d reads started at once, want %d: %v", early, 3*n, n, starts)
	}
	if late != n {
		t.Errorf("%d reads started two periods in, want %d (the third window): %v", late, n, starts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.wait(ctx); err == nil {
		t.Error("a wait for a full window returned no error once its context ended")
	}
}
