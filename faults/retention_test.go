package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/mirror"
)

// Scenario 6: retention removes records before they were mirrored (kfake's
// DeleteRecords moves the log start past the group's committed offset, as
// retention.ms or retention.bytes do). The gap must be detected, counted and
// reported; under MIRROR_GAP_POLICY=fail the partition stays where it was
// until an operator decides, under resume-earliest the drain goes on from
// the earliest record still stored and counts the records lost.

// recordSet accumulates what Kafka held at several moments, so that records
// removed by retention later are still known to the check.
type recordSet struct {
	byID  map[identity]bool
	order []kafkaRecord
}

func newRecordSet() *recordSet { return &recordSet{byID: map[identity]bool{}} }

func (s *recordSet) add(recs []kafkaRecord) {
	for _, r := range recs {
		id := idOf(r.Topic, r.Partition, r.Offset, r.Value)
		if s.byID[id] {
			continue
		}
		s.byID[id] = true
		s.order = append(s.order, r)
	}
}

// logStarts returns every scenario partition's log start offset.
func (e *env) logStarts() map[mirror.TopicPartition]int64 {
	out := map[mirror.TopicPartition]int64{}
	snap, _ := e.offsets()
	for tp, o := range snap {
		out[tp] = o.start
	}
	return out
}

// purge removes the records of tp below offset, as retention would.
func (e *env) purge(tp mirror.TopicPartition, offset int64) error {
	var err error
	if !e.withKafka(func(c *kfake.Cluster) { err = c.DeleteRecords(tp.Topic, tp.Partition, offset) }) {
		return fmt.Errorf("purging %s: kafka is down", tp)
	}
	if err != nil {
		return fmt.Errorf("purging %s below %d: %w", tp, offset, err)
	}
	return nil
}

