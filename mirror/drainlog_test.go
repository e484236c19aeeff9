package mirror

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"regexp"
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

// docs/logs.md documents every key of the msg=drain line, in its table and
// its example, and every value of stopped: one vocabulary in the line, the
// JSON, the page and the docs.
func TestLogsDocMatchesTheDrainLine(t *testing.T) {
	raw, err := os.ReadFile("../docs/logs.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	var buf bytes.Buffer
	LogReport(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), &Report{Run: "timer", Stopped: StopCaughtUp}, TriggerTimer, time.Minute, false)
	line := strings.TrimSpace(buf.String())
	example := ""
	for _, l := range strings.Split(doc, "\n") {
		if strings.Contains(l, " msg=drain ") {
			example = l
			break
		}
	}
	keys := regexp.MustCompile(` ([a-z0-9_]+)=`).FindAllStringSubmatch(line, -1)
	for _, k := range keys[3:] { // after time, level, msg
		if !regexp.MustCompile("`" + k[1] + "`").MatchString(doc) {
			t.Errorf("docs/logs.md does not explain %s", k[1])
		}
		if !strings.Contains(example, " "+k[1]+"=") {
			t.Errorf("the example drain line of docs/logs.md lacks %s", k[1])
		}
	}
	for _, s := range []string{StopCaughtUp, StopFollowed, StopMaxRecords, StopMaxBytes, StopMaxDuration, StopRebalanced, StopCanceled, StopFailed, StopBusy, StopNothingToDo} {
		if !strings.Contains(doc, "`"+s+"`") {
			t.Errorf("docs/logs.md does not list stopped=%q", s)
		}
	}
}
