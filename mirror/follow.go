package mirror

import (
	"context"
	"sync"
	"time"
)

// StopFollowed: the drain caught up, then followed its partitions until
// the end of its follow window (Limits.FollowUntil).
const StopFollowed = "followed"

// FollowLinger is how long, in a following drain, a sender waits for more
// events before it sends a batch that is not full: at a steady trickle it
// sends one batch per linger instead of one per record, for at most this
// much added latency.
const FollowLinger = 5 * time.Millisecond

// followStopGrace: a fetch that fails this close to the end of the follow
// window (or after it) was cut by the window's end; it is not a failure.
const followStopGrace = time.Second

// followSendMargin is the margin (see sendContext) of a following drain's
// senders: past the end of the follow window, sends already on the wire
// get three quarters of it, whatever they are doing (retrying an
// unreachable Event Hubs), so that the next tick starts on time.
const followSendMargin = 300 * time.Millisecond

// followStopping reports whether a following drain's window is (about to
// be) over.
func (d *drain) followStopping() bool {
	return d.following() && time.Until(d.win.stopAt()) < followStopGrace
}

// senderContexts returns the senders' contexts (see sender.run): those of
// the drain, except that a following drain's senders start no batch after
// its window's end and give up sends on the wire shortly after it. What is
// left unsent is not acknowledged, so it stays uncommitted for the next
// drain.
func (d *drain) senderContexts(ctx, workCtx context.Context, margin time.Duration) (work, send context.Context, cancel context.CancelFunc) {
	if !d.following() {
		send, cancel = sendContext(ctx, workCtx, margin)
		return workCtx, send, cancel
	}
	work, cancelWork := d.win.bound(workCtx)
	margin = min(margin, followSendMargin)
	send, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	var grace *time.Timer
	var mu sync.Mutex
	later := func(after time.Duration) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			if grace == nil {
				grace = time.AfterFunc(after, cancelSend)
			}
		}
	}
	stopWork := context.AfterFunc(work, later(margin*3/4))
	stopCtx := context.AfterFunc(ctx, later(margin/2))
	return work, send, func() {
		stopWork()
		stopCtx()
		cancelSend()
		cancelWork()
	}
}

// following reports whether the drain follows its partitions once caught
// up.
func (d *drain) following() bool { return d.win != nil }

// followContext is the readers' context: readCtx, ending with the follow
// window when the drain follows.
func (d *drain) followContext(readCtx context.Context) (context.Context, context.CancelFunc) {
	if !d.following() {
		return context.WithCancel(readCtx)
	}
	return d.win.bound(readCtx)
}

// keepFollowing reports whether a reader that is caught up goes on
// fetching (long polls that return as soon as records arrive) rather than
// ending.
func (d *drain) keepFollowing(ctx context.Context) bool {
	return d.following() && ctx.Err() == nil && !d.isStopped()
}

// followEnded reports whether the readers ended because the follow window
// ended (and not the drain's own deadline or its caller).
func (d *drain) followEnded(ctx, workCtx context.Context) bool {
	return d.following() && ctx.Err() == nil && workCtx.Err() == nil && d.win.over()
}

// followWindow is when a following drain stops reading: at the end of
// its window plus a grace (zero for a drain with a fixed FollowUntil).
// A drain that is handed over from invocation to invocation (see
// Service.DrainFollowing) has its window extended by the next invocation
// within the grace; otherwise it stops when the grace is over.
type followWindow struct {
	grace  time.Duration
	ctx    context.Context // ends when the window and its grace are over, or at stop
	cancel context.CancelFunc

	mu    sync.Mutex
	end   time.Time // the current window's end
	timer *time.Timer
}

// newFollowWindow returns a window ending at end, reading until end+grace.
func newFollowWindow(end time.Time, grace time.Duration) *followWindow {
	w := &followWindow{grace: grace, end: end}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(time.Until(end.Add(grace)), w.fire)
	return w
}

// fire ends the window unless it was extended meanwhile.
func (w *followWindow) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if left := time.Until(w.end.Add(w.grace)); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.cancel()
}

// extend moves the window's end to end; false when the window is already
// over (the drain is stopping: the caller starts another).
func (w *followWindow) extend(end time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx.Err() != nil {
		return false
	}
	w.end = end
	w.timer.Reset(time.Until(end.Add(w.grace)))
	return true
}

// stop ends the window now.
func (w *followWindow) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Stop()
	w.cancel()
}

// windowEnd is the current window's end.
func (w *followWindow) windowEnd() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.end
}

// stopAt is when reading stops unless the window is extended.
func (w *followWindow) stopAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.end.Add(w.grace)
}

// over reports whether reading has stopped.
func (w *followWindow) over() bool { return w.ctx.Err() != nil }

// bound returns parent, also ending when the window is over.
func (w *followWindow) bound(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(w.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// linger is how long a sender waits for more events before it sends a
// batch that is not full.
func (s *sender) linger() time.Duration {
	if s.d.following() {
		return FollowLinger
	}
	return 0
}

// FollowUntil returns when a timer-triggered drain that follows should stop
// following: margin before the schedule's next occurrence after now, or
// the zero time when that leaves less than minWindow to follow.
func FollowUntil(now, nextTick time.Time, margin, minWindow time.Duration) time.Time {
	until := nextTick.Add(-margin)
	if until.Sub(now) < minWindow {
		return time.Time{}
	}
	return until
}
