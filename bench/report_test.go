package bench

import (
	"strings"
	"testing"
)

// TestTargetsCheckEachCaseAtTheMachinesLimit: every throughput case is
// checked against issue 25's targets (mirror ÷ serial limit, CPU
// efficiency, and for the default cases the peak RSS bound), and each line
// says MISS when its figure misses, whatever the other figures do.
func TestTargetsCheckEachCaseAtTheMachinesLimit(t *testing.T) {
	phase := func(mbPerS, cpuPer1k, peakMB float64) Measured {
		const records = 1_000_000
		return Measured{PhaseResult: PhaseResult{
			Records:    records,
			Bytes:      100 * records,
			Seconds:    100 * records / 1e6 / mbPerS,
			CPUSeconds: cpuPer1k * records / 1000,
			PeakRSS:    int64(peakMB * 1e6),
		}}
	}
	// Read 200 MB/s and send 100 MB/s: a serial limit of 66.7 MB/s, and
	// 0.0010 + 0.0020 s of CPU per 1,000 records.
	read, send := phase(200, 0.0010, 100), phase(100, 0.0020, 200)
	caseResult := func(name string, mirrorMBPerS, mirrorCPUPer1k, peakMB float64) CaseResult {
		return CaseResult{Shape: Shape{Name: name}, Read: read, Send: send, Mirror: phase(mirrorMBPerS, mirrorCPUPer1k, peakMB)}
	}
	r := &Results{Cases: []CaseResult{
		caseResult("100B-keyless", 64, 0.0031, 320), // 0.96 of serial, efficiency 0.97, 320 of 329 MB
		caseResult("100B-keyed", 58, 0.0032, 340),   // 0.87 of serial
		caseResult("1KiB-keyless", 65, 0.0036, 400), // efficiency 0.83
		caseResult("1KiB-keyed", 65, 0.0030, 480),   // 480 MB against 470
		caseResult("100B-headers", 65, 0.0030, 900), // no memory baseline
	}}
	status := map[string]string{}
	for _, tg := range r.Targets() {
		for _, what := range []string{"serial limit", "CPU efficiency", "peak RSS"} {
			if !strings.Contains(tg.Text, what) || strings.Contains(tg.Text, "backlog") {
				continue
			}
			name, _, _ := strings.Cut(tg.Text, ":")
			status[name+" "+what] = tg.Status
		}
	}
	for key, want := range map[string]string{
		"100B-keyless serial limit":   "ok",
		"100B-keyless CPU efficiency": "ok",
		"100B-keyless peak RSS":       "ok",
		"100B-keyed serial limit":     "MISS",
		"100B-keyed CPU efficiency":   "ok",
		"100B-keyed peak RSS":         "ok",
		"1KiB-keyless serial limit":   "ok",
		"1KiB-keyless CPU efficiency": "MISS",
		"1KiB-keyless peak RSS":       "ok",
		"1KiB-keyed peak RSS":         "MISS",
		"100B-headers serial limit":   "ok",
		"100B-headers peak RSS":       "",
	} {
		if got := status[key]; got != want {
			t.Errorf("%s: %q, want %q (all: %v)", key, got, want, status)
		}
	}
}

// TestMedianRoundIsNotTheFastest: a phase's figure is its median round,
// of an even number the slower middle one, never the best.
func TestMedianRoundIsNotTheFastest(t *testing.T) {
	round := func(seconds float64) Measured {
		return Measured{PhaseResult: PhaseResult{Records: 1000, Seconds: seconds}}
	}
	for _, tc := range []struct {
		seconds []float64
		want    float64
	}{
		{[]float64{1}, 1},
		{[]float64{1, 3, 2}, 2},
		{[]float64{4, 1}, 4},
		{[]float64{1, 2, 3, 4}, 3},
	} {
		var rs []Measured
		for _, s := range tc.seconds {
			rs = append(rs, round(s))
		}
		if got := medianRound(rs).Seconds; got != tc.want {
			t.Errorf("rounds of %v s: median %v s, want %v", tc.seconds, got, tc.want)
		}
	}
}

