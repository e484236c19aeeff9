package mirror

import (
	"context"
	"fmt"
	"time"
)

// pauseCheckInterval is how often a running drain reads the pause records,
// so a pause takes effect within seconds in every instance.
const pauseCheckInterval = 2 * time.Second

// checkPauses stops reading the partitions of topics paused since the drain
// started. Their records already read are still sent and committed; then
// the partitions are handed back (handBackPaused). A failed read is retried
// at the next check.
func (d *drain) checkPauses(ctx context.Context) {
	if d.m.opts.Control == nil {
		return
	}
	states, err := d.m.pauseStates(ctx, topicNames(d.topics))
	if err != nil {
		d.logger.DebugContext(ctx, "reading pauses during a drain", "err", err)
		return
	}
	for _, ps := range d.order {
		r := states[ps.tp.Topic].newest()
		if r == nil || !r.Paused || !ps.pauseNow(fmt.Sprintf("paused during the drain by %s at %s; what was read before is sent and committed", r.By, r.At.Format(time.RFC3339))) {
			continue
		}
		d.logger.InfoContext(ctx, "topic paused during the drain; its partition stops", "topic", ps.tp.Topic, "partition", ps.tp.Partition, "by", r.By)
	}
	d.commitMu.Lock()
	d.handBackPausedLocked()
	d.commitMu.Unlock()
}

// handBackPausedLocked releases, after a commit, the partitions paused
// during the drain whose records are all acknowledged and committed: an
// offset reset of the paused topic, or another drain, may take them now,
// and this drain never commits them again. commitMu must be held.
func (d *drain) handBackPausedLocked() {
	for _, ps := range d.order {
		if d.released[ps.tp] || !ps.isPausedNow() || !ps.settled() {
			continue
		}
		d.released[ps.tp] = true
		d.m.release([]TopicPartition{ps.tp})
	}
}

// stillHeld returns the partitions of got the drain did not hand back
// early; all of got when the drain never started.
func (d *drain) stillHeld(got []TopicPartition) []TopicPartition {
	if d == nil {
		return got
	}
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	var out []TopicPartition
	for _, tp := range got {
		if !d.released[tp] {
			out = append(out, tp)
		}
	}
	return out
}

// pauseNow stops reading the partition because its topic was paused; it
// reports whether it was not paused before.
func (p *partitionState) pauseNow(note string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pausedNow {
		return false
	}
	p.pausedNow = true
	p.note = note
	return true
}

func (p *partitionState) isPausedNow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pausedNow
}

// settled reports whether every record handed over is done and the commit
// point is committed.
func (p *partitionState) settled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.pending[p.head:] {
		if !r.done() {
			return false
		}
	}
	return min(p.next, p.verified) <= p.committed || (p.failed.Load() && p.head == len(p.pending))
}

// resumedCatchUp is the catch-up a resume starts: narrowed to the resumed
// topics, so their backlog is mirrored now rather than at the next tick.
func resumedCatchUp(names []string) (CatchUpRequest, error) {
	sel := TopicSelection{Names: names}
	f, err := sel.Filter()
	if err != nil {
		return CatchUpRequest{}, err
	}
	return CatchUpRequest{Topics: &f, TopicsPattern: sel.String()}, nil
}

// SetPaused pauses or resumes the topics sel names, for every instance. A
// pause takes effect in running drains within about pauseCheckInterval (in
// every instance: they read the records): they stop reading the topic,
// send and commit what they read, and hand its partitions back. A resume
// is taken by the following drain, which re-plans and takes the resumed
// topics back (at once in this process; within a check, replanCheck, in
// the instance that runs the timer); without a follower here, it starts a
// catch-up narrowed to the resumed topics when none is running, so their
// backlog is mirrored at once instead of at the next tick (in another
// instance's follower's presence, the catch-up watches it while it makes
// progress: see deferral).
func (s *Service) SetPaused(ctx context.Context, sel TopicSelection, paused bool, by, reason string) ([]Pause, error) {
	ps, err := s.mirror.SetPausedTopics(ctx, sel, paused, by, reason)
	if err != nil || paused || len(ps) == 0 {
		return ps, err
	}
	if f := s.runningFollower(); f != nil {
		f.poke()
		return ps, nil
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Topic
	}
	req, err := resumedCatchUp(names)
	if err != nil {
		return ps, nil
	}
	if st, started, err := s.StartCatchUp(req); err == nil && started {
		s.mirror.opts.Logger.InfoContext(ctx, "resume: catch-up started for the resumed topics", "topics", req.TopicsPattern, "catchup", st.ID)
	}
	return ps, nil
}
