package mirror_test

// The model's deployed shape (issue 50): scheduled invocations of the timer
// process (procs[0]) in follow mode, whose drain is handed over from tick
// to tick within the grace, exactly as the handler runs them
// (Service.DrainFollowing); operator calls (reset, pause, resume,
// catch-up) through the Service API the handler uses, sent to either
// process while the timer process follows; a hub that does not answer at a
// drain's start; a topic deleted and created again with a late commit of
// the old one. model_test.go draws them; the liveness checks are in
// model_oracle_test.go.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// timerProc is the process whose schedule fires (the other one answers
// operator calls only, or runs drains the model draws).
const timerProc = 0

// runTick runs one scheduled invocation of the timer process whose follow
// window ends after window, calling during (if not nil) 200 ms into it.
func (md *model) runTick(window time.Duration, during func()) (*mirror.Report, error) {
	until := time.Now().Add(window)
	p := md.procs[timerProc]
	done := make(chan struct{})
	var rep *mirror.Report
	var err error
	go func() {
		defer close(done)
		rep, err = p.svc.DrainFollowing(context.Background(), "timer", until)
	}()
	if during != nil {
		time.Sleep(200 * time.Millisecond)
		during()
	}
	<-done
	md.tickEnd = until
	return rep, err
}

// following reports whether the timer process's drain may still run (a
// tick's window or its grace is not over).
func (md *model) following() bool {
	return time.Now().Before(md.tickEnd.Add(mirror.HandoverGrace + time.Second))
}

// produceNow produces recs and tells the oracle.
func (md *model) produceNow(recs []*kgo.Record) {
	if len(recs) == 0 {
		return
	}
	md.e.produceFresh(recs...)
	md.produced1(recs)
}

// tick is one scheduled invocation while records arrive.
func (md *model) tick(rt *rapid.T) {
	window := time.Duration(rapid.IntRange(800, 2500).Draw(rt, "window ms")) * time.Millisecond
	topic := md.topic(rt)
	recs := md.records(rt, topic, rapid.IntRange(0, 20).Draw(rt, "records during the tick"))
	rep, err := md.runTick(window, func() { md.produceNow(recs) })
	md.logf("tick %v while producing %d to %s: %s", window, len(recs), topic, summary(rep, err))
	md.checkHealth(rt, md.procs[timerProc], rep)
}

// operatorPause pauses or resumes a topic through either process's Service
// (a resume starts a catch-up there), while the timer process may follow.
func (md *model) operatorPause(rt *rapid.T) {
	topic := md.topic(rt)
	j, p := md.proc(rt)
	md.setPaused(rt, p, topic, !md.paused[topic])
	md.logf("operator p%d: %s paused=%v", j, topic, md.paused[topic])
}

func (md *model) setPaused(rt *rapid.T, p *modelProc, topic string, paused bool) {
	if _, err := p.svc.SetPaused(context.Background(), mirror.TopicSelection{Names: []string{topic}}, paused, "model", "model"); err != nil {
		rt.Fatalf("pause %s=%v: %v", topic, paused, err)
	}
	md.paused[topic] = paused
}

// pauseResumeTick pauses and resumes a topic (or resumes and pauses a
// paused one) within one scheduled invocation, each from either process,
// with records of the topic arriving after the second call.
func (md *model) pauseResumeTick(rt *rapid.T) {
	topic := md.topic(rt)
	j, first := md.proc(rt)
	k, second := md.proc(rt)
	// Drains look at the pauses every 2 s (pauseCheckInterval).
	gap := time.Duration(rapid.IntRange(0, 3000).Draw(rt, "between the calls ms")) * time.Millisecond
	recs := md.records(rt, topic, rapid.IntRange(1, 20).Draw(rt, "records after"))
	rep, err := md.runTick(gap+1500*time.Millisecond, func() {
		md.setPaused(rt, first, topic, !md.paused[topic])
		time.Sleep(gap)
		md.setPaused(rt, second, topic, !md.paused[topic])
		md.produceNow(recs)
	})
	md.logf("tick with p%d then p%d toggling the pause of %s %v apart (now paused=%v), %d records after: %s", j, k, topic, gap, md.paused[topic], len(recs), summary(rep, err))
	md.checkHealth(rt, md.procs[timerProc], rep)
	md.awaitLiveness(rt, "a pause and a resume within one period")
}

