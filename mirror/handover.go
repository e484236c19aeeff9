package mirror

// This file is the invocations' side of a follower (follower.go): each
// scheduled invocation starts or adopts it, waits for its window's end and
// reports what was mirrored in that window.

import (
	"context"
	"slices"
	"time"
)

// HandoverGrace is how long a following drain goes on reading after its
// invocation's window ended, for the next scheduled invocation to adopt it
// (see Service.DrainFollowing). When none does within the grace, it stops,
// commits what Event Hubs acknowledged and logs what it mirrored after the
// window, as a drain that followed.
const HandoverGrace = 5 * time.Second

// StopHandedOver: the invocation's window ended while its drain kept
// following, for the next invocation to adopt it within HandoverGrace (or
// to stop and commit after it).
const StopHandedOver = "handed over"

// MinFollowWindow is the shortest follow window worth following: an
// invocation with less drains and returns.
const MinFollowWindow = time.Second

// handoverMargin is what a drain handed over gets, once its window and
// grace are over, for the sends on the wire and the final commit.
const handoverMargin = 2 * time.Second

// handoverBacklogWait bounds the look-up of the oldest unmirrored record
// of a window handed over: the next tick is due soon.
const handoverBacklogWait = 250 * time.Millisecond

// DrainFollowing runs the drain of a scheduled invocation that, once caught
// up, follows its partitions until until, the end of the invocation's
// window, and reports what was mirrored in that window. A zero until is
// Drain.
//
// The drain does not end with the window: it goes on reading, sending and
// committing for HandoverGrace, and the next invocation that arrives within
// the grace adopts it (its claim, fetches and senders go on; only the
// invocation boundary moves) instead of starting a drain. Without one, it
// stops and commits after the grace. Each invocation's report counts the
// records mirrored since the previous window's end (no record twice);
// MIRROR_MAX_DURATION and the invocation's deadline bound each window.
// The drain's life, and its re-plans within a window, are the follower's
// (follower.go): what a drain that ended to re-plan mirrored in the window
// is a report of its own.
func (s *Service) DrainFollowing(ctx context.Context, run string, until time.Time) (*Report, error) {
	if until.IsZero() {
		return s.Drain(ctx, run)
	}
	budget := s.limits.MaxDuration
	if budget <= 0 {
		budget = time.Minute
	}
	end := time.Now().Add(budget - handoverMargin)
	if d, ok := ctx.Deadline(); ok && d.Add(-handoverMargin).Before(end) {
		end = d.Add(-handoverMargin)
	}
	if end.Before(until) {
		until = end
		if time.Until(until) < MinFollowWindow {
			// The budget leaves no window worth following (a
			// MIRROR_MAX_DURATION of at most handoverMargin leaves
			// none at all): drain and return, as an invocation that
			// does not follow. Handed over at once, the drain's
			// records would show in the status only once a later
			// invocation adopted or ended it.
			return s.Drain(ctx, run)
		}
	}
	f := s.adopt(run, until)
	if f == nil {
		// Another invocation follows (not with a singleton timer), or
		// the service is closing: a drain beside it, as before handover.
		lim := s.limits
		lim.FollowUntil = until
		return s.drain(ctx, run, TriggerTimer, lim)
	}
	return s.awaitWindow(ctx, f, until)
}

// adopt extends the running follower's window to until for the invocation
// run, or starts a follower when none runs (or the one running is
// stopping: it is waited for). It returns nil when another invocation
// is attached to the follower or the service is closing.
func (s *Service) adopt(run string, until time.Time) *follower {
	for {
		s.mu.Lock()
		f := s.follower
		if f == nil {
			if s.ctx.Err() != nil {
				s.mu.Unlock()
				return nil
			}
			f = newFollower(s, run, until)
			s.follower = f
			s.wg.Add(1)
			s.mu.Unlock()
			go s.runFollower(f)
			return f
		}
		s.mu.Unlock()
		f.mu.Lock()
		if f.attached {
			f.mu.Unlock()
			return nil
		}
		if f.phase != followEnded && f.win.extend(until) {
			f.attached, f.run = true, run
			f.mu.Unlock()
			return f
		}
		f.mu.Unlock()
		<-f.done // stopping: its partitions are free once it returned
	}
}

// stopFollower stops a follower waiting in its grace and waits until it
// returned, so that a drain that does not follow (a manual or past-due
// run) finds its partitions free. A follower an invocation is attached to
// goes on (the drain beside it finds its partitions busy).
func (s *Service) stopFollower() {
	f := s.runningFollower()
	if f == nil {
		return
	}
	f.mu.Lock()
	attached := f.attached
	f.mu.Unlock()
	if attached {
		return
	}
	f.win.stop()
	<-f.done
}

