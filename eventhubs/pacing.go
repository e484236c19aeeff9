package eventhubs

import (
	"context"
	"sync"
	"time"
)

// managementPerSecond is how many $management reads (hub and partition
// properties) a sink starts in any one second: the service's documented
// quota of GetRuntimeInformation calls, 50 per second (per consumer group;
// these reads are that call). A drain start reads the properties of every
// hub it has not cached, many at once (mirror.Mirror looks its hubs up
// concurrently), so this window, not the concurrency, keeps the sink
// within the quota: the first 50 of 100 cold hubs are read at once, the
// others a second later.
const managementPerSecond = 50

// window lets at most n events start in any period; its zero value with n
// and period set is ready.
type window struct {
	n      int
	period time.Duration
	mu     sync.Mutex
	starts []time.Time // the last n starts (or fewer), oldest first
}

// wait waits until an event may start without more than n in any period,
// counts it, and returns; or returns ctx's error.
func (w *window) wait(ctx context.Context) error {
	w.mu.Lock()
	now := time.Now()
	at := now
	if len(w.starts) == w.n {
		if free := w.starts[0].Add(w.period); free.After(now) {
			at = free
		}
		w.starts = w.starts[1:]
	}
	w.starts = append(w.starts, at)
	w.mu.Unlock()
	d := at.Sub(now)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
