package mirror_test

// The oracle of the model-based test (model_test.go): the checks behind
// the invariants of docs/delivery-contract.md.

import (
	"context"
	"strings"
	"time"

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

// check is the oracle, run after every step.
func (md *model) check(rt *rapid.T) {
	committed := md.committedNow()
	events := md.hubEvents()
	for tp, c := range committed {
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
		}
	}
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
