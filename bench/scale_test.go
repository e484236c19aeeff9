package bench_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/bench"
)

// TestScaleOutCase runs the scale-out case small: one and two real handler
// processes on one group drain the whole backlog, every record reaches the
// emulator, the processes' reports add up to at least the backlog, and
// .bench/latest.json gets one row per process count with its split.
func TestScaleOutCase(t *testing.T) {
	for _, ticks := range []bool{false, true} {
		t.Run(map[bool]string{false: "back-to-back", true: "ticks"}[ticks], func(t *testing.T) { testScaleOut(t, ticks) })
	}
}

func testScaleOut(t *testing.T, ticks bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stderr lockedBuffer
	wd, _ := os.Getwd()
	cfg := bench.Config{
		Quick:        true,
		Shapes:       []bench.Shape{},
		Scale:        &bench.ScaleConfig{Processes: []int{1, 2}, PerPartition: 100, Ticks: ticks},
		StartSamples: -1,
		IdleDrains:   -1,
		Self:         []string{os.Args[0]},
		ModuleRoot:   filepath.Dir(wd),
		OutDir:       t.TempDir(),
		Logger:       slog.New(slog.NewTextHandler(&stderr, nil)),
		ChildStderr:  &stderr,
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
	if len(res.Scale) != 2 {
		t.Fatalf("%d scale-out rounds, want 2", len(res.Scale))
	}
	for i, r := range res.Scale {
		if r.Processes != i+1 || r.Ticks != ticks || len(r.PerProcess) != r.Processes || r.Records != 2000 || r.Seconds <= 0 || r.Duplicates < 0 {
			t.Fatalf("round %d: %+v", i, r)
		}
		var sum int64
		failed := 0
		for _, p := range r.PerProcess {
			sum += p.Records
			failed += p.Failed
		}
		if failed > 0 {
			t.Logf("%d processes: %d failed invocations (their reports are dropped)", r.Processes, failed)
			continue
		}
		if sum < r.Records || sum != r.Records+r.Duplicates {
			t.Errorf("%d processes reported %d records, backlog %d, duplicates stored %d", r.Processes, sum, r.Records, r.Duplicates)
		}
	}
	rows := 0
	for _, row := range res.JSON() {
		name, _ := row["case"].(string)
		if !strings.HasPrefix(name, "scale-out/") {
			continue
		}
		rows++
		data, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{`"mb_per_s"`, `"records_per_process"`, `"speedup_vs_1_process"`, `"processes"`} {
			if !strings.Contains(string(data), field) {
				t.Errorf("row %s has no %s: %s", name, field, data)
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d scale-out rows in latest.json, want 2", rows)
	}
}