// operatorCatchUp starts a catch-up through either process's Service
// (narrowed to one topic or not) in the middle of a scheduled invocation,
// waits for it, then produces: the contract's follow liveness is that a
// catch-up never breaks a running follower, so the records produced after
// it are committed before the invocation's window is over (no waiting for
// the next tick).
func (md *model) operatorCatchUp(rt *rapid.T) {
	j, p := md.proc(rt)
	var req mirror.CatchUpRequest
	if rapid.Bool().Draw(rt, "narrowed") {
		topic := md.topic(rt)
		f := mirror.TopicFilter{Include: regexp.MustCompile("^" + regexp.QuoteMeta(topic) + "$")}
		req.Topics, req.TopicsPattern = &f, topic
	}
	topic := md.topic(rt)
	recs := md.records(rt, topic, rapid.IntRange(1, 20).Draw(rt, "records after the catch-up"))
	const window = 5500 * time.Millisecond
	var state string
	var after time.Duration
	start := time.Now()
	rep, err := md.runTick(window, func() {
		state = md.awaitCatchUp(p, req)
		after = time.Since(start)
		md.produceNow(recs)
	})
	md.logf("tick with an operator catch-up %q on p%d (%s after %v), then %d records to %s: %s", req.TopicsPattern, j, state, after.Round(time.Millisecond), len(recs), topic, summary(rep, err))
	md.checkHealth(rt, md.procs[timerProc], rep)
	if after > 4*time.Second || md.paused[topic] || (topic == "m.c" && !md.hubC) {
		return // too late in the window to tell, or nothing mirrors the topic
	}
	// contract follow-liveness: within the grace after the window, the
	// drain handed over is still at work.
	deadline := time.Now().Add(2 * time.Second)
	for {
		committed := md.committedNow()
		behind := 0
		for _, r := range recs {
			if committed[mirror.TopicPartition{Topic: r.Topic, Partition: r.Partition}] <= r.Offset {
				behind++
			}
		}
		if behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("contract follow-liveness: %d of %d records produced to %s after a catch-up on p%d ended are not committed %v after the follower's window ended\n%s", behind, len(recs), topic, j, 2*time.Second, md.history())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitCatchUp starts a catch-up on p (or finds the one running) and waits
// for its end; it returns its state.
func (md *model) awaitCatchUp(p *modelProc, req mirror.CatchUpRequest) string {
	req.MaxDuration = 10 * time.Second
	st, _, err := p.svc.StartCatchUp(req)
	if err != nil {
		return "refused: " + err.Error()
	}
	for st.State == mirror.CatchUpRunning {
		time.Sleep(50 * time.Millisecond)
		st, _ = p.svc.CatchUp(st.ID)
	}
	return st.State
}

// hubSilentAtStart (deduplication on): one hub does not answer reads of its
// partitions' properties for a while as a scheduled invocation starts (or
// adopts) the drain, while another topic's records keep the drain busy.
func (md *model) hubSilentAtStart(rt *rapid.T) {
	if !md.opts.Deduplicate {
		return
	}
	silent := rapid.SampledFrom([]string{"m.a", "m.b"}).Draw(rt, "silent hub")
	other := map[string]string{"m.a": "m.b", "m.b": "m.a"}[silent]
	d := time.Duration(rapid.IntRange(1000, 4000).Draw(rt, "silent for ms")) * time.Millisecond
	if md.following() {
		// A manual run: the drain handed over stops, so that the tick
		// starts one.
		rep, err := md.procs[timerProc].svc.Drain(context.Background(), "model-manual")
		md.logf("manual run p%d: %s", timerProc, summary(rep, err))
	}
	recs := append(md.records(rt, silent, rapid.IntRange(1, 20).Draw(rt, "records of the silent hub's topic")),
		md.records(rt, other, rapid.IntRange(1, 20).Draw(rt, "records of the other topic"))...)
	start := time.Now()
	md.e.emu.Faults().FailPartitionReads(silent, d)
	rep, err := md.runTick(2*time.Second, func() { md.produceNow(recs) })
	md.logf("hub %s silent for %v at a tick, %d records to it and %s: %s", silent, d, len(recs), other, summary(rep, err))
	time.Sleep(time.Until(start.Add(d))) // the fault is over
	md.awaitLiveness(rt, "a hub answered again")
}

// recreateLate deletes m.b and creates it again, produces to the new
// partition 0, then lands the old topic's last commit on it late (a
// process of the old topic that committed after the deletion).
func (md *model) recreateLate(rt *rapid.T) {
	tp := mirror.TopicPartition{Topic: "m.b", Partition: 0}
	old := md.committedMeta()[tp]
	md.recreate(rt)
	n := rapid.IntRange(0, 40).Draw(rt, "records to the new partition 0")
	var recs []*kgo.Record
	for range n {
		md.seq++
		recs = append(recs, &kgo.Record{Topic: "m.b", Partition: 0, Value: fmt.Appendf(nil, "v%d", md.seq)})
	}
	md.produceNow(recs)
	if old.Offset <= 0 || old.Metadata == "" {
		md.logf("m.b recreated with %d records, no late commit (the old topic had none)", n)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The late commit comes from a mirror process, whose claims subscribe
	// to every mirrored topic (invariant 8): a claim of m.b alone would
	// let Kafka's expiry (the model's expire) take the others' offsets.
	claim, err := md.admin.Claim(ctx, []string{"m.a", "m.b", "m.c"})
	if err == nil {
		err = claim.CommitWithMetadata(ctx, map[mirror.TopicPartition]mirror.CommitOffset{tp: old})
		_ = claim.Release(ctx)
	}
	md.logf("m.b recreated with %d records, late commit of the old topic's %d (%s): %v", n, old.Offset, old.Metadata, err)
	if rapid.Bool().Draw(rt, "reset the new topic at once") {
		md.resetTopic(rt, "m.b")
	}
}

// ackedThenReset (deduplication off): process A drains briefly while Event
// Hubs refuses half the sends, so that its drain may end with records
// acknowledged above its commit, which A remembers (acked.go); process B
// mirrors them; an operator resets the partition on B to A's commit (the
// reset says those records are sent again); then A drains.
func (md *model) ackedThenReset(rt *rapid.T) {
	if md.opts.Deduplicate {
		return
	}
	ia := rapid.IntRange(0, 1).Draw(rt, "process A")
	a, b := md.procs[ia], md.procs[1-ia]
	topic := rapid.SampledFrom([]string{"m.a", "m.b"}).Draw(rt, "topic")
	md.produceNow(md.records(rt, topic, rapid.IntRange(10, 60).Draw(rt, "records")))
	md.e.emu.Faults().RejectFraction(0.5, emulator.ConditionServerBusy)
	repA, errA := a.m.Drain(context.Background(), "model-refused", mirror.Limits{MaxDuration: time.Second})
	md.e.emu.Faults().Reset()
	at := md.committedNow()
	repB, errB := b.svc.Drain(context.Background(), "model-other")
	md.logf("refused sends, drain p%d: %s; drain p%d: %s", ia, summary(repA, errA), 1-ia, summary(repB, errB))
	now := md.committedNow()
	for p := range md.parts[topic] {
		tp := mirror.TopicPartition{Topic: topic, Partition: int32(p)}
		if at[tp] < 0 || now[tp] <= at[tp] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := mirror.ResetRequest{Topics: []string{topic}, Partitions: []int32{int32(p)}, To: mirror.ResetOffset, Offset: at[tp], By: "model"}
		dry, err := b.svc.ResetOffsets(ctx, req)
		if err == nil {
			quiet := !md.following() && !md.catchingUp()
			req.Apply = true
			var res *mirror.ResetResult
			if res, err = b.svc.ResetOffsets(ctx, req); err == nil {
				md.applied(rt, res, dry, quiet)
			}
		}
		md.logf("reset %s on p%d to p%d's commit %d: %v", tp, 1-ia, ia, at[tp], err)
		break
	}
	rep, err := a.svc.Drain(context.Background(), "model-after-reset")
	md.logf("drain p%d: %s", ia, summary(rep, err))
}

// resetOffsets plans a reset through either process's Service, then
// applies it (contract reset-dry-run when nothing ran in between), and
// records what the applied reset promised: records it skips may be
// missing, records it sends again must be in Event Hubs once more
// (contract reset-resends).
func (md *model) resetOffsets(rt *rapid.T) { md.resetTopic(rt, md.topic(rt)) }

func (md *model) resetTopic(rt *rapid.T, topic string) {
	req := mirror.ResetRequest{Topics: []string{topic}, By: "model"}
	req.To = rapid.SampledFrom([]string{mirror.ResetEarliest, mirror.ResetLatest, mirror.ResetOffset, mirror.ResetToCurrent, mirror.ResetShiftBy}).Draw(rt, "to")
	switch req.To {
	case mirror.ResetOffset:
		req.Partitions = []int32{0}
		req.Offset = int64(rapid.IntRange(0, len(md.produced[mirror.TopicPartition{Topic: topic}])).Draw(rt, "offset"))
	case mirror.ResetShiftBy:
		req.Shift = int64(rapid.SampledFrom([]int{-30, -5, 5}).Draw(rt, "shift"))
	}
	j, p := md.proc(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dry, err := p.svc.ResetOffsets(ctx, req)
	if err != nil {
		md.logf("reset %s to %s on p%d: dry run refused: %v", topic, req.To, j, err)
		return
	}
	quiet := !md.following() && !md.catchingUp()
	req.Apply = true
	res, err := p.svc.ResetOffsets(ctx, req)
	if errors.Is(err, mirror.ErrBusy) {
		md.logf("reset %s to %s on p%d: busy: %v", topic, req.To, j, err)
		return
	}
	if err != nil {
		var ie *mirror.InputError
		if errors.As(err, &ie) {
			md.logf("reset %s on p%d: %v", topic, j, err)
			return
		}
		rt.Fatalf("reset %s to %s on p%d failed: %v", topic, req.To, j, err)
	}
	md.applied(rt, res, dry, quiet)
	md.logf("reset %s to %s on p%d applied: %+v", topic, req.To, j, res.Partitions)
}

// applied tells the oracle what an applied reset res promised; with quiet
// (nothing could move the offsets since the dry run), it must be dry.
func (md *model) applied(rt *rapid.T, res, dry *mirror.ResetResult, quiet bool) {
	if quiet && dry != nil {
		// The contract: a dry run equals the applied effect (nothing
		// changed in between).
		if len(dry.Partitions) != len(res.Partitions) {
			rt.Fatalf("contract reset-dry-run: dry run %+v, applied %+v\n%s", dry.Partitions, res.Partitions, md.history())
		}
		for k, d := range dry.Partitions {
			a := res.Partitions[k]
			if d.Before != a.Before || d.From != a.From || d.After != a.After || d.Skipped != a.Skipped || d.Resent != a.Resent {
				rt.Fatalf("contract reset-dry-run: dry run %+v, applied %+v\n%s", d, a, md.history())
			}
		}
	}
	events := md.hubEvents()
	for _, a := range res.Partitions {
		tp := mirror.TopicPartition{Topic: a.Topic, Partition: a.Partition}
		for off := a.From; off < a.After; off++ {
			md.allowMissing(tp, off)
			delete(md.resend[tp], off)
		}
		for _, r := range md.produced[tp] {
			if r.offset < a.After || r.offset >= a.From {
				continue
			}
			if md.copiesOK[tp] == nil {
				md.copiesOK[tp] = map[int64]int{}
			}
			md.copiesOK[tp][r.offset]++
			if md.resend[tp] == nil {
				md.resend[tp] = map[int64]int{}
			}
			md.resend[tp][r.offset] = max(md.resend[tp][r.offset], events[eventKey{tp, r.offset, r.value}]+1)
		}
		md.reset[tp] = true
	}
}

// catchingUp reports whether a catch-up runs in either process.
func (md *model) catchingUp() bool {
	for _, p := range md.procs {
		if _, ok := p.svc.ActiveCatchUp(); ok {
			return true
		}
	}
	return false
}
