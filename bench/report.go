package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// Targets of issue 7.
const (
	TargetRatio          = 0.8   // mirror ÷ min(read, send), every case
	TargetKeyedVsKeyless = 0.8   // keyed ÷ keyless mirror MB/s, same size
	Target1KiBMBps       = 100.0 // end to end for 1 KiB records, if the send limit allows
	TargetIdleDrainMs    = 50.0
	TargetStartToReadyMs = 1000.0
	// TargetRSSGrowth bounds how much the peak RSS may grow from the probe's
	// backlog to the full one (several times larger): memory follows the
	// drain's byte bound, not the backlog.
	TargetRSSGrowth = 1.5
)

// JSON returns the objects of .bench/latest.json: one per case, then
// idle_drain_ms, start_to_ready_ms, peak RSS against backlog, and the run.
func (r *Results) JSON() []map[string]any {
	var out []map[string]any
	var rss []map[string]any
	for _, c := range r.Cases {
		limit, by := c.Limit()
		out = append(out, map[string]any{
			"case":                            c.Shape.Name,
			"record_bytes":                    c.Shape.Size,
			"keyed":                           c.Shape.Keyed,
			"records":                         c.Records,
			"backlog_mb":                      mb(c.BacklogBytes),
			"seconds":                         round2(c.Mirror.Seconds),
			"records_per_s":                   round2(c.Mirror.RecordsPerSecond()),
			"mb_per_s":                        round2(c.Mirror.MBPerSecond()),
			"read_limit_records_per_s":        round2(c.Read.RecordsPerSecond()),
			"read_limit_mb_per_s":             round2(c.Read.MBPerSecond()),
			"send_limit_records_per_s":        round2(c.Send.RecordsPerSecond()),
			"send_limit_mb_per_s":             round2(c.Send.MBPerSecond()),
			"limit_mb_per_s":                  round2(limit),
			"limited_by":                      by,
			"ratio":                           round2(c.Ratio()),
			"serial_limit_mb_per_s":           round2(c.SerialLimit()),
			"ratio_vs_serial_limit":           round2(c.SerialRatio()),
			"cpu_efficiency":                  round2(c.CPUEfficiency()),
			"cpu_s_per_1k_records":            round4(c.Mirror.CPUPer1k()),
			"infra_cpu_s_per_1k_records":      round4(c.Mirror.InfraCPUPer1k()),
			"read_cpu_s_per_1k_records":       round4(c.Read.CPUPer1k()),
			"send_cpu_s_per_1k_records":       round4(c.Send.CPUPer1k()),
			"read_infra_cpu_s_per_1k_records": round4(c.Read.InfraCPUPer1k()),
			"send_infra_cpu_s_per_1k_records": round4(c.Send.InfraCPUPer1k()),
			"mirror_io":                       c.Mirror.Counters,
			"send_io":                         c.Send.Counters,
			"peak_rss_mb":                     mb(c.Mirror.PeakRSS),
			"read_peak_rss_mb":                mb(c.Read.PeakRSS),
			"send_peak_rss_mb":                mb(c.Send.PeakRSS),
			"peak_rss_method":                 rssMethod(c.Mirror.PhaseResult),
			"probe_records":                   c.Probe.Records,
			"probe_backlog_mb":                mb(c.Probe.Bytes),
			"probe_records_per_s":             round2(c.Probe.RecordsPerSecond()),
			"probe_peak_rss_mb":               mb(c.Probe.PeakRSS),
			"load_seconds":                    round2(c.LoadSeconds),
			"profiles":                        c.Profiles,
		})
		rss = append(rss, map[string]any{"case": c.Shape.Name, "backlog_records": c.Probe.Records, "backlog_mb": mb(c.Probe.Bytes), "peak_rss_mb": mb(c.Probe.PeakRSS)})
		if c.Calibration.Records > 0 && c.Calibration.Records != c.Records {
			rss = append(rss, map[string]any{"case": c.Shape.Name, "backlog_records": c.Calibration.Records, "backlog_mb": mb(c.Calibration.Bytes), "peak_rss_mb": mb(c.Calibration.PeakRSS)})
		}
		rss = append(rss, map[string]any{"case": c.Shape.Name, "backlog_records": c.Records, "backlog_mb": mb(c.BacklogBytes), "peak_rss_mb": mb(c.Mirror.PeakRSS)})
	}
	out = append(out,
		map[string]any{"case": "idle_drain_ms", "idle_drain_ms": round2(median(r.IdleDrainsMs)), "samples_ms": r.IdleDrainsMs,
			"what": "median duration of mirror.Drain on a warm process when every partition is caught up"},
		map[string]any{"case": "start_to_ready_ms", "start_to_ready_ms": round2(median(r.StartToReadyMs)), "samples_ms": r.StartToReadyMs,
			"what": "median time from exec of the handler to its first answer to GET / (polled every 1 ms)"},
		map[string]any{"case": "peak_rss_vs_backlog", "inflight_bytes_mb": mb(r.InFlightBytes), "points": rss,
			"what": "child VmHWM during a drain, for two backlog sizes per case"},
		map[string]any{"case": "run", "machine": r.Machine, "duration_s": round2(r.Duration.Seconds()),
			"fetch_bytes": r.FetchBytes, "inflight_bytes": r.InFlightBytes,
			"units": "MB = 10^6 bytes of record values; CPU = getrusage user+system of the measured child (cpu_s) or of the process running kfake and the emulator (infra_cpu_s)"},
	)
	return out
}

