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
