package faults

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestAtTheNamespaceQuota (1c): the namespace has one throughput unit and
// the producers offer about twice its quota, so every drain runs into
// server-busy (the emulator's quota, not an injected fault), at the
// service's figures: 1 MiB or 1,000 events per second, with a backlog of
// 20 seconds of quota and producers going on. Nothing is lost,
// no drain fails: a drain that made progress while throttled leaves the
// refused batches to the next drain, and its drain line says throttled=N.
func TestAtTheNamespaceQuota(t *testing.T) {
	period := time.Second
	e := newEnv(t, envConfig{Quota: emulator.Quota{ThroughputUnits: 1, Period: period}})
	f := newFigures(t, "1c", "namespace at its quota: 1 throughput unit (1,000 events/s), producers at several times that")
	ctx := context.Background()
	m := e.newMirror(mirror.Options{})
	// A backlog of 20 seconds of quota before the first drain, then
	// producers go on during the catch-up.
	backlog := scale(20_000, 200_000)
	bp := e.newProducer(producerConfig{Tag: "backlog", ValueSize: 100})
	bp.produce(ctx, backlog)
	p := e.startProducer(producerConfig{Tag: "live", ValueSize: 100})
	loop := e.startDrains(m, "drain", mirror.Limits{MaxDuration: 8 * time.Second})
	// The quota is a fault for the whole window: every drain in it is
	// faulted (its records in flight count against the duplicate bound).
	for end := time.Now().Add(scale(16*time.Second, 120*time.Second)); time.Now().Before(end); {
		e.inject("namespace quota: 1 TU per " + period.String())
		sleepCtx(ctx, 250*time.Millisecond)
	}
	loop.stop()
	p.stop()
	reps, errs := loop.result()
	for _, r := range reps {
		if r.Failed() {
			t.Logf("failed drain: %v", r.Lines())
		}
	}
	t.Logf("%d drains at the quota (%d failed, %d could not start); backlog %d, %d records produced during the catch-up", len(reps), failedDrains(reps), errs, bp.acked.Load(), p.acked.Load())
	e.settle(ctx, m, mirror.Limits{})
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.assert(f, e.verify(expectation{Records: recs}))
	throttled := e.emu.Stats().ThrottledRequests
	var progressed int
	var records, refused int64
	for _, r := range reps {
		records += r.Records
		refused += r.Throttled
		if r.Throttled == 0 || r.Records == 0 {
			continue
		}
		progressed++
		if r.Failed() {
			continue // counted below
		}
		var buf bytes.Buffer
		mirror.LogReport(ctx, slog.New(slog.NewTextHandler(&buf, nil)), r, "catchup", 8*time.Second, false)
		line := drainLine(buf.String())
		if !strings.Contains(line, "level=INFO") || !strings.Contains(line, " throttled=") || strings.Contains(line, " throttled=0") {
			t.Errorf("a throttled drain that made progress logs %q, want level INFO and throttled=N", line)
		}
	}
	f.note("%d drains, %d throttled with progress, %d failed; emulator counted %d throttled requests, the drains %d; %d records in the drains",
		len(reps), progressed, failedDrains(reps), throttled, refused, records)
	if throttled == 0 || progressed == 0 {
		t.Errorf("the quota did not throttle a drain that made progress (%d throttled requests)", throttled)
	}
	if n := failedDrains(reps); n != 0 {
		t.Errorf("%d of %d drains failed at the namespace's quota", n, len(reps))
		for _, r := range reps {
			if r.Failed() {
				t.Logf("failed: %s; first problem: %s", r.Summary(), firstProblem(r))
			}
		}
	}
}

// drainLine returns the msg=drain line of LogReport's output.
func drainLine(logs string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, " msg="+mirror.DrainLogMessage+" ") {
			return l
		}
	}
	return ""
}