// TestRetentionGapThroughHandler (6a) drives the real handler: the group
// mirrored everything, more records arrive, and retention removes, on two
// partitions, records the group never mirrored. Under the default gap
// policy (fail) two timer invocations fail, their reports (the Logs the host
// drops, and the handler's own log lines) name the gap with its size and
// offsets, the status page shows it, and the committed offsets of the two
// partitions do not move while the others do. The operator then restarts
// the handler with MIRROR_GAP_POLICY=resume-earliest: the drain reports
// and counts the same gap, goes on from the log start, and mirrors the rest.
func TestRetentionGapThroughHandler(t *testing.T) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, "6a", "retention removed unmirrored records (handler): fail holds the partitions, resume-earliest counts the gap")
	ctx := context.Background()
	p := e.newProducer(producerConfig{})
	h := e.startHandler("fail", nil)

	p.produce(ctx, 1200)
	h.settle(ctx)
	p.produce(ctx, 1200)
	seen := newRecordSet()
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(recs)

	before, _ := e.offsets()
	purged := map[mirror.TopicPartition]int64{}
	// One partition of prod.f1 (keyless records) and one of prod.f3 (keyed)
	// lose the first half of their unmirrored records.
	for _, topic := range []string{"prod.f1", "prod.f3"} {
		var tp mirror.TopicPartition
		var o partitionOffsets
		for part := range e.cfg.Partitions {
			c := mirror.TopicPartition{Topic: topic, Partition: part}
			if b := before[c]; b.committed >= 0 && b.end-b.committed > o.end-o.committed {
				tp, o = c, b
			}
		}
		to := o.committed + (o.end-o.committed)/2
		if tp.Topic == "" || to <= o.committed {
			t.Fatalf("%s: no partition with unmirrored records to purge: %v", topic, before)
		}
		if err := e.purge(tp, to); err != nil {
			t.Fatal(err)
		}
		e.inject("retention purge")
		purged[tp] = to - o.committed
	}
	t.Logf("purged (records never mirrored): %v", purged)

	for i := range 2 {
		res, err := h.timer(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Join(reportLines(res), "\n")
		if res.Succeeded() || res.Status != http.StatusInternalServerError {
			t.Errorf("fail policy, invocation %d: status %d, want a failed invocation (500)\n%s", i, res.Status, lines)
		}
		for tp, gap := range purged {
			c := before[tp].committed
			want := fmt.Sprintf("gap: %d records (offsets %d..%d) were removed by retention before they were mirrored; partition not advanced", gap, c, c+gap-1)
			line := findLine(reportLines(res), tp.String()+" ->")
			if !strings.Contains(line, fmt.Sprintf("gap of %d records lost to retention", gap)) || !strings.Contains(line, want) {
				t.Errorf("fail policy, invocation %d: %s reported as %q, want the gap of %d and %q", i, tp, line, gap, want)
			}
			// The host drops the Logs of a failed invocation; the handler
			// logs them itself (the host reads its stdout a moment after
			// the answer).
			if !h.waitOutput(ctx, want, 5*time.Second) {
				t.Errorf("fail policy: the gap of %s is not in the handler's own log", tp)
			}
		}
		now, _ := e.offsets()
		for tp, o := range now {
			switch _, held := purged[tp]; {
			case held && o.committed != before[tp].committed:
				t.Errorf("fail policy: %s committed %d, want it left at %d", tp, o.committed, before[tp].committed)
			case !held && o.committed != o.end:
				t.Errorf("fail policy: %s committed %d, want the log end %d (other partitions go on)", tp, o.committed, o.end)
			}
		}
	}
	code, st, err := h.status(ctx, "")
	if err != nil || code != http.StatusOK || st.Lag == nil {
		t.Fatalf("status: %d %v", code, err)
	}
	for _, pl := range st.Lag.Partitions {
		tp := mirror.TopicPartition{Topic: pl.Topic, Partition: pl.Partition}
		if gap, ok := purged[tp]; ok && (pl.Gap != gap || pl.Committed != before[tp].committed) {
			t.Errorf("status: %s shows gap %d at committed %d, want gap %d at %d", tp, pl.Gap, pl.Committed, gap, before[tp].committed)
		}
	}

	// The operator accepts the loss: MIRROR_GAP_POLICY=resume-earliest.
	if err := h.host.Stop(); err != nil {
		t.Fatal(err)
	}
	h2 := e.startHandler("resume", map[string]string{config.MirrorGapPolicy: string(mirror.GapResumeEarliest)})
	res, err := h2.timer(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Succeeded() {
		t.Errorf("resume-earliest: invocation failed: %v\n%s", res.Err, strings.Join(reportLines(res), "\n"))
	}
	var counted int64
	// A successful invocation's Logs carry the summary; the partition lines
	// are on the handler's stdout, which the host reads apart from the
	// response: wait until they arrived.
	var lines []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		lines = append(reportLines(res), strings.Split(h2.out.Stdout(), "\n")...)
		arrived := true
		for tp := range purged {
			arrived = arrived && findLine(lines, tp.String()+" ->") != ""
		}
		if arrived || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for tp, gap := range purged {
		line := findLine(lines, tp.String()+" ->")
		if !strings.Contains(line, fmt.Sprintf("gap of %d records lost to retention", gap)) || strings.Contains(line, "error") {
			t.Errorf("resume-earliest: %s reported as %q, want the gap of %d counted and no error", tp, line, gap)
		}
		counted += gap
	}
	p.produce(ctx, 600)
	h2.settle(ctx)

	final, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(final)
	starts := e.logStarts()
	v := e.verify(expectation{Records: seen.order, Explain: func(r kafkaRecord) string {
		if r.Offset < starts[r.tp()] {
			return "removed by retention before it was mirrored (gap reported)"
		}
		return ""
	}})
	e.assert(f, v)
	if v.Explained != counted {
		t.Errorf("%d records are missing for retention, the reports counted %d", v.Explained, counted)
	}
	f.note("fail: 2 invocations failed naming the gap, partitions held; resume-earliest: gap of %d records counted, the rest mirrored", counted)
}

// findLine returns the first line containing s, or "".
func findLine(lines []string, s string) string {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestRetentionPurgesWhileDraining (6b) purges random partitions up to
// random offsets (behind or ahead of the group's committed offset) while
// records are produced and drains run back to back under resume-earliest,
// so that some purges land in the middle of a drain reading the partition
// (the fetch answers OFFSET_OUT_OF_RANGE). Every record that is missing from
// Event Hubs must have been removed by retention, and on each partition the
// reports must have counted at least as many records lost to retention as
// are missing.
func TestRetentionPurgesWhileDraining(t *testing.T) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, "6b", "retention purges at random while drains run (resume-earliest)")
	ctx := context.Background()
	rng := newRand(t)
	// A small in-flight bound and slow acknowledgements throttle the
	// reader, so that bursts leave records unread for a while and purges
	// can remove them before the drain reads them.
	m := e.newMirror(mirror.Options{GapPolicy: mirror.GapResumeEarliest, InFlightBytes: 16 << 10})
	e.emu.Faults().DelayDispositions(20 * time.Millisecond)
	p := e.startProducer(producerConfig{})
	loop := e.startDrains(m, "drain", mirror.Limits{MaxDuration: 1500 * time.Millisecond})
	seen := newRecordSet()
	purges := scale(8, 120)
	removed := map[mirror.TopicPartition]int64{}
	// Records purged while the group had no commit on their partition were
	// never behind the group's position: the drain starts at the log start
	// (KAFKA_START_OFFSET=earliest) and no gap is due.
	unpositioned := map[mirror.TopicPartition]int64{}
	for range purges {
		// A burst, then a purge a random moment later.
		p.pause()
		p.produce(ctx, 1500)
		p.resume()
		sleepCtx(ctx, time.Duration(rng.IntN(400))*time.Millisecond)
		// Offsets first: the read that follows holds every record below
		// the end offsets seen here.
		snap, _ := e.offsets()
		recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen.add(recs)
		tp := mirror.TopicPartition{Topic: e.cfg.Topics[1+rng.IntN(len(e.cfg.Topics)-1)], Partition: int32(rng.IntN(int(e.cfg.Partitions)))}
		o := snap[tp]
		// Two purges in three reach past the committed offset (records
		// possibly never read), the others only remove mirrored records.
		from := max(o.committed, o.start)
		to := o.start + 1 + rng.Int64N(max(from-o.start, 1))
		if rng.IntN(3) > 0 && o.end > from {
			to = from + 1 + rng.Int64N(o.end-from)
		}
		to = min(to, o.end)
		if to <= o.start {
			continue
		}
		if err := e.purge(tp, to); err != nil {
			t.Fatal(err)
		}
		e.inject("retention purge")
		removed[tp] += to - o.start
		if o.committed < 0 {
			unpositioned[tp] += to - o.start
		}
	}
	loop.stop()
	p.stop()
	e.settle(ctx, m, mirror.Limits{})

	final, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(final)
	starts := e.logStarts()
	v := e.verify(expectation{Records: seen.order, Explain: func(r kafkaRecord) string {
		if r.Offset < starts[r.tp()] {
			return "removed by retention before it was mirrored (gap reported)"
		}
		return ""
	}})
	e.assert(f, v)

	// Missing records per partition against the gaps the reports counted.
	missing := map[mirror.TopicPartition]int64{}
	inHubs := e.mirroredIDs()
	for _, r := range seen.order {
		if !inHubs[idOf(r.Topic, r.Partition, r.Offset, r.Value)] {
			missing[r.tp()]++
		}
	}
	reported := map[mirror.TopicPartition]int64{}
	for _, rep := range e.drainReports() {
		for _, pr := range rep.Partitions {
			reported[mirror.TopicPartition{Topic: pr.Topic, Partition: pr.Partition}] += pr.Gap
		}
	}
	var totalReported int64
	for tp, n := range missing {
		if reported[tp]+unpositioned[tp] < n {
			t.Errorf("%s: %d records missing for retention, the reports counted only %d (and %d were purged before the group had a position)", tp, n, reported[tp], unpositioned[tp])
			for _, rep := range e.drainReports() {
				if pr := partitionReport(rep, tp); pr != nil && (pr.Records > 0 || pr.Gap > 0 || pr.Note != "" || pr.Error != "") {
					t.Logf("  %s at %s: %s (note: %s)", rep.Run, rep.Started.Format("15:04:05.000"), pr, pr.Note)
				}
			}
		}
	}
	for _, n := range reported {
		totalReported += n
	}
	var totalRemoved int64
	for _, n := range removed {
		totalRemoved += n
	}
	f.note("%d purges removed %d records; %d were never mirrored, the reports counted gaps of %d", purges, totalRemoved, v.Explained, totalReported)
	if v.Explained == 0 {
		t.Errorf("no purge removed a record before it was mirrored: the gap path was not exercised")
	}
}

// mirroredIDs returns the identities of every event in every hub.
func (e *env) mirroredIDs() map[identity]bool {
	out := map[identity]bool{}
	for hub, n := range e.hubs {
		for part := range n {
			for _, ev := range e.emu.Events(hub, part) {
				if r, err := mirror.RecordFromEvent(ev.Body, ev.Properties); err == nil {
					out[idOf(r.Topic, r.Partition, r.Offset, r.Value)] = true
				}
			}
		}
	}
	return out
}
