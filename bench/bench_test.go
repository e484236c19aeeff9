package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/bench"
)

// TestMain lets the test binary serve as the benchmark's child process, as
// scripts/bench does.
func TestMain(m *testing.M) {
	spec, err := bench.ChildSpecFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if spec != nil {
		if err := bench.RunChild(context.Background(), *spec, os.Stdout, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lockedBuffer collects the children's stderr from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestQuickRun runs the benchmark's quick mode end to end on two cases:
// load, probe drain, read limit, send limit, mirror, idle drains, the
// handler's start-to-ready time, the table and the JSON file.
func TestQuickRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stderr lockedBuffer
	cfg := bench.Config{
		Quick:        true,
		Records:      400,
		Shapes:       []bench.Shape{{Name: "100B-keyless", Size: 100}, {Name: "1KiB-keyed", Size: 1 << 10, Keyed: true}},
		StartSamples: 1,
		Self:         []string{os.Args[0]},
		OutDir:       dir,
		Profile:      []string{"1KiB-keyed"},
		Logger:       slog.New(slog.NewTextHandler(&stderr, nil)),
		ChildStderr:  &stderr,
	}
	if testing.Short() {
		cfg.StartSamples = -1 // skip building the handler
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
	if len(res.Cases) != 2 {
		t.Fatalf("%d cases, want 2", len(res.Cases))
	}
	for _, c := range res.Cases {
		if c.Records != 400 || c.Mirror.Records != 400 || c.Read.Records != 400 || c.Send.Records != 400 || c.Parallel.Records != 400 {
			t.Errorf("%s: records %d, mirrored %d, read %d, sent %d, parallel %d; want 400 each", c.Shape.Name, c.Records, c.Mirror.Records, c.Read.Records, c.Send.Records, c.Parallel.Records)
		}
		if c.ParallelRatio() <= 0 || c.Parallel.CPUPer1k() <= 0 {
			t.Errorf("%s: mirror ÷ parallel limit %v, parallel CPU %v; want positive", c.Shape.Name, c.ParallelRatio(), c.Parallel.CPUPer1k())
		}
		if c.Mirror.GoCPU.User <= 0 || c.Read.GoCPU.User <= 0 || c.Send.GoCPU.User <= 0 {
			t.Errorf("%s: the runtime's user CPU: mirror %v, read %v, send %v; want positive", c.Shape.Name, c.Mirror.GoCPU, c.Read.GoCPU, c.Send.GoCPU)
		}
		if c.Ratio() <= 0 || c.Mirror.CPUPer1k() <= 0 || c.Mirror.PeakRSS <= 0 {
			t.Errorf("%s: ratio %v, CPU %v, peak RSS %d; want positive", c.Shape.Name, c.Ratio(), c.Mirror.CPUPer1k(), c.Mirror.PeakRSS)
		}
	}
	if len(res.IdleDrainsMs) == 0 {
		t.Error("no idle drains timed")
	}
	if !testing.Short() && len(res.StartToReadyMs) != 1 {
		t.Errorf("start-to-ready samples %v, want 1", res.StartToReadyMs)
	}
	for _, p := range res.Cases[1].Profiles {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", p, err)
		}
	}

	var table bytes.Buffer
	if err := res.PrintTable(&table); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(table.Bytes(), []byte("1KiB-keyed")) {
		t.Errorf("table lacks a case:\n%s", table.String())
	}
	path := filepath.Join(dir, "latest.json")
	if err := res.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(data, &objs); err != nil {
		t.Fatal(err)
	}
	byCase := map[string]map[string]any{}
	for _, o := range objs {
		name, _ := o["case"].(string)
		byCase[name] = o
	}
	for _, key := range []string{"case", "records_per_s", "mb_per_s", "read_limit_mb_per_s", "send_limit_mb_per_s", "parallel_limit_mb_per_s", "ratio", "user_cpu_efficiency", "gc_cpu_share", "cpu_s_per_1k_records", "peak_rss_mb"} {
		if _, ok := byCase["100B-keyless"][key]; !ok {
			t.Errorf("case object lacks %q", key)
		}
	}
	if _, ok := byCase["idle_drain_ms"]["idle_drain_ms"]; !ok {
		t.Error("no idle_drain_ms object")
	}
	if _, ok := byCase["start_to_ready_ms"]["start_to_ready_ms"]; !ok {
		t.Error("no start_to_ready_ms object")
	}
}
