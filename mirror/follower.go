package mirror

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the home of a follower: the one following drain of a
// Service in follow mode, handed over from invocation to invocation. Its
// life is here; the invocations that start, adopt and stop it, and their
// window reports, are in handover.go.
//
// What it holds: the partitions its current drain got from the group (the
// drain's claim, shared with the process's membership). What it was
// started with: the topics, pauses and hubs the drain found at its start,
// and the partitions that failed there. What it must re-plan, checked every
// replanCheck while the drain runs (follower.watch): a topic resumed (also
// one paused and resumed while the drain ran), topics or partitions added,
// deleted or re-created, a hub that can be used now, partitions another
// drain of this process held at the start and let go of since, partitions
// failed for a cause that may pass (again after a backoff), and operator
// resets to apply (sent to this instance, or to another one through the
// control records: resetrequest.go). A re-plan ends the drain (it sends and
// commits what it read, stopped "re-planned") and starts the next one in
// the same window, after applying the resets; so does a claim lost while
// the group has no other member. When it hands over: at each window's end
// it goes on for HandoverGrace, for the next invocation to adopt it
// (extending the window); without one it stops and commits.
//
// Its phases: starting (the drain joins the group and prepares),
// following, re-planning (the drain ends for the next to start), ended.

// followPhase is where a follower is in its life.
type followPhase string

// The phases of a follower.
const (
	followStarting   followPhase = "starting"
	followFollowing  followPhase = "following"
	followReplanning followPhase = "re-planning"
	followEnded      followPhase = "ended"
)

// StopReplanned: a follower's drain ended within its window for the next
// drain to start from what holds now (a topic resumed, partitions to try
// again, an offset reset to apply); the follower goes on.
const StopReplanned = "re-planned"

// replanCheck is how often a follower checks whether it must re-plan
// (the pause records are read as often: pauseCheckInterval).
const replanCheck = 2 * time.Second

// Backoff of the re-plans that try failed partitions again.
const (
	replanRetryFirst = time.Second
	replanRetryMax   = time.Minute
)

// maxRejoins bounds the drains a follower starts again in a row after its
// claim was lost (see rejoin).
const maxRejoins = 3

// minRejoinWindow: a window with less left is not worth joining again.
const minRejoinWindow = 2 * time.Second

// errFollowerEnded: the follower ended before it applied a reset handed to
// it; the partitions are free for the reset to be applied as usual (an
// instance that handed it over through the control records answers busy).
var errFollowerEnded = fmt.Errorf("%w: the following drain ended before it applied the reset; try again", ErrBusy)

// follower is a following drain handed over from invocation to invocation,
// restarted within its window when it must re-plan.
type follower struct {
	s     *Service
	win   *followWindow
	done  chan struct{} // closed once the follower ended
	drain atomic.Pointer[drain]
	// wake asks the watch for a re-plan check now (a reset was handed
	// over); buffered, so a request made while a drain starts is kept.
	wake chan struct{}

	mu    sync.Mutex
	phase followPhase
	// why is the cause of the last re-plan.
	why string
	// resets wait to be applied between two drains.
	resets []*heldReset
	// retry is the backoff of the next re-plan for failed partitions, due
	// at retryAt (zero: not yet noticed).
	retry   time.Duration
	retryAt time.Time

	// run names the invocation the drain works for now (or last did).
	run string
	// attached is set while an invocation waits for its window's end.
	attached bool
	// final and err are the last drain's report and error, once the
	// follower ended (phase followEnded).
	final *Report
	err   error
	// endReported is set when an invocation's window report already
	// told how the drain ended: there is no tail to log.
	endReported bool
	// last is the current drain's cumulative report at the end of the
	// last window (nil before, and for a drain started since); lastAt is
	// when the last window (or part of one) ended.
	last   *Report
	lastAt time.Time
}

// heldReset is an operator's reset handed to the follower, applied between
// two of its drains; answer gets the outcome.
type heldReset struct {
	req    ResetRequest
	answer func(*ResetResult, error)
}

// newFollower returns a follower for the invocation run whose window ends
// at until; runFollower starts it.
func newFollower(s *Service, run string, until time.Time) *follower {
	return &follower{
		s: s, win: newFollowWindow(until, HandoverGrace), done: make(chan struct{}), wake: make(chan struct{}, 1),
		phase: followStarting, retry: replanRetryFirst,
		run: run, attached: true, lastAt: time.Now(),
	}
}

// setPhase moves the follower to phase, for cause (a re-plan's).
func (f *follower) setPhase(phase followPhase, cause string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.phase = phase
	if cause != "" {
		f.why = cause
	}
}

// runningFollower returns the service's follower, nil when none runs.
func (s *Service) runningFollower() *follower {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.follower
}

