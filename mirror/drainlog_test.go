package mirror

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Every per-partition line carries topic, partition and hub as
// attributes; the drain line carries the backlog's age and the latency.
func TestDrainLinesAreStructured(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	rep := &Report{Run: "timer", Started: time.Now(), Duration: time.Second, Stopped: StopCaughtUp, Records: 3, BehindBy: 1500 * time.Millisecond,
		Latency:    &Latency{Records: 3, P50: 20 * time.Millisecond, P99: 90 * time.Millisecond},
		Partitions: []PartitionReport{{Topic: "prod.t", Partition: 3, Hub: "h", Records: 3, FirstOffset: 0, LastOffset: 2, Committed: 3}}}
	LogReport(context.Background(), logger, rep, TriggerTimer, time.Minute, false)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], " topic=prod.t partition=3 hub=h") {
		t.Errorf("partition line: %q", lines)
	}
	if !strings.Contains(lines[len(lines)-1], " backlog_age_ms=1500 latency_p50_ms=20 latency_p99_ms=90") {
		t.Errorf("drain line: %s", lines[len(lines)-1])
	}
}