func rssMethod(p PhaseResult) string {
	if p.PeakRSSReset {
		return "VmHWM of the child process, reset (clear_refs 5) when the measured drain started"
	}
	return "VmHWM of the child process over its whole life"
}

func roundsMBps(ms []Measured) []float64 {
	out := make([]float64, 0, len(ms))
	for _, m := range ms {
		out = append(out, round2(m.MBPerSecond()))
	}
	return out
}

// seriesAll is every sample in MB, at most 40 of them evenly spaced.
func seriesAll(xs []int64) []float64 { return series(xs, min(len(xs), 40)) }

func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

// WriteJSON writes r.JSON() to path, creating its directory.
func (r *Results) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r.JSON(), "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encoding results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: writing results: %w", err)
	}
	return nil
}

// PrintTable writes the run's tables and the targets' status to w.
func (r *Results) PrintTable(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "ehmirror bench, %s, nproc %d, %s, %s, %s, load avg at start %s; in-flight bound %.0f MB, fetch %d B\n",
		m.Date, m.NumCPU, m.CPUModel, m.MemTotal, m.Go, m.LoadAvg, mb(r.InFlightBytes), r.FetchBytes)
	fmt.Fprintf(&b, "MB = 10^6 value bytes. ratio = mirror ÷ min(read, send). serial = 1/(1/read + 1/send), the limit when reading and sending share the CPUs.\n")
	fmt.Fprintf(&b, "CPU = s per 1,000 records: client (the measured child) / infra (kfake + emulator, this process). CPU eff = (read + send client CPU) ÷ mirror client CPU.\n")
	fmt.Fprintf(&b, "peak RSS = child VmHWM during the drain of the full backlog; small backlog = the probe drain's backlog and peak RSS.\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\trecords\tmirror rec/s\tmirror MB/s\tread MB/s\tsend MB/s\tratio\tlimit\tserial MB/s\t÷serial\tCPU client\tCPU infra\tCPU eff\tpeak RSS MB\tsmall backlog MB → RSS MB\t")
	for _, c := range r.Cases {
		_, by := c.Limit()
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t%.1f\t%.2f\t%.4f\t%.4f\t%.2f\t%.0f\t%.0f → %.0f\t\n",
			c.Shape.Name, c.Records, c.Mirror.RecordsPerSecond(), c.Mirror.MBPerSecond(), c.Read.MBPerSecond(), c.Send.MBPerSecond(),
			c.Ratio(), by, c.SerialLimit(), c.SerialRatio(), c.Mirror.CPUPer1k(), c.Mirror.InfraCPUPer1k(), c.CPUEfficiency(), mb(c.Mirror.PeakRSS),
			mb(c.Probe.Bytes), mb(c.Probe.PeakRSS))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintf(&b, "\nphases (rec/s | s | CPU client s/1k | CPU infra s/1k | peak RSS MB):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tread\tsend\tmirror\tprobe drain\t")
	for _, c := range r.Cases {
		f := func(p Measured) string {
			return fmt.Sprintf("%.0f | %.1f | %.4f | %.4f | %.0f", p.RecordsPerSecond(), p.Seconds, p.CPUPer1k(), p.InfraCPUPer1k(), mb(p.PeakRSS))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", c.Shape.Name, f(c.Read), f(c.Send), f(c.Mirror), f(c.Probe))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintf(&b, "\nidle drain (warm process): median %.1f ms of %d %v\n", median(r.IdleDrainsMs), len(r.IdleDrainsMs), r.IdleDrainsMs)
	fmt.Fprintf(&b, "handler start-to-ready: median %.1f ms of %d %v\n\n", median(r.StartToReadyMs), len(r.StartToReadyMs), r.StartToReadyMs)
	for _, t := range r.Targets() {
		fmt.Fprintf(&b, "%-4s %s\n", t.Status, t.Text)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// Target is one of the targets checked against a run.
type Target struct {
	Status string // "ok", "MISS" or "n/a"
	Text   string
}

// Targets checks the targets.
func (r *Results) Targets() []Target {
	var out []Target
	check := func(ok bool, format string, args ...any) {
		st := "ok"
		if !ok {
			st = "MISS"
		}
		out = append(out, Target{st, fmt.Sprintf(format, args...)})
	}
	byName := map[string]CaseResult{}
	for _, c := range r.Cases {
		byName[c.Shape.Name] = c
		l, by := c.Limit()
		check(c.Ratio() >= TargetRatio, "%s: mirror %.1f MB/s ÷ %s limit %.1f MB/s = %.2f (target ≥ %.1f)", c.Shape.Name, c.Mirror.MBPerSecond(), by, l, c.Ratio(), TargetRatio)
	}
	for _, c := range r.Cases {
		if !c.Shape.Keyed {
			continue
		}
		kl, ok := byName[strings.TrimSuffix(c.Shape.Name, "-keyed")+"-keyless"]
		if !ok {
			continue
		}
		q := ratio(c.Mirror.MBPerSecond(), kl.Mirror.MBPerSecond())
		check(q >= TargetKeyedVsKeyless, "%s: keyed ÷ keyless = %.1f ÷ %.1f MB/s = %.2f (target ≥ %.1f)", c.Shape.Name, c.Mirror.MBPerSecond(), kl.Mirror.MBPerSecond(), q, TargetKeyedVsKeyless)
	}
	for _, c := range r.Cases {
		if c.Shape.Size != 1<<10 {
			continue
		}
		if c.Send.MBPerSecond() < Target1KiBMBps {
			out = append(out, Target{"n/a", fmt.Sprintf("%s: %.1f MB/s end to end; the send limit %.1f MB/s is below the %.0f MB/s target", c.Shape.Name, c.Mirror.MBPerSecond(), c.Send.MBPerSecond(), Target1KiBMBps)})
			continue
		}
		check(c.Mirror.MBPerSecond() >= Target1KiBMBps, "%s: %.1f MB/s end to end (target ≥ %.0f MB/s; send limit %.1f)", c.Shape.Name, c.Mirror.MBPerSecond(), Target1KiBMBps, c.Send.MBPerSecond())
	}
	for _, c := range r.Cases {
		small, large := c.Probe.PeakRSS, c.Mirror.PeakRSS
		grew := ratio(float64(c.BacklogBytes), float64(c.Probe.Bytes))
		// The engine charges value + key + 256 bytes per record.
		if weight := c.Probe.Records * int64(c.Shape.Size+256); weight < r.InFlightBytes {
			out = append(out, Target{"n/a", fmt.Sprintf("%s: peak RSS %.0f → %.0f MB; the smaller backlog (%.0f MB as the engine charges it) is below the in-flight bound (%.0f MB), so it proves nothing",
				c.Shape.Name, mb(small), mb(large), mb(weight), mb(r.InFlightBytes))})
			continue
		}
		check(float64(large) <= TargetRSSGrowth*float64(small), "%s: peak RSS %.0f MB at a %.0f MB backlog vs %.0f MB at %.0f MB (backlog ×%.1f, RSS ×%.2f; target RSS ×≤ %.2f)",
			c.Shape.Name, mb(large), mb(c.BacklogBytes), mb(small), mb(c.Probe.Bytes), grew, ratio(float64(large), float64(small)), TargetRSSGrowth)
	}
	if len(r.IdleDrainsMs) > 0 {
		check(median(r.IdleDrainsMs) < TargetIdleDrainMs, "idle drain: median %.1f ms (target < %.0f ms)", median(r.IdleDrainsMs), TargetIdleDrainMs)
	}
	if len(r.StartToReadyMs) > 0 {
		check(median(r.StartToReadyMs) < TargetStartToReadyMs, "start-to-ready: median %.1f ms (target < %.0f ms)", median(r.StartToReadyMs), TargetStartToReadyMs)
	}
	return out
}