// TestCPUEfficiencyWithoutTheCollector: the runtime's shares take the
// garbage collector out of each phase's CPU, so limits that collect more
// than the mirror (two processes with small heaps) show it.
func TestCPUEfficiencyWithoutTheCollector(t *testing.T) {
	phase := func(cpu, user, gc float64) Measured {
		return Measured{PhaseResult: PhaseResult{Records: 1000, Seconds: 1, CPUSeconds: cpu, GoCPU: GoCPU{User: user, GC: gc, Idle: 5}}}
	}
	c := CaseResult{
		Read:   phase(0.6, 1, 1), // half of it GC: 0.3 s of user CPU
		Send:   phase(0.6, 3, 1), // a quarter: 0.45 s
		Mirror: phase(1.0, 4, 1), // a fifth: 0.8 s
	}
	if got := c.CPUEfficiency(); got < 1.19 || got > 1.21 {
		t.Errorf("CPU efficiency %v, want 1.2", got)
	}
	if got := c.UserCPUEfficiency(); got < 0.93 || got > 0.95 {
		t.Errorf("without GC %v, want 0.9375", got)
	}
	if got := c.Mirror.GCShare(); got != 0.2 {
		t.Errorf("GC share %v, want 0.2", got)
	}
	if got := (Measured{PhaseResult: PhaseResult{Records: 1000, CPUSeconds: 1}}).UserCPUPer1k(); got != 1 {
		t.Errorf("without the runtime's figures: %v s per 1k, want the whole CPU, 1", got)
	}
}

// TestQuotaAndScaleOutTargets: the quota and scale-out cases print ok or
// MISS lines for their targets as the throughput cases do.
func TestQuotaAndScaleOutTargets(t *testing.T) {
	r := &Results{
		Quota: []QuotaResult{
			{Case: "100B-keyed", Units: 1, Fraction: 1.01, UsefulFraction: 1.01, Drains: 4},
			{Case: "1KiB-keyed", Units: 2, Fraction: 0.95, UsefulFraction: 0.85, Drains: 4, FailedDrains: 1, Duplicates: 7},
		},
		Scale: []ScaleResult{
			{Processes: 1, Round: 1},
			{Processes: 2, Round: 1, PerProcess: []ProcessShare{{Rebalanced: 0}, {Rebalanced: 0}}},
			{Processes: 4, Round: 1, Duplicates: 3, PerProcess: []ProcessShare{{Rebalanced: 2}, {}, {Rebalanced: 1}, {}}},
		},
	}
	got := map[string]string{}
	for _, tg := range r.Targets() {
		got[tg.Text] = tg.Status
	}
	for text, want := range map[string]string{
		"quota 100B-keyed 1 TU: 1.01 of the quota carried each record once (1.01 accepted) (target ≥ 0.90)":               "ok",
		"quota 100B-keyed 1 TU: 0 of 4 drains failed (target 0)":                                                          "ok",
		"quota 100B-keyed 1 TU: 0 duplicates (target 0 within one process)":                                               "ok",
		"quota 1KiB-keyed 2 TU: 0.85 of the quota carried each record once (0.95 accepted) (target ≥ 0.90)":               "MISS",
		"quota 1KiB-keyed 2 TU: 1 of 4 drains failed (target 0)":                                                          "MISS",
		"quota 1KiB-keyed 2 TU: 7 duplicates (target 0 within one process)":                                               "MISS",
		"scale-out 1 process(es), round 1: 0 duplicates (target 0)":                                                       "ok",
		"scale-out 2 process(es), round 1: 0 drains ended by a rebalance (issue 48's target: 0, incremental rebalancing)": "ok",
		"scale-out 4 process(es), round 1: 3 duplicates (target 0)":                                                       "MISS",
		"scale-out 4 process(es), round 1: 3 drains ended by a rebalance (issue 48's target: 0, incremental rebalancing)": "MISS",
	} {
		if got[text] != want {
			t.Errorf("%q: %q, want %q (all: %v)", text, got[text], want, got)
		}
	}
}
