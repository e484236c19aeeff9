package faults

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// The alerts and the dashboard (infra/alerts.tf, infra/dashboard.tf) read the
// handler's log lines with KQL regular expressions. KQL's regex dialect is
// RE2, as Go's, so these tests apply the very patterns of the .tf files, in
// Go, to lines written the way the handler writes them (log/slog's text
// handler on stdout): a change of the log format or of a query that breaks
// the alerts fails here.

// kqlExtract finds `<column> = …extract(@'<pattern>', 1, Message)…` in src.
var kqlExtract = regexp.MustCompile(`(\w+) = (?:tolong\(|toint\()?(?:trim\(@'"', )?extract\(@'([^']*)', 1, Message\)`)

// kqlMatches finds `Message matches regex @'<pattern>'` in src.
var kqlMatches = regexp.MustCompile(`Message matches regex @'([^']*)'`)

func readInfra(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../infra/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// extractors returns column → compiled pattern for the extract() calls of
// one heredoc (the text from marker up to the next "KQL" line).
func extractors(t *testing.T, src, marker string) map[string]*regexp.Regexp {
	t.Helper()
	i := strings.Index(src, marker)
	if i < 0 {
		t.Fatalf("%q not found", marker)
	}
	block := src[i:]
	if j := regexp.MustCompile(`(?m)^\s*KQL$`).FindStringIndex(block); j != nil {
		block = block[:j[0]]
	}
	out := map[string]*regexp.Regexp{}
	for _, m := range kqlExtract.FindAllStringSubmatch(block, -1) {
		re, err := regexp.Compile(m[2])
		if err != nil {
			t.Fatalf("%s: pattern %q: %v", m[1], m[2], err)
		}
		out[m[1]] = re
	}
	return out
}

func kqlValue(re *regexp.Regexp, line string) (string, bool) {
	m := re.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return strings.Trim(m[1], `"`), true // trim(@'"', …)
}

// TestAlertQueriesReadTheDrainLine: every key of the structured drain line
// (the contract in README "Operating it") is extracted with its value from a
// line as log/slog writes it, quoted values included; other handler lines
// are not taken for drain lines.
func TestAlertQueriesReadTheDrainLine(t *testing.T) {
	src := readInfra(t, "alerts.tf")
	ex := extractors(t, src, "kql_drains = <<-KQL")
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	want := map[string]string{
		"run": "timer 2026-12-03T06:00:00Z", "trigger": "catchup", "records": "1200", "bytes": "5000000", "lag": "-1",
		"partitions": "5", "errors": "2", "gaps": "1", "oversized": "3", "duration_ms": "2345", "budget_ms": "240000",
		"stopped": "caught up", "throttled": "4", "backlog_age_ms": "61000", "paused_age_ms": "90000000",
	}
	logger.Info("drain", "run", want["run"], "trigger", want["trigger"], "records", 1200, "bytes", 5000000, "lag", -1,
		"partitions", 5, "errors", 2, "gaps", 1, "oversized", 3, "duration_ms", 2345, "budget_ms", 240000, "stopped", want["stopped"],
		"throttled", 4, "backlog_age_ms", 61000, "latency_p50_ms", 12, "latency_p99_ms", 80, "paused_age_ms", 90000000)
	line := strings.TrimSpace(buf.String())

	for key, v := range want {
		re, ok := ex[key]
		if !ok {
			t.Errorf("the drain query extracts no %s", key)
			continue
		}
		if got, ok := kqlValue(re, line); !ok || got != v {
			t.Errorf("%s: extracted %q (found %v) from %q, want %q", key, got, ok, line, v)
		}
	}
	if len(ex) != len(want) {
		t.Errorf("the drain query extracts %d keys, want %d", len(ex), len(want))
	}

	// Only msg=drain lines are drain lines.
	ms := kqlMatches.FindAllStringSubmatch(src[strings.Index(src, "kql_drains"):], 1)
	if len(ms) == 0 {
		t.Fatal("the drain query has no `Message matches regex` filter")
	}
	isDrain := regexp.MustCompile(ms[0][1])
	buf.Reset()
	logger.Error("drain left records unmirrored", "run", "timer", "summary", "records=3 lag=5")
	logger.Info("handler ready", "port", 8080, "msg2", "drain")
	for _, other := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if isDrain.MatchString(other) {
			t.Errorf("%q is taken for a drain line", other)
		}
	}
	if !isDrain.MatchString(line) {
		t.Errorf("%q is not taken for a drain line", line)
	}
}

