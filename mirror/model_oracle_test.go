package mirror_test

// The oracle of the model-based test (model_test.go): the checks behind
// the invariants of docs/delivery-contract.md.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/ehmirror/ehmirror/mirror"
)

func (md *model) allowMissing(tp mirror.TopicPartition, off int64) {
	if md.missingOK[tp] == nil {
		md.missingOK[tp] = map[int64]bool{}
	}
	md.missingOK[tp][off] = true
}

func (md *model) committedNow() map[mirror.TopicPartition]int64 {
	var tps []mirror.TopicPartition
	for topic, n := range md.parts {
		for p := range n {
			tps = append(tps, mirror.TopicPartition{Topic: topic, Partition: int32(p)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := md.admin.Committed(ctx, tps)
	if err != nil {
		md.t.Fatalf("reading committed offsets: %v", err)
	}
	return got
}

// checkHealth: the status is not ok while a partition with lag makes no
// progress because it failed.
func (md *model) checkHealth(rt *rapid.T, p *modelProc, rep *mirror.Report) {
	if rep == nil {
		return
	}
	if len(rep.HubErrors) > 0 {
		if h := p.svc.Health(nil); h.OK {
			rt.Fatalf("contract status-not-ok: topics without a usable hub (%s) and the status is ok", rep.HubErrors[0].Error)
		}
	}
	for _, pr := range rep.Partitions {
		if pr.Error != "" && pr.LagAfter > 0 && pr.Records == 0 && !pr.Busy {
			if h := p.svc.Health(nil); h.OK {
				rt.Fatalf("contract status-not-ok: %s/%d failed with lag %d (%s) and the status is ok", pr.Topic, pr.Partition, pr.LagAfter, pr.Error)
			}
		}
	}
}

// committedMeta returns the group's commits with their metadata.
func (md *model) committedMeta() map[mirror.TopicPartition]mirror.CommitOffset {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = md.e.group // up to v7
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = md.e.group // v8 and later
	req.Groups = append(req.Groups, g)
	res, err := req.RequestWith(ctx, md.e.client)
	if err != nil {
		md.t.Fatalf("reading committed offsets: %v", err)
	}
	code := res.ErrorCode
	type part struct {
		p      int32
		offset int64
		meta   *string
	}
	byTopic := map[string][]part{}
	for _, t := range res.Topics {
		for _, p := range t.Partitions {
			byTopic[t.Topic] = append(byTopic[t.Topic], part{p.Partition, p.Offset, p.Metadata})
		}
	}
	for _, g := range res.Groups {
		code = g.ErrorCode
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				byTopic[t.Topic] = append(byTopic[t.Topic], part{p.Partition, p.Offset, p.Metadata})
			}
		}
	}
	out := make(map[mirror.TopicPartition]mirror.CommitOffset)
	if err := kerr.ErrorForCode(code); err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return out // nothing committed yet
		}
		md.t.Fatalf("reading committed offsets: %v", err)
	}
	for topic, parts := range byTopic {
		for _, p := range parts {
			if p.offset >= 0 {
				meta := ""
				if p.meta != nil {
					meta = *p.meta
				}
				out[mirror.TopicPartition{Topic: topic, Partition: p.p}] = mirror.CommitOffset{Offset: p.offset, Metadata: meta}
			}
		}
	}
	return out
}

var metaTopicID = regexp.MustCompile(` tid=(\S+)`)

// staleCommits returns the partitions whose commit carries the id of an
// earlier topic of the same name (a late commit of a deleted topic): not
// a position of the topic there is now.
func (md *model) staleCommits() map[mirror.TopicPartition]bool {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topics, err := md.admin.Topics(ctx)
	if err != nil {
		md.t.Fatalf("listing topics: %v", err)
	}
	ids := make(map[string]string)
	for _, t := range topics {
		ids[t.Name] = t.ID
	}
	out := make(map[mirror.TopicPartition]bool)
	for tp, c := range md.committedMeta() {
		if m := metaTopicID.FindStringSubmatch(c.Metadata); m != nil && ids[tp.Topic] != "" && m[1] != ids[tp.Topic] {
			out[tp] = true
		}
	}
	return out
}