// awaitWindow waits for the end of the invocation's window (or of the
// drain, or of ctx, which stops the drain) and reports what was mirrored
// in the window.
func (s *Service) awaitWindow(ctx context.Context, f *follower, until time.Time) (*Report, error) {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	canceled := false
	select {
	case <-f.done:
	case <-t.C:
	case <-ctx.Done():
		canceled = true
		f.win.stop()
		<-f.done
	}
	f.mu.Lock()
	f.attached = false
	var rep *Report
	var err error
	wait := handoverBacklogWait
	switch d := f.drain.Load(); {
	case f.phase == followEnded:
		rep, err = f.cut(f.final, time.Now()), f.err
		f.endReported = true
		wait = time.Second
	case d == nil:
		// Still starting (joining the group) at the window's end.
		rep = &Report{Run: f.run, Started: f.lastAt, Duration: time.Since(f.lastAt), Stopped: StopHandedOver, LagAfter: LagUnknown}
	default:
		cum := d.snapshot(ctx)
		rep = f.cut(cum, time.Now())
		switch cum.Stopped {
		case StopHandedOver:
		case StopReplanned:
			// Ended for the next drain to start: the follower goes on.
			rep.Stopped = StopHandedOver
		default:
			f.endReported = true // the drain ended meanwhile: this was its end
		}
	}
	f.mu.Unlock()
	if canceled && rep.Stopped == StopFollowed {
		rep.Stopped = StopCanceled
	}
	s.conclude(ctx, rep, err, TriggerTimer, s.limits.MaxDuration, wait)
	return rep, err
}

// cut returns the report of the window that ends now, from the drain's
// cumulative report cum, and starts the next window; f.mu is held.
func (f *follower) cut(cum *Report, now time.Time) *Report {
	rep := windowSince(cum, f.last, f.lastAt)
	if d := f.drain.Load(); d != nil {
		if h := d.winLatency.Swap(new(latencyHistogram)); h != nil {
			rep.Latency = h.summary()
		}
	}
	rep.Run = f.run
	rep.Duration = now.Sub(rep.Started)
	f.last, f.lastAt = cum, now
	return rep
}

// windowSince returns what cum, a drain's cumulative report, adds to prev,
// the same drain's report at since (nil for the drain's first window).
func windowSince(cum, prev *Report, since time.Time) *Report {
	rep := *cum
	rep.Errors = slices.Clone(cum.Errors)
	rep.Partitions = slices.Clone(cum.Partitions)
	if prev == nil {
		return &rep
	}
	rep.Started = since
	if len(prev.Errors) <= len(rep.Errors) {
		rep.Errors = rep.Errors[len(prev.Errors):]
	}
	rep.Throttled -= prev.Throttled
	rep.ThrottledWait -= prev.ThrottledWait
	rep.ReadTime = rep.ReadTime.minus(prev.ReadTime)
	rep.Outages = nil
	for _, o := range cum.Outages {
		if o.Ongoing() || o.Until.After(since) {
			rep.Outages = append(rep.Outages, o)
		}
	}
	before := make(map[TopicPartition]PartitionReport, len(prev.Partitions))
	for _, p := range prev.Partitions {
		before[TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p
	}
	rep.Records, rep.Bytes, rep.Skipped = 0, 0, 0
	for i := range rep.Partitions {
		p := &rep.Partitions[i]
		q, ok := before[TopicPartition{Topic: p.Topic, Partition: p.Partition}]
		if ok {
			p.Records -= q.Records
			p.Bytes -= q.Bytes
			p.Gap -= q.Gap
			p.AlreadyMirrored -= q.AlreadyMirrored
			if len(q.SkippedOffsets) <= len(p.SkippedOffsets) {
				p.SkippedOffsets = p.SkippedOffsets[len(q.SkippedOffsets):]
			}
			p.LagBefore = q.LagAfter
			if p.Records > 0 && q.LastOffset >= 0 {
				p.FirstOffset = q.LastOffset + 1
			}
		}
		if p.Records <= 0 {
			p.FirstOffset, p.LastOffset = -1, -1
		}
		rep.Records += p.Records
		rep.Bytes += p.Bytes
		rep.Skipped += int64(len(p.SkippedOffsets))
	}
	return &rep
}

// snapshot returns the drain's cumulative report as of now, stopped
// StopHandedOver while it runs (the ends are those the readers last saw),
// or its final report once it has one.
func (d *drain) snapshot(ctx context.Context) *Report {
	d.repMu.Lock()
	defer d.repMu.Unlock()
	if d.rep.Stopped != "" {
		rep := *d.rep
		return &rep
	}
	rep := &Report{
		Run: d.rep.Run, Started: d.rep.Started, Paused: slices.Clone(d.rep.Paused), PausedSince: d.rep.PausedSince,
		Errors: slices.Clone(d.rep.Errors), HubErrors: slices.Clone(d.rep.HubErrors), Deduplication: d.rep.Deduplication,
		Partitions: slices.Clone(d.rep.Partitions),
	}
	d.fill(ctx, rep, StopHandedOver, nil, nil)
	return rep
}
