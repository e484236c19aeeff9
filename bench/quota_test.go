package bench_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/bench"
)

// TestQuotaCase runs the quota case small: 1 throughput unit at twice the
// speed of time, a backlog of 6 seconds of quota. Every record arrives, no
// drain fails, and the drains' reports count the refusals the emulator
// counted.
func TestQuotaCase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stderr lockedBuffer
	cfg := bench.Config{
		Shapes:       []bench.Shape{},
		StartSamples: -1,
		IdleDrains:   -1,
		Self:         []string{os.Args[0]},
		OutDir:       t.TempDir(),
		Logger:       slog.New(slog.NewTextHandler(&stderr, nil)),
		ChildStderr:  &stderr,
		Quota: &bench.QuotaConfig{
			Units:          []int{1},
			Shapes:         []bench.Shape{{Name: "100B-keyed", Size: 100, Keyed: true}},
			Period:         500 * time.Millisecond,
			BacklogMinutes: 0.1,
			DrainSeconds:   10,
		},
	}
	res, err := bench.Run(ctx, cfg)
	defer func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("log:\n%s", stderr.b.String())
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Quota) != 1 {
		t.Fatalf("%d quota runs, want 1", len(res.Quota))
	}
	q := res.Quota[0]
	t.Logf("%+v", q)
	if q.Backlog != 6000 || q.Live <= 0 || q.Drains < 1 || q.FailedDrains != 0 || q.Fraction <= 0 || q.PeakRSS <= 0 || q.LiveMaxSec <= 0 {
		t.Errorf("quota run %+v: want a backlog of 6000, live records, drains without failures, a fraction, a peak RSS and latencies", q)
	}
	if q.Duplicates < 0 || q.UsefulFraction <= 0 || q.UsefulFraction > q.Fraction*(1+1e-9) { // the two are computed apart: allow rounding
		t.Errorf("%d duplicates (negative: records missing from the hubs), useful fraction %v of %v", q.Duplicates, q.UsefulFraction, q.Fraction)
	}
	// A refusal that arrives after its send gave up at a drain's end is
	// counted by the emulator only.
	if q.Throttled == 0 || q.Throttled > q.ThrottledRequests {
		t.Errorf("the emulator counted %d throttled requests, the drains %d: want some, the drains' at most the emulator's", q.ThrottledRequests, q.Throttled)
	}
	var table bytes.Buffer
	if err := bench.PrintQuotaTable(&table, res.Quota); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "100B-keyed") {
		t.Errorf("table lacks the case:\n%s", table.String())
	}
}
