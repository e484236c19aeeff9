package bench_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/bench"
)

// TestConditionAndLatencyCases runs the far-Kafka, TLS and latency cases in
// a smoke configuration: every variant mirrors the whole backlog (through
// the delay proxies; TLS on both sides), and the latency case finds every
// produced record in the emulator with a latency bounded by the schedule.
func TestConditionAndLatencyCases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stderr lockedBuffer
	wd, _ := os.Getwd()
	cfg := bench.Config{
		Quick:        true,
		Records:      400,
		Shapes:       []bench.Shape{},
		Far:          true,
		TLS:          true,
		StartSamples: -1,
		IdleDrains:   -1,
		Self:         []string{os.Args[0]},
		ModuleRoot:   filepath.Dir(wd),
		OutDir:       t.TempDir(),
		Logger:       slog.New(slog.NewTextHandler(&stderr, nil)),
		ChildStderr:  &stderr,
	}
	if !testing.Short() {
		cfg.Latency = &bench.LatencyConfig{Rate: 500, Duration: 2 * time.Second, Schedule: "*/5 * * * * *", Follow: []bool{false}, Settle: 30 * time.Second}
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
	if len(res.Cases) != 0 || len(res.Conditions) != 2 {
		t.Fatalf("%d cases and %d condition cases, want 0 and 2", len(res.Cases), len(res.Conditions))
	}
	for _, cc := range res.Conditions {
		for _, v := range cc.Variants {
			if v.Mirror.Records != 400 || v.Mirror.MBPerSecond() <= 0 {
				t.Errorf("%s %s mirrored %d records at %.1f MB/s, want 400", cc.Name, v.Variant.Name, v.Mirror.Records, v.Mirror.MBPerSecond())
			}
		}
	}
	if cfg.Latency != nil {
		if len(res.Latency) != 1 {
			t.Fatalf("%d latency runs, want 1", len(res.Latency))
		}
		l := res.Latency[0]
		if l.Mirrored != l.Produced || l.Produced < 900 || l.MaxMs <= 0 || l.MaxMs > 10_000 || l.P50Ms > l.P99Ms {
			t.Errorf("latency run: %d of %d records, p50 %.0f p99 %.0f max %.0f ms", l.Mirrored, l.Produced, l.P50Ms, l.P99Ms, l.MaxMs)
		}
	}
	for _, tg := range res.Targets() {
		t.Log(tg.Status, tg.Text)
	}
}