// check is the oracle, run after every step.
func (md *model) check(rt *rapid.T) {
	stale := md.staleCommits()
	committed := md.committedNow()
	events := md.hubEvents()
	for tp, c := range committed {
		if stale[tp] {
			// The next drain starts this topic at its earliest offset and
			// replaces the commit (contract: no-loss of the new topic).
			continue
		}
		prev, seen := md.committed[tp]
		// contract commit-monotonic: a committed offset never moves
		// backwards, except by an applied reset or a recreated topic.
		if seen && c < prev && !md.reset[tp] {
			rt.Fatalf("contract commit-monotonic: %s committed %d, before %d\n%s", tp, c, prev, md.history())
		}
		md.committed[tp] = c
		md.deployed = md.deployed || c != mirror.NoOffset
		delete(md.reset, tp)
		for _, r := range md.produced[tp] {
			if r.offset >= c {
				continue
			}
			n := events[eventKey{tp, r.offset, r.value}]
			// contract no-loss: every record below a committed offset is
			// in Event Hubs, unless retention removed it first or an
			// applied reset skipped it.
			if n == 0 && !md.missingOK[tp][r.offset] {
				rt.Fatalf("contract no-loss: %s offset %d (%s) is below the committed offset %d and not in Event Hubs\n%s", tp, r.offset, r.value, c, md.history())
			}
			// contract no-duplicate: with deduplication on, no record is
			// in Event Hubs twice, except records a backward reset
			// sends again.
			if md.opts.Deduplicate && n > 1+md.copiesOK[tp][r.offset] {
				rt.Fatalf("contract no-duplicate: %s offset %d (%s) is in Event Hubs %d times\n%s", tp, r.offset, r.value, n, md.history())
			}
			// contract reset-resends: what an applied reset said it
			// sends again is sent again, whatever any process remembers.
			if want := md.resend[tp][r.offset]; want > 0 {
				if n < want {
					rt.Fatalf("contract reset-resends: %s offset %d (%s) is below the committed offset %d and in Event Hubs %d times, but a reset said it would be sent again (%d copies due)\n%s", tp, r.offset, r.value, c, n, want, md.history())
				}
				delete(md.resend[tp], r.offset)
			}
		}
	}
}

// livenessTicks bounds the scheduled invocations after which, with every
// fault over and no operator action pending, every record produced is
// mirrored and committed (contract liveness).
const livenessTicks = 4

// operatorTicks bounds the scheduled invocations within which an operator
// call to either process succeeds while nothing but the timer process's
// follower holds the group (contract operator-liveness).
const operatorTicks = 6

// settle ends a sequence: every fault over, every paused topic resumed,
// then scheduled invocations until every record is mirrored and committed
// (contract liveness); then an offset reset sent to either process while
// the follower runs (contract operator-liveness).
func (md *model) settle(rt *rapid.T) {
	md.e.emu.Faults().Reset()
	md.gate.open()
	for _, topic := range []string{"m.a", "m.b", "m.c"} {
		if md.paused[topic] {
			_, p := md.proc(rt)
			md.setPaused(rt, p, topic, false)
		}
	}
	md.logf("settle: faults over, every topic resumed")
	md.awaitLiveness(rt, "every fault ended")
	md.operatorReset(rt)
}