// runFollower runs f's drains until its window and grace are over, it is
// stopped, or its drain ends on its own (failure, a claim lost to another
// instance); a drain that ends to re-plan, or whose claim was lost while
// the group has no other member, is followed by the next at once, after
// the resets handed over are applied. What it mirrored after the last
// window that no invocation reported is logged as a report of its own.
func (s *Service) runFollower(f *follower) {
	defer s.wg.Done()
	var rep *Report
	var err error
	rejoins := 0
	for {
		f.setPhase(followStarting, "")
		watchCtx, stopWatch := context.WithCancel(s.ctx)
		lim := s.limits
		lim.window = f.win
		lim.started = func(d *drain) {
			f.drain.Store(d)
			f.setPhase(followFollowing, "")
			go f.watch(watchCtx, d)
		}
		f.mu.Lock()
		run := f.run
		f.mu.Unlock()
		began := time.Now()
		rep, err = s.mirror.Drain(s.ctx, run, lim)
		stopWatch()
		if time.Since(began) > 10*time.Second {
			rejoins = 0
		}
		again := err == nil && !f.win.over() && s.ctx.Err() == nil
		switch {
		case !again:
		case rep.Stopped == StopReplanned:
		case rep.Stopped == StopRebalanced && rejoins < maxRejoins && s.rejoin(s.ctx, f, rep):
			rejoins++
		default:
			again = false
		}
		if !again {
			break
		}
		f.endPart(rep)
		f.applyResets(s.ctx)
	}
	f.win.stop()

	f.mu.Lock()
	f.phase, f.final, f.err = followEnded, rep, err
	var tail *Report
	if !f.attached && !f.endReported {
		tail = f.cut(rep, time.Now())
	}
	f.mu.Unlock()
	// Resets taken before the end are applied still: the drain has let go
	// of the partitions, and the process's membership stays a while.
	f.applyResets(s.ctx)
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

// endPart records the part of the window a drain that ended mid-window
// mirrored (since the last window's end) as a report of its own: the next
// drain's records are the invocation's.
func (f *follower) endPart(rep *Report) {
	f.mu.Lock()
	part := f.cut(rep, time.Now())
	f.last, f.endReported = nil, false
	f.drain.Store(nil)
	f.mu.Unlock()
	f.s.conclude(context.Background(), part, nil, TriggerTimer, f.s.limits.MaxDuration, handoverBacklogWait)
}

// rejoin reports whether a follower whose drain rep ended early because
// the group took its claim away starts another for the rest of its window,
// rather than leaving the records to the next tick: only when the group
// has no member besides this process, so the claim was lost to the
// process's own timeouts (heartbeats late under load) and not to another
// instance, which a join would take partitions from again.
func (s *Service) rejoin(ctx context.Context, f *follower, rep *Report) bool {
	if rep.Stopped != StopRebalanced || ctx.Err() != nil || time.Until(f.win.windowEnd()) < minRejoinWindow {
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
	s.mirror.opts.Logger.InfoContext(ctx, "drain rejoining the group for the rest of its window", "run", rep.Run, "window_left_ms", time.Until(f.win.windowEnd()).Milliseconds())
	return true
}

// watch checks every replanCheck, while d runs, whether the follower must
// re-plan, and then ends d (StopReplanned).
func (f *follower) watch(ctx context.Context, d *drain) {
	t := time.NewTicker(replanCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.stoppedCh:
			return
		case <-f.wake:
		case <-t.C:
		}
		if why := f.replanCause(ctx, d); why != "" {
			f.setPhase(followReplanning, why)
			d.logger.InfoContext(ctx, "the following drain re-plans: it ends, and the next starts from what holds now", "why", why)
			d.stop(StopReplanned)
			return
		}
	}
}

// replanCause says why the follower must re-plan now, "" when it need not.
func (f *follower) replanCause(ctx context.Context, d *drain) string {
	f.mu.Lock()
	resets := len(f.resets)
	f.mu.Unlock()
	switch {
	case resets > 0:
		return "an offset reset to apply"
	case f.takeResetRequests(ctx, d):
		return "an offset reset sent to another instance"
	}
	if why := d.stale(ctx); why != "" {
		return why
	}
	return f.retryDue(d)
}

// stale says what no longer holds of what d was started with, "" when a
// drain starting now would mirror what d does. When Kafka cannot tell,
// nothing (the drain reports the failures). A topic paused since the start
// is not a cause: the drain hands its partitions back itself.
func (d *drain) stale(ctx context.Context) string {
	var busy []TopicPartition
	d.repMu.Lock()
	for _, p := range d.rep.Partitions {
		if p.Busy {
			busy = append(busy, TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
	}
	d.repMu.Unlock()
	if free := d.m.free(busy); len(free) > 0 {
		return fmt.Sprintf("%s, held by another drain of this process at the start, are free", tpList(free))
	}
	m := d.m
	mirrored, err := m.selectTopics(ctx, nil)
	if err != nil {
		return ""
	}
	if !sameTopics(mirrored, d.mirrored) {
		return "the mirrored topics changed (added, deleted, re-created or given partitions)"
	}
	topics, _, _, err := m.dropPaused(ctx, narrowed(mirrored, d.lim.Topics))
	if err != nil {
		return ""
	}
	reading := make(map[string]bool, len(d.topics))
	for _, t := range d.topics {
		reading[t.Name] = true
	}
	unpaused := make(map[string]bool, len(topics))
	for _, t := range topics {
		if !reading[t.Name] {
			return fmt.Sprintf("topic %q is to be mirrored (resumed)", t.Name)
		}
		unpaused[t.Name] = true
	}
	for _, ps := range d.order {
		if ps.isPausedNow() && unpaused[ps.tp.Topic] {
			return fmt.Sprintf("topic %q, paused during the drain, was resumed", ps.tp.Topic)
		}
	}
	d.repMu.Lock()
	hubErrors := append([]HubError(nil), d.rep.HubErrors...)
	d.repMu.Unlock()
	for _, he := range hubErrors {
		if hub, err := m.sink.Hub(ctx, he.Hub); err == nil && len(hub.PartitionIDs) > 0 {
			return fmt.Sprintf("event hub %q can be used now", he.Hub)
		}
	}
	return ""
}

// retryDue returns a cause when partitions of d failed for a cause that
// may pass (not a gap, an oversized record or a re-created topic: those
// wait for the operator) and their backoff is over; the backoff doubles
// with each retry, up to replanRetryMax, and starts over once a drain has
// none.
func (f *follower) retryDue(d *drain) string {
	var failed []string
	for _, ps := range d.order {
		if ps.mayPass() {
			failed = append(failed, ps.tp.String())
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	switch {
	case len(failed) == 0:
		f.retry, f.retryAt = replanRetryFirst, time.Time{}
		return ""
	case f.retryAt.IsZero():
		f.retryAt = now.Add(f.retry)
		return ""
	case now.Before(f.retryAt):
		return ""
	}
	f.retryAt = time.Time{}
	f.retry = min(2*f.retry, replanRetryMax)
	if len(failed) > 5 {
		failed = append(failed[:5], "…")
	}
	return fmt.Sprintf("partitions failed for a cause that may pass are tried again (%s)", strings.Join(failed, ", "))
}

// mayPass reports whether the partition failed for a cause that may pass
// by itself.
func (p *partitionState) mayPass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.failed.Load() || p.pausedNow {
		return false
	}
	switch partitionKind(p) {
	case KindGap, KindOversized, KindRecreated:
		return false
	}
	return true
}

// free returns the partitions of tps no drain of this process holds.
func (m *Mirror) free(tps []TopicPartition) []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []TopicPartition
	for _, tp := range tps {
		if _, held := m.held[tp]; !held {
			out = append(out, tp)
		}
	}
	return out
}

// reset applies an operator's reset through the follower: its drain ends
// (it sends and commits what it read and lets go of its partitions), the
// reset is applied, and the next drain starts from the reset positions. It
// returns errFollowerEnded when the follower ended first.
func (f *follower) reset(ctx context.Context, req ResetRequest) (*ResetResult, error) {
	type outcome struct {
		res *ResetResult
		err error
	}
	out := make(chan outcome, 1)
	f.mu.Lock()
	if f.phase == followEnded {
		f.mu.Unlock()
		return nil, errFollowerEnded
	}
	f.resets = append(f.resets, &heldReset{req: req, answer: func(res *ResetResult, err error) { out <- outcome{res, err} }})
	f.mu.Unlock()
	f.poke()
	select {
	case o := <-out:
		return o.res, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// poke asks the watch for a re-plan check now.
func (f *follower) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// applyResets applies, between two drains (or after the last), the resets
// handed to the follower: this process's member holds the group's
// partitions, so the reset's claim shares its generation (no other
// instance is rebalanced).
func (f *follower) applyResets(ctx context.Context) {
	f.mu.Lock()
	resets := f.resets
	f.resets = nil
	f.mu.Unlock()
	for _, r := range resets {
		res, err := f.s.mirror.resetOffsets(ctx, r.req, -1)
		if err == nil {
			f.s.mirror.opts.Logger.InfoContext(ctx, "offset reset applied by the following drain between two of its drains", "by", r.req.By, "partitions", len(res.Partitions))
		}
		r.answer(res, err)
	}
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