// TestAlertQueriesSeeGapsAndOversizedLines: the gap/oversized alert also
// fires on the handler's own report lines about a gap or a skipped record.
func TestAlertQueriesSeeGapsAndOversizedLines(t *testing.T) {
	src := readInfra(t, "alerts.tf")
	block := src[strings.Index(src, "gaps_oversized = <<-KQL"):]
	block = block[:strings.Index(block, "\n    KQL")]
	ms := kqlMatches.FindAllStringSubmatch(block, -1)
	if len(ms) != 1 {
		t.Fatalf("the gap/oversized query has %d line filters, want 1", len(ms))
	}
	re := regexp.MustCompile(ms[0][1])
	gap := mirror.PartitionReport{Topic: "prod.orders", Partition: 3, Hub: "prod.orders", Committed: 200, LagBefore: 10, LagAfter: 10, Gap: 50}
	lines := []string{
		gap.String(),
		"prod.orders/3: gap: 50 records (offsets 150..199) were removed by retention before they were mirrored; partition not advanced",
		"oversized record skipped (MIRROR_OVERSIZE_POLICY=skip)",
	}
	for _, l := range lines {
		if !re.MatchString(l) {
			t.Errorf("%q does not fire the gap/oversized alert", l)
		}
	}
	clean := mirror.PartitionReport{Topic: "prod.orders", Partition: 3, Hub: "prod.orders", Records: 10, Bytes: 100, FirstOffset: 0, LastOffset: 9, Committed: 10, LagBefore: 10}
	if re.MatchString(clean.String()) {
		t.Errorf("%q fires the gap/oversized alert", clean.String())
	}
}

// TestDashboardReadsLagPerTopic: the per-topic lag chart reads topic,
// partition and lag after the drain from the per-partition report line,
// raw (invocation logs) and as slog writes it (stdout).
func TestDashboardReadsLagPerTopic(t *testing.T) {
	ex := extractors(t, readInfra(t, "dashboard.tf"), "lag_per_topic = <<-KQL")
	for _, col := range []string{"topic", "partition", "lag"} {
		if ex[col] == nil {
			t.Fatalf("the per-topic lag query extracts no %s", col)
		}
	}
	p := mirror.PartitionReport{Topic: "prod.test-1_x", Partition: 12, Hub: "mirror.test", Records: 7, Bytes: 2048, FirstOffset: 3, LastOffset: 9, Committed: 10, LagBefore: 40, LagAfter: 33}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info(p.String())
	for _, line := range []string{p.String(), strings.TrimSpace(buf.String())} {
		for col, want := range map[string]string{"topic": "prod.test-1_x", "partition": "12", "lag": "33"} {
			if got, ok := kqlValue(ex[col], line); !ok || got != want {
				t.Errorf("%s: extracted %q from %q, want %q", col, got, line, want)
			}
		}
	}
}

// TestAlertQueriesReadTheHandlersDrainLine: the alerts' patterns read the
// line the handler really writes (mirror.LogReport), not only a line built
// to the contract: the two cannot drift apart.
func TestAlertQueriesReadTheHandlersDrainLine(t *testing.T) {
	ex := extractors(t, readInfra(t, "alerts.tf"), "kql_drains = <<-KQL")
	rep := &mirror.Report{
		Run: "timer 2026-12-03T06:00:00Z", Records: 1200, Bytes: 5000000, Skipped: 3, LagAfter: 42,
		Stopped: "caught up", Duration: 2345 * time.Millisecond, Throttled: 4,
		Started: time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC), PausedSince: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC),
		Errors: []string{"event hub \"x\" does not exist"},
		Partitions: []mirror.PartitionReport{
			{Topic: "prod.test1", Partition: 0, Records: 1200, Gap: 7},
			{Topic: "prod.test1", Partition: 1, Error: "send failed", Kind: mirror.KindThrottled},
		},
	}
	var buf bytes.Buffer
	mirror.LogReport(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), rep, "catchup", 4*time.Minute, false)
	var line string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(l, " msg=drain ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no msg=drain line in:\n%s", buf.String())
	}
	want := map[string]string{
		"run": rep.Run, "trigger": "catchup", "records": "1200", "bytes": "5000000", "lag": "42",
		"partitions": "2", "errors": "2", "gaps": "1", "oversized": "3", "duration_ms": "2345", "budget_ms": "240000",
		"stopped": "caught up", "throttled": "4", "backlog_age_ms": "0", "paused_age_ms": "90000000",
	}
	for key, v := range want {
		re, ok := ex[key]
		if !ok {
			t.Errorf("the drain query extracts no %s", key)
			continue
		}
		if got, ok := kqlValue(re, line); !ok || got != v {
			t.Errorf("%s: extracted %q (found %v) from %q, want %q", key, got, ok, line, v)
		}
	}
}
