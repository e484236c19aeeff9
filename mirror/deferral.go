package mirror

import (
	"context"
	"time"
)

// CatchUpDeferWindow is how long a catch-up leaves its partitions to the
// drains of other instances without seeing them make progress on its lag
// (see deferral). It spans several commits of a drain and a follower's
// re-plan (replanCheck, then a join and a commit).
const CatchUpDeferWindow = 5 * time.Second

// deferral is a catch-up's watch of the other instances' drains. While
// the group has members in other instances, the catch-up does not join at
// once: a join would rebalance their drains, and the follower of the
// instance that runs the timer would stop until the next tick. It defers
// to them only while they mirror its partitions, judged over windows of
// CatchUpDeferWindow: within each, the lag of its (unpaused) partitions
// fell, or the group's commits reached the log ends every lagging
// partition had at the window's start (the others keep up with what is
// produced). A window without either (a member that holds the partitions
// and mirrors nothing: a drain stuck on a hub, a killed handler's member
// waiting for its session to expire, a member holding other topics only;
// or drains falling further behind) ends the deferral: the catch-up joins
// and drains itself, and watches afresh after its drain.
type deferral struct {
	window time.Duration
	// since starts the current window, zero when none runs.
	since time.Time
	// lag is the unpaused lag at since, -1 when unknown.
	lag int64
	// ends are the log ends at since of the partitions lagging then.
	ends map[TopicPartition]int64
}

// newDeferral returns the deferral of a catch-up that lasts at most
// maxDuration, whose windows last CatchUpDeferWindow, or half of
// maxDuration when that is shorter (a catch-up keeps at least half its
// time to drain), but never less than two commits (commitEvery) of the
// drains watched, which a shorter window could not see.
func newDeferral(maxDuration, commitEvery time.Duration) *deferral {
	return &deferral{window: max(2*commitEvery, min(CatchUpDeferWindow, maxDuration/2))}
}

// start opens a window at now from lag (nil when it could not be read).
func (d *deferral) start(now time.Time, lag *LagReport) {
	d.since, d.lag, d.ends = now, -1, map[TopicPartition]int64{}
	if lag == nil {
		return
	}
	d.lag = lag.Unpaused()
	for _, p := range lag.Partitions {
		if !p.Paused && p.Lag > 0 {
			d.ends[TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.End
		}
	}
}

// reset ends the current window: the next observation opens one.
func (d *deferral) reset() { d.since = time.Time{} }

// progressed reports whether lag shows progress since the window's start:
// the lag fell, or every partition lagging then has been committed up to
// its end then (partitions paused or gone since are left out).
func (d *deferral) progressed(lag *LagReport) bool {
	if lag == nil || len(d.ends) == 0 {
		return false
	}
	if d.lag >= 0 && lag.Unpaused() < d.lag {
		return true
	}
	now := make(map[TopicPartition]PartitionLag, len(lag.Partitions))
	for _, p := range lag.Partitions {
		now[TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p
	}
	for tp, end := range d.ends {
		if p, ok := now[tp]; ok && !p.Paused && p.Committed < end {
			return false
		}
	}
	return true
}

// observe takes a measurement of the lag at now (nil when it could not be
// read) and reports whether the catch-up goes on deferring: within a
// window, yes; at its end, only when the others progressed, and a new
// window starts.
func (d *deferral) observe(now time.Time, lag *LagReport) bool {
	if d.since.IsZero() {
		d.start(now, lag)
		return true
	}
	if now.Sub(d.since) < d.window {
		return true
	}
	if !d.progressed(lag) {
		d.reset()
		return false
	}
	d.start(now, lag)
	return true
}

// watchOthers reports whether the catch-up c defers to the drains of other
// instances (see deferral): watching while the group has members in other
// instances and they progress on its partitions; caughtUp when the lag
// measured is 0 (c is then marked caught up). Neither means the catch-up
// drains itself.
func (s *Service) watchOthers(ctx context.Context, c *catchUp, req CatchUpRequest, d *deferral) (watching, caughtUp bool) {
	ctl := s.mirror.opts.Control
	if ctl == nil {
		return false, false
	}
	if n, err := ctl.OtherMembers(ctx); err != nil || n == 0 {
		d.reset()
		return false, false
	}
	lag, err := s.mirror.Lag(ctx, req.Topics)
	if err != nil {
		lag = nil
	} else {
		caughtUp = lag.Unpaused() == 0
		c.update(func(st *CatchUpStatus) {
			st.Lag = lag.Unpaused()
			if caughtUp {
				st.State, st.Ended = CatchUpCaughtUp, time.Now()
			}
		})
		if caughtUp {
			return true, true
		}
	}
	if d.observe(time.Now(), lag) {
		return true, false
	}
	s.mirror.opts.Logger.InfoContext(ctx, "catch-up: the other instances made no progress on its partitions; it joins the group and drains",
		"run", "catch-up "+c.snapshot().ID, "window", d.window.String(), "lag", c.snapshot().Lag)
	return false, false
}