// awaitLiveness produces a record to every partition, waits for the
// catch-ups (no operator action pending), then runs scheduled invocations
// until every record produced is mirrored and committed: within
// livenessTicks (contract liveness).
func (md *model) awaitLiveness(rt *rapid.T, after string) {
	var recs []*kgo.Record
	for _, topic := range []string{"m.a", "m.b", "m.c"} {
		for p := range md.parts[topic] {
			md.seq++
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "v%d", md.seq)})
		}
	}
	md.produceNow(recs)
	for _, p := range md.procs {
		for { // no operator action pending
			if _, ok := p.svc.ActiveCatchUp(); !ok {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var behind []string
	for i := range livenessTicks {
		rep, err := md.runTick(1200*time.Millisecond, nil)
		md.logf("liveness tick %d: %s", i+1, summary(rep, err))
		md.check(rt)
		if behind = md.behind(); len(behind) == 0 {
			return
		}
	}
	rt.Fatalf("contract liveness: %d scheduled invocations after %s, with no operator action pending, records are not mirrored: %s\n%s", livenessTicks, after, strings.Join(behind, "; "), md.history())
}

// behind lists the partitions with records produced and neither committed
// nor allowed to be missing. Partitions left out: those of a topic without
// a hub or paused, and those the gap policy fail stops for the operator (a gap, or a
// commit past the log end: the status says so, invariant 5).
func (md *model) behind() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var tps []mirror.TopicPartition
	for tp := range md.produced {
		tps = append(tps, tp)
	}
	wms, err := md.admin.Watermarks(ctx, tps)
	if err != nil {
		md.t.Fatalf("reading watermarks: %v", err)
	}
	stale := md.staleCommits()
	committed := md.committedNow()
	var out []string
	for tp, recs := range md.produced {
		if (tp.Topic == "m.c" && !md.hubC) || md.paused[tp.Topic] {
			continue
		}
		c, wm := committed[tp], wms[tp]
		if md.opts.GapPolicy == mirror.GapFail && !stale[tp] && c != mirror.NoOffset && (c < wm.Start || c > wm.End) {
			continue
		}
		n := 0
		for _, r := range recs {
			if (stale[tp] || r.offset >= c) && !md.missingOK[tp][r.offset] && r.offset >= wm.Start {
				n++
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%s: %d records (committed %d, log %d..%d)", tp, n, c, wm.Start, wm.End))
		}
	}
	return out
}

// operatorReset sends an offset reset (to-current) to either process while
// the timer process's follower runs, ticks going on, and tries again until
// it is applied: it must be within operatorTicks invocations.
func (md *model) operatorReset(rt *rapid.T) {
	j, p := md.proc(rt)
	topic := rapid.SampledFrom([]string{"m.a", "m.b"}).Draw(rt, "reset topic")
	req := mirror.ResetRequest{Topics: []string{topic}, To: mirror.ResetToCurrent, Apply: true, By: "model"}
	type outcome struct {
		res *mirror.ResetResult
		err error
	}
	var last error
	ticks := 0
	for ticks < operatorTicks {
		done := make(chan outcome, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := p.svc.ResetOffsets(ctx, req)
			done <- outcome{res, err}
		}()
		var o outcome
	wait:
		for {
			select {
			case o = <-done:
				break wait
			default:
			}
			if ticks == operatorTicks {
				o = <-done
				break
			}
			md.runTick(1200*time.Millisecond, nil)
			ticks++
		}
		if o.err == nil {
			md.applied(rt, o.res, nil, false)
			md.logf("settle: reset %s to-current on p%d applied after %d ticks", topic, j, ticks)
			md.check(rt)
			return
		}
		if !errors.Is(o.err, mirror.ErrBusy) {
			rt.Fatalf("settle: reset %s on p%d failed: %v", topic, j, o.err)
		}
		last = o.err
	}
	rt.Fatalf("contract operator-liveness: an offset reset sent to p%d is still refused after %d scheduled invocations of p%d with nothing else holding the group: %v\n%s", j, operatorTicks, timerProc, last, md.history())
}

func (md *model) history() string {
	return "operations:\n  " + strings.Join(md.log, "\n  ")
}

// eventKey identifies a record's event: provenance and value (the
// tombstone's value travels in a header).
type eventKey struct {
	tp     mirror.TopicPartition
	offset int64
	value  string
}

// hubEvents counts every event in every hub by the record it stands for.
func (md *model) hubEvents() map[eventKey]int {
	out := map[eventKey]int{}
	for hub, n := range map[string]int{"m.a": 4, "m.b": 2, "m.c": 2} {
		for p := range n {
			for _, ev := range md.e.emu.Events(hub, p) {
				r, err := mirror.RecordFromEvent(ev.Body, ev.Properties)
				if err != nil {
					md.t.Fatalf("hub %s partition %d: %v", hub, p, err)
				}
				v := string(r.Value)
				if r.Value == nil {
					for _, h := range r.Headers {
						if h.Key == "tomb" {
							v = string(h.Value)
						}
					}
				}
				out[eventKey{mirror.TopicPartition{Topic: r.Topic, Partition: r.Partition}, r.Offset, v}]++
			}
		}
	}
	return out
}

func summary(rep *mirror.Report, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if rep == nil {
		return "no report"
	}
	return rep.Lines()[0]
}
