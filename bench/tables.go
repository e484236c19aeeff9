package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Generated tables. A Markdown document quotes a run's figures only
// between a begin marker naming the table and its result files and an end
// marker:
//
//	<!-- bench-table throughput bench/results/A.json bench/results/B.json -->
//	... (written by GenerateTables, never by hand)
//	<!-- end bench-table -->
//
// GenerateTables rewrites what is between them from the files (committed
// under bench/results/, written by `go run ./scripts/bench -out ...`), so a
// figure typed by hand differs from the generated text and the test that
// compares the committed documents with it fails.
const (
	tableBeginPrefix = "<!-- bench-table "
	tableEnd         = "<!-- end bench-table -->"
)

var tableBegin = regexp.MustCompile(`(?m)^<!-- bench-table ([a-z-]+)((?: [^ >]+)+) -->\n`)

// GenerateTables returns doc with every generated table rewritten from the
// result files its marker names; read opens a file by the path in the
// marker (relative to the repository root).
func GenerateTables(doc []byte, read func(path string) ([]byte, error)) ([]byte, error) {
	var out bytes.Buffer
	rest := doc
	for {
		loc := tableBegin.FindSubmatchIndex(rest)
		if loc == nil {
			if bytes.Contains(rest, []byte(tableEnd)) {
				return nil, fmt.Errorf("bench: %q without a table before it", tableEnd)
			}
			out.Write(rest)
			return out.Bytes(), nil
		}
		kind := string(rest[loc[2]:loc[3]])
		files := strings.Fields(string(rest[loc[4]:loc[5]]))
		out.Write(rest[:loc[1]])
		rest = rest[loc[1]:]
		end := bytes.Index(rest, []byte(tableEnd))
		if end < 0 {
			return nil, fmt.Errorf("bench: table %s %v has no %q", kind, files, tableEnd)
		}
		if next := bytes.Index(rest[:end], []byte(tableBeginPrefix)); next >= 0 {
			return nil, fmt.Errorf("bench: table %s %v has no %q before the next table", kind, files, tableEnd)
		}
		var runs [][]resultRow
		for _, f := range files {
			data, err := read(f)
			if err != nil {
				return nil, fmt.Errorf("bench: table %s: %w", kind, err)
			}
			var rows []resultRow
			if err := json.Unmarshal(data, &rows); err != nil {
				return nil, fmt.Errorf("bench: table %s: %s: %w", kind, f, err)
			}
			runs = append(runs, rows)
		}
		var text string
		var err error
		switch kind {
		case "throughput":
			text, err = throughputTable(runs, files)
		case "cluster":
			text, err = clusterTable(runs, files)
		default:
			err = fmt.Errorf("unknown table %q", kind)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		out.WriteString(text)
		out.WriteString(tableEnd)
		rest = rest[end+len(tableEnd):]
	}
}

// resultRow is the part of a result file's object (Results.JSON) that
// generated tables read.
type resultRow struct {
	Case string `json:"case"`
	// A throughput case's figures (each its phase's median round).
	MBPerS          float64 `json:"mb_per_s"`
	ReadMBPerS      float64 `json:"read_limit_mb_per_s"`
	SendMBPerS      float64 `json:"send_limit_mb_per_s"`
	SerialMBPerS    float64 `json:"serial_limit_mb_per_s"`
	ParallelMBPerS  float64 `json:"parallel_limit_mb_per_s"`
	RatioVsSerial   float64 `json:"ratio_vs_serial_limit"`
	RatioVsParallel float64 `json:"ratio_vs_parallel_limit"`
	CPUEfficiency   float64 `json:"cpu_efficiency"`
	UserCPUEff      float64 `json:"user_cpu_efficiency"`
	GCShare         float64 `json:"gc_cpu_share"`
	ReadGCShare     float64 `json:"read_gc_cpu_share"`
	SendGCShare     float64 `json:"send_gc_cpu_share"`
	CPUPer1k        float64 `json:"cpu_s_per_1k_records"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	// A cluster-sized case's figures.
	Cluster        *ClusterResult `json:"cluster"`
	RatioVs20      float64        `json:"ratio_vs_20_partitions"`
	PeakRSSBoundMB float64        `json:"peak_rss_bound_mb"`
	// The run's object.
	Machine    *Machine `json:"machine"`
	LoadAvgEnd string   `json:"loadavg_at_end"`
}

// runsAbout describes each run (its file, date and load) and returns its
// rows that keep(row) accepts, by case in order of appearance.
func runsAbout(runs [][]resultRow, files []string, keep func(resultRow) bool) (about []string, order []string, byCase map[string][]resultRow, err error) {
	byCase = map[string][]resultRow{}
	for i, rows := range runs {
		var machine *Machine
		var loadEnd string
		for _, r := range rows {
			switch {
			case r.Case == "run":
				machine, loadEnd = r.Machine, r.LoadAvgEnd
			case keep(r):
				if _, ok := byCase[r.Case]; !ok {
					order = append(order, r.Case)
				}
				byCase[r.Case] = append(byCase[r.Case], r)
			}
		}
		if machine == nil {
			return nil, nil, nil, fmt.Errorf("%s: no run object", files[i])
		}
		about = append(about, fmt.Sprintf("`%s`: %s, %d CPUs, load average %s at the start, %s at the end",
			files[i], machine.Date, machine.NumCPU, firstField(machine.LoadAvg), firstField(loadEnd)))
	}
	if len(order) == 0 {
		return nil, nil, nil, fmt.Errorf("no case for the table in %v", files)
	}
	return about, order, byCase, nil
}

// writeRuns writes a generated table's first lines: where it comes from,
// what its figures are, and each run's description.
func writeRuns(b *strings.Builder, about []string, figures string) {
	fmt.Fprintf(b, "Generated by `go run ./scripts/bench -tables` from %d run(s); %s:\n\n", len(about), figures)
	for _, a := range about {
		fmt.Fprintf(b, "* %s\n", a)
	}
}

// medianOf is the median of f over rs.
func medianOf(rs []resultRow, f func(resultRow) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

// clusterTable is the cluster-sized cases' table (issue 48): per case, the
// median over the runs of each figure.
func clusterTable(runs [][]resultRow, files []string) (string, error) {
	about, order, byCase, err := runsAbout(runs, files, func(r resultRow) bool { return r.Cluster != nil })
	if err != nil {
		return "", err
	}
	var b strings.Builder
	writeRuns(&b, about, "each figure is the median over the runs")
	b.WriteString("\n| case | records | catch-up MB/s | ÷ 20 partitions | first record sent s | peak RSS MB (bound) | idle RSS MB | Kafka connections: catch-up / idle (most) / idle (at its end) | Kafka requests/s idle | Event Hubs connections |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range order {
		rs := byCase[name]
		c := func(f func(ClusterResult) float64) float64 {
			return medianOf(rs, func(r resultRow) float64 { return f(*r.Cluster) })
		}
		fmt.Fprintf(&b, "| `%s` | %.0f | %.1f | %.2f | %.2f | %.0f (%.0f) | %.0f | %.0f / %.0f / %.0f | %.1f | %.0f |\n", name,
			c(func(r ClusterResult) float64 { return float64(r.Records) }),
			medianOf(rs, func(r resultRow) float64 { return r.MBPerS }),
			medianOf(rs, func(r resultRow) float64 { return r.RatioVs20 }),
			c(func(r ClusterResult) float64 { return r.FirstSentSeconds }),
			medianOf(rs, func(r resultRow) float64 { return r.PeakRSSMB }),
			medianOf(rs, func(r resultRow) float64 { return r.PeakRSSBoundMB }),
			c(func(r ClusterResult) float64 { return mb(r.IdleRSS) }),
			c(func(r ClusterResult) float64 { return float64(r.KafkaConnsCatchUp) }),
			c(func(r ClusterResult) float64 { return float64(r.KafkaConnsIdle) }),
			c(func(r ClusterResult) float64 { return float64(r.KafkaConnsIdleEnd) }),
			c(func(r ClusterResult) float64 { return r.IdleRequestsPerSec }),
			c(func(r ClusterResult) float64 { return float64(r.EventHubsConns) }))
	}
	return b.String(), nil
}

// throughputTable is the throughput cases' table: per case, the median
// over the runs of each figure, and a line naming the runs and the
// machine's load during each.
func throughputTable(runs [][]resultRow, files []string) (string, error) {
	about, order, byCase, err := runsAbout(runs, files, func(r resultRow) bool { return r.ReadMBPerS > 0 && r.SendMBPerS > 0 })
	if err != nil {
		return "", err
	}
	var b strings.Builder
	writeRuns(&b, about, "each figure is the median over the runs of the run's median round")
	b.WriteString("\n| case | mirror MB/s | read limit MB/s | send limit MB/s | serial limit MB/s | parallel limit MB/s | mirror ÷ serial | mirror ÷ parallel | CPU efficiency | without GC | GC share of CPU: read / send / mirror | CPU s / 1k records | peak RSS MB |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range order {
		rs := byCase[name]
		med := func(f func(resultRow) float64) float64 { return medianOf(rs, f) }
		fmt.Fprintf(&b, "| `%s` | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.0f / %.0f / %.0f %% | %.4f | %.0f |\n", name,
			med(func(r resultRow) float64 { return r.MBPerS }),
			med(func(r resultRow) float64 { return r.ReadMBPerS }),
			med(func(r resultRow) float64 { return r.SendMBPerS }),
			med(func(r resultRow) float64 { return r.SerialMBPerS }),
			med(func(r resultRow) float64 { return r.ParallelMBPerS }),
			med(func(r resultRow) float64 { return r.RatioVsSerial }),
			med(func(r resultRow) float64 { return r.RatioVsParallel }),
			med(func(r resultRow) float64 { return r.CPUEfficiency }),
			med(func(r resultRow) float64 { return r.UserCPUEff }),
			100*med(func(r resultRow) float64 { return r.ReadGCShare }),
			100*med(func(r resultRow) float64 { return r.SendGCShare }),
			100*med(func(r resultRow) float64 { return r.GCShare }),
			med(func(r resultRow) float64 { return r.CPUPer1k }),
			med(func(r resultRow) float64 { return r.PeakRSSMB }))
	}
	return b.String(), nil
}

// firstField is the 1-minute figure of a load average ("-" when unknown).
func firstField(loadavg string) string {
	f := strings.Fields(loadavg)
	if len(f) == 0 {
		return "-"
	}
	return f[0]
}

// TrimResults keeps what a committed result file needs from a run's
// objects: it drops the per-sample lists (idle drains, start-to-ready)
// and the profiles' paths, which are the machine's, not the run's.
func TrimResults(rows []map[string]any) []map[string]any {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		t := make(map[string]any, len(r))
		for k, v := range r {
			if slices.Contains([]string{"samples_ms", "profiles", "points"}, k) {
				continue
			}
			t[k] = v
		}
		out = append(out, t)
	}
	return out
}

// TableDocs are the documents, relative to the repository root, whose
// tables GenerateTables writes.
var TableDocs = []string{"docs/performance.md"}

// WriteTrimmedJSON writes TrimResults of r.JSON() to path: a result file
// to commit under bench/results/ and quote in a generated table.
func (r *Results) WriteTrimmedJSON(path string) error {
	return writeJSON(path, TrimResults(r.JSON()))
}
