package mirror

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
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

// follower is a following drain handed over from invocation to invocation.
type follower struct {
	win   *followWindow
	done  chan struct{} // closed once the drain returned
	drain atomic.Pointer[drain]

	mu sync.Mutex
	// run names the invocation the drain works for now (or last did).
	run string
	// attached is set while an invocation waits for its window's end.
	attached bool
	// ended is set when the drain returned, with its report and error.
	ended bool
	final *Report
	err   error
	// endReported is set when an invocation's window report already
	// told how the drain ended: there is no tail to log.
	endReported bool
	// last is the drain's cumulative report at the end of the last
	// window, nil before; lastAt is when it was taken.
	last   *Report
	lastAt time.Time
}

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
	s.mu.Lock()
	f := s.follower
	s.mu.Unlock()
	if d := f.running(); d != nil && !d.current(ctx) {
		// A drain mirrors the topics, pauses and hubs it found when it
		// started: after a change, a new drain takes over.
		s.mirror.opts.Logger.InfoContext(ctx, "topics, pauses or hubs changed: the drain handed over stops and a new one starts", "run", run)
		s.stopFollower()
	}
	var earlier []string
	for rejoins := 0; ; rejoins++ {
		f := s.adopt(run, until)
		if f == nil {
			// Another invocation follows (not with a singleton timer), or
			// the service is closing: a drain beside it, as before handover.
			lim := s.limits
			lim.FollowUntil = until
			return s.drain(ctx, run, TriggerTimer, lim)
		}
		rep, err := s.awaitWindow(ctx, f, until)
		if err != nil || rejoins == maxRejoins || !s.rejoin(ctx, rep, until) {
			if len(earlier) > 0 {
				out := *rep
				out.Errors = append(earlier, rep.Errors...)
				rep = &out
			}
			return rep, err
		}
		if rep.Failed() {
			for _, l := range rep.Lines()[1:] {
				earlier = append(earlier, "drain before the rejoin: "+l)
			}
		}
	}
}

// maxRejoins bounds the drains an invocation starts again after its claim
// was lost (see rejoin).
const maxRejoins = 3

// minRejoinWindow: a window with less left is not worth joining again.
const minRejoinWindow = 2 * time.Second

// rejoin reports whether an invocation whose drain rep ended early because
// the group took its claim away starts another for the rest of its window
// (until), rather than leaving the records to the next tick: only when
// the group has no member besides this process, so the claim was lost to
// the process's own timeouts (heartbeats late under load) and not to
// another instance, which a join would take partitions from again.
func (s *Service) rejoin(ctx context.Context, rep *Report, until time.Time) bool {
	if rep.Stopped != StopRebalanced || ctx.Err() != nil || time.Until(until) < minRejoinWindow {
		return false
	}
	c := s.mirror.opts.Control
	if c == nil {
		return false
	}
	n, err := c.OtherMembers(ctx)
	if err != nil || n > 0 {
		return false
	}
	s.mirror.opts.Logger.InfoContext(ctx, "drain rejoining the group for the rest of its window", "run", rep.Run, "window_left_ms", time.Until(until).Milliseconds())
	return true
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
			f = &follower{win: newFollowWindow(until, HandoverGrace), done: make(chan struct{}), run: run, attached: true, lastAt: time.Now()}
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
		if !f.ended && f.win.extend(until) {
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
func (s *Service) stopFollower() { s.endFollower(false) }

// haltFollower stops the follower, also one an invocation is attached to
// (that invocation reports the drain's end at once), and waits until it
// returned. It reports whether there was one.
func (s *Service) haltFollower() bool { return s.endFollower(true) }

// endFollower stops the follower and waits until it returned, unless an
// invocation is attached to it and evenAttached is false. It reports
// whether it stopped one.
func (s *Service) endFollower(evenAttached bool) bool {
	s.mu.Lock()
	f := s.follower
	s.mu.Unlock()
	if f == nil {
		return false
	}
	f.mu.Lock()
	attached := f.attached
	f.mu.Unlock()
	if attached && !evenAttached {
		return false
	}
	f.win.stop()
	<-f.done
	return true
}

// runFollower runs f's drain until its window and grace are over, it is
// stopped, or it ends on its own (rebalance, failure). What it mirrored
// after the last window that no invocation reported is logged as a report
// of its own.
func (s *Service) runFollower(f *follower) {
	defer s.wg.Done()
	lim := s.limits
	lim.window = f.win
	lim.started = func(d *drain) { f.drain.Store(d) }
	f.mu.Lock()
	run := f.run
	f.mu.Unlock()
	rep, err := s.mirror.Drain(s.ctx, run, lim)
	f.win.stop()

	f.mu.Lock()
	f.ended, f.final, f.err = true, rep, err
	var tail *Report
	if !f.attached && !f.endReported {
		tail = f.cut(rep, time.Now())
	}
	f.mu.Unlock()
	s.mu.Lock()
	if s.follower == f {
		s.follower = nil
	}
	s.mu.Unlock()
	close(f.done)
	if tail != nil {
		s.conclude(context.Background(), tail, err, TriggerTimer, s.limits.MaxDuration, time.Second)
	}
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
	case f.ended:
		rep, err = f.cut(f.final, time.Now()), f.err
		f.endReported = true
		wait = time.Second
	case d == nil:
		// Still starting (joining the group) at the window's end.
		rep = &Report{Run: f.run, Started: f.lastAt, Duration: time.Since(f.lastAt), Stopped: StopHandedOver, LagAfter: LagUnknown}
	default:
		cum := d.snapshot(ctx)
		rep = f.cut(cum, time.Now())
		if cum.Stopped != StopHandedOver {
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

// running returns f's drain, nil when f is nil or its drain has not started.
func (f *follower) running() *drain {
	if f == nil {
		return nil
	}
	return f.drain.Load()
}

// current reports whether the drain still mirrors what a drain starting
// now would: it got every partition it was given (none was busy), and it
// has the same subscription and topics (names, ids, partition counts), the
// same topics paused, and no topic left out for its hub whose hub can now
// be used. When Kafka cannot tell, it is current (the drain
// reports the failures).
func (d *drain) current(ctx context.Context) bool {
	d.repMu.Lock()
	busy := d.rep.Stopped != ""
	for _, p := range d.rep.Partitions {
		// Held by a catch-up when the drain started: a new drain takes
		// them once they are free.
		busy = busy || p.Busy
	}
	d.repMu.Unlock()
	if busy {
		return false
	}
	m := d.m
	mirrored, err := m.selectTopics(ctx, nil)
	if err != nil || !sameTopics(mirrored, d.mirrored) {
		return err != nil
	}
	topics, _, _, err := m.dropPaused(ctx, narrowed(mirrored, d.lim.Topics))
	if err != nil || !sameTopics(topics, d.topics) {
		return err != nil
	}
	for _, he := range d.rep.HubErrors {
		if hub, err := m.sink.Hub(ctx, he.Hub); err == nil && len(hub.PartitionIDs) > 0 {
			return false
		}
	}
	return true
}

// sameTopics reports whether a and b hold the same topics, in any order.
func sameTopics(a, b []Topic) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]Topic, len(a))
	for _, t := range a {
		in[t.Name] = t
	}
	for _, t := range b {
		if in[t.Name] != t {
			return false
		}
	}
	return true
}
