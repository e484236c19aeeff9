package mirror

import (
	"context"
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
	return d.following() && time.Until(d.lim.FollowUntil) < followStopGrace
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
	work, cancelWork := context.WithDeadline(workCtx, d.lim.FollowUntil)
	send, cancelSend := sendContext(ctx, work, min(margin, followSendMargin))
	return work, send, func() {
		cancelSend()
		cancelWork()
	}
}

// following reports whether the drain follows its partitions once caught
// up.
func (d *drain) following() bool { return !d.lim.FollowUntil.IsZero() }

// followContext is the readers' context: readCtx, ending at FollowUntil
// when the drain follows.
func (d *drain) followContext(readCtx context.Context) (context.Context, context.CancelFunc) {
	if !d.following() {
		return context.WithCancel(readCtx)
	}
	return context.WithDeadline(readCtx, d.lim.FollowUntil)
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
	return d.following() && ctx.Err() == nil && workCtx.Err() == nil && !time.Now().Before(d.lim.FollowUntil)
}

// linger is how long a sender waits for more events before it sends a
// batch that is not full.
func (s *sender) linger() time.Duration {
	if s.d.following() {
		return FollowLinger
	}
	return 0
}

// next returns the next queued item. When none is queued it waits until
// deadline (not at all for a zero deadline). ok is false when the queue is
// closed; it is nil when the wait ended.
func (s *sender) next(deadline time.Time) (it *item, ok bool) {
	select {
	case it, ok = <-s.in:
		return it, ok
	default:
	}
	wait := time.Until(deadline)
	if deadline.IsZero() || wait <= 0 {
		return nil, true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case it, ok = <-s.in:
		return it, ok
	case <-t.C:
		return nil, true
	}
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

// DrainFollowing runs one drain within the service's limits that, once
// caught up, follows its partitions until until (see Limits.FollowUntil),
// and keeps its report. A zero until is Drain.
func (s *Service) DrainFollowing(ctx context.Context, run string, until time.Time) (*Report, error) {
	lim := s.limits
	lim.FollowUntil = until
	return s.drain(ctx, run, TriggerTimer, lim)
}
