package faults

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// Scenario 7: records Event Hubs cannot take (larger than the hub's maximum
// message size) under MIRROR_OVERSIZE_POLICY fail and skip, and a topic
// routed to an event hub that does not exist.

const (
	// hubMaxMessage is the small maximum message size of scenario 7's hubs.
	hubMaxMessage = 8 << 10
	// oversizedValue is the value size of an oversized record.
	oversizedValue = 12 << 10
)

// oversizeEvery makes every 37th record of topics (all when empty)
// oversized.
func oversizeEvery(topics ...string) func(seq int64, r *kgo.Record) {
	return func(seq int64, r *kgo.Record) {
		if seq%37 != 11 || (len(topics) > 0 && !containsString(topics, r.Topic)) {
			return
		}
		r.Value = append(r.Value, bytes.Repeat([]byte{'o'}, oversizedValue)...)
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func isOversized(r kafkaRecord) bool { return len(r.Value) > hubMaxMessage }

// heldRE reads the offset a fail-policy report names.
var heldRE = regexp.MustCompile(`record at offset (\d+) \(\d+ value bytes\) is larger than event hub`)

// skippedOffsets collects, per partition, every offset the reports say was
// skipped.
func skippedOffsets(reps []*mirror.Report) map[mirror.TopicPartition]map[int64]bool {
	out := map[mirror.TopicPartition]map[int64]bool{}
	for _, rep := range reps {
		for _, pr := range rep.Partitions {
			tp := mirror.TopicPartition{Topic: pr.Topic, Partition: pr.Partition}
			for _, o := range pr.SkippedOffsets {
				if out[tp] == nil {
					out[tp] = map[int64]bool{}
				}
				out[tp][o] = true
			}
		}
	}
	return out
}

// TestOversizedSkip (7a) produces one record in 37 larger than the hubs
// accept, on every topic, while drains run with the skip policy: exactly the
// oversized records are left out, each named in a report's skipped offsets;
// everything else is mirrored in order.
func TestOversizedSkip(t *testing.T) {
	e := newEnv(t, envConfig{HubMaxMessageSize: hubMaxMessage})
	f := newFigures(t, "7a", "oversized records (12 KiB, hubs take 8 KiB) under MIRROR_OVERSIZE_POLICY=skip")
	ctx := context.Background()
	s := inProcess{
		e: e, f: f, m: e.newMirror(mirror.Options{OversizePolicy: mirror.OversizeSkip}), lim: mirror.Limits{MaxDuration: 1500 * time.Millisecond},
		producer: producerConfig{Shape: oversizeEvery()},
	}
	window := scale(4*time.Second, 90*time.Second)
	var v verdict
	s.explain = func(r kafkaRecord) string {
		if isOversized(r) {
			return "oversized, skipped and reported"
		}
		return ""
	}
	_, v = s.run(ctx, func(ctx context.Context) { sleepCtx(ctx, window) })

	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	skipped := skippedOffsets(e.drainReports())
	oversized := 0
	for _, r := range recs {
		if !isOversized(r) {
			if skipped[r.tp()][r.Offset] {
				t.Errorf("%s was reported skipped but is not oversized", r)
			}
			continue
		}
		oversized++
		if !skipped[r.tp()][r.Offset] {
			t.Errorf("oversized %s is missing from Event Hubs but no report named it", r)
		}
	}
	if oversized == 0 || v.Explained != int64(oversized) {
		t.Errorf("%d oversized records, %d left out", oversized, v.Explained)
	}
	f.note("%d oversized records skipped, each named in a report", oversized)
}

// TestOversizedFail (7b) produces oversized records into prod.f3 only,
// while drains run with the default fail policy. Each prod.f3 partition
// stops right before its first oversized record: the report names the
// offset, the committed offset stays exactly there, drain after drain,
// and prod.f1 and prod.f2 keep flowing. The operator then switches to skip:
// the held records are mirrored, nothing was lost.
func TestOversizedFail(t *testing.T) {
	e := newEnv(t, envConfig{HubMaxMessageSize: hubMaxMessage})
	f := newFigures(t, "7b", "oversized records under MIRROR_OVERSIZE_POLICY=fail (partition held), then skip")
	ctx := context.Background()
	m := e.newMirror(mirror.Options{})
	p := e.startProducer(producerConfig{Shape: oversizeEvery("prod.f3")})
	loop := e.startDrains(m, "drain", mirror.Limits{MaxDuration: 1500 * time.Millisecond})
	sleepCtx(ctx, scale(4*time.Second, 90*time.Second))
	loop.stop()
	p.stop()

	// Kafka's first oversized record per prod.f3 partition.
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := map[mirror.TopicPartition]int64{}
	oversizedAt := map[mirror.TopicPartition]map[int64]bool{}
	for _, r := range recs {
		if !isOversized(r) {
			continue
		}
		if oversizedAt[r.tp()] == nil {
			oversizedAt[r.tp()] = map[int64]bool{}
		}
		oversizedAt[r.tp()][r.Offset] = true
		if o, ok := first[r.tp()]; !ok || r.Offset < o {
			first[r.tp()] = r.Offset
		}
	}
	if len(first) == 0 {
		t.Fatal("no oversized record was produced")
	}
	// Drain until the other partitions caught up; the held ones must sit
	// at their first oversized record, and keep sitting there.
	var last *mirror.Report
	held := func() bool {
		now, _ := e.offsets()
		for tp, o := range now {
			want := o.end
			if off, ok := first[tp]; ok {
				want = off
			}
			if o.committed != want {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	for stable := 0; stable < 3 && time.Now().Before(deadline); {
		rep, err := e.runDrain(ctx, m, "hold", mirror.Limits{MaxDuration: 5 * time.Second})
		if err != nil {
			t.Logf("drain could not start: %v", err)
			continue
		}
		last = rep
		if held() {
			stable++
		}
	}
	now, _ := e.offsets()
	misnamed := 0
	for tp, o := range now {
		off, isHeld := first[tp]
		if !isHeld {
			if o.committed != o.end {
				t.Errorf("%s (no oversized record) committed %d of %d: other partitions must keep flowing", tp, o.committed, o.end)
			}
			continue
		}
		if o.committed != off {
			t.Errorf("%s committed %d, want it held at its first oversized record %d", tp, o.committed, off)
		}
		// The report names an oversized record of the partition. It is not
		// always the one the partition is held at: when a later oversized
		// record reaches its Event Hubs partition's sender first, that one
		// fails the partition and the held one is dropped unnamed.
		pr := partitionReport(last, tp)
		named := int64(-1)
		if pr != nil {
			if m := heldRE.FindStringSubmatch(pr.Error); m != nil {
				named, _ = strconv.ParseInt(m[1], 10, 64)
			}
		}
		if named < off || !oversizedAt[tp][named] {
			t.Errorf("%s: last report %+v, want an error naming an oversized record at or after %d", tp, pr, off)
		} else if named != off {
			misnamed++
			t.Logf("%s is held at %d but its report names the oversized record at %d", tp, off, named)
		}
	}

	// The operator switches to skip.
	skip := e.newMirror(mirror.Options{OversizePolicy: mirror.OversizeSkip})
	e.settle(ctx, skip, mirror.Limits{})
	recs, err = e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs, Explain: func(r kafkaRecord) string {
		if isOversized(r) {
			return "oversized, skipped after the operator switched to skip"
		}
		return ""
	}})
	e.assert(f, v)
	f.note("%d prod.f3 partitions held at their first oversized record, drain after drain, prod.f1/prod.f2 flowing (%d reports named a later oversized record); after the switch to skip %d oversized records skipped; at most %d copies of one record (records read past the held one are sent again by every failing drain)",
		len(first), misnamed, v.Explained, v.MaxCopies)
}

// partitionReport returns tp's line of rep, or nil.
func partitionReport(rep *mirror.Report, tp mirror.TopicPartition) *mirror.PartitionReport {
	if rep == nil {
		return nil
	}
	for i := range rep.Partitions {
		if pr := &rep.Partitions[i]; pr.Topic == tp.Topic && pr.Partition == tp.Partition {
			return pr
		}
	}
	return nil
}

// TestMissingHub (7c) routes prod.f3 to an event hub that does not exist:
// every drain reports it, prod.f3 is neither read nor committed, and
// prod.f1 and prod.f2 keep flowing. When the operator creates the hub, the
// next drains mirror prod.f3's whole backlog.
func TestMissingHub(t *testing.T) {
	e := newEnv(t, envConfig{NoHub: []string{"prod.f3"}})
	f := newFigures(t, "7c", "topic routed to a missing event hub (other topics flow), then the hub is created")
	ctx := context.Background()
	m := e.newMirror(mirror.Options{})
	p := e.startProducer(producerConfig{})
	loop := e.startDrains(m, "drain", mirror.Limits{MaxDuration: 1500 * time.Millisecond})
	sleepCtx(ctx, scale(4*time.Second, 90*time.Second))

	reps, _ := loop.result()
	reported := 0
	for _, r := range reps {
		for _, msg := range r.Errors {
			if strings.Contains(msg, `event hub "prod.f3" does not exist`) {
				reported++
				break
			}
		}
	}
	if reported == 0 || reported < len(reps)-1 {
		t.Errorf("%d of %d drains reported the missing hub", reported, len(reps))
	}
	now, _ := e.offsets()
	for tp, o := range now {
		switch {
		case tp.Topic == "prod.f3" && o.committed != mirror.NoOffset:
			t.Errorf("%s committed %d although its hub does not exist", tp, o.committed)
		case tp.Topic != "prod.f3" && o.end > 0 && o.committed <= 0:
			t.Errorf("%s committed %d of %d: the other topics must keep flowing", tp, o.committed, o.end)
		}
	}
	if err := e.addHub(emulator.HubConfig{Name: "prod.f3", PartitionCount: e.cfg.HubPartitions}); err != nil {
		t.Fatal(err)
	}
	e.inject("hub created")
	sleepCtx(ctx, time.Second)
	loop.stop()
	p.stop()
	e.settle(ctx, m, mirror.Limits{})
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	e.assert(f, v)
	f.note("%d of %d drains reported the missing hub while prod.f1/prod.f2 flowed; prod.f3 mirrored in full once the hub existed", reported, len(reps))
}
