package bench

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsTablesAreGenerated: every table the documents quote between
// bench-table markers is exactly what GenerateTables writes from the
// committed result files, so a figure typed by hand, or a result file
// changed without regenerating, fails here.
func TestDocsTablesAreGenerated(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) ([]byte, error) { return os.ReadFile(filepath.Join(root, filepath.FromSlash(path))) }
	tables := 0
	for _, doc := range TableDocs {
		text, err := read(doc)
		if err != nil {
			t.Fatal(err)
		}
		tables += strings.Count(string(text), tableEnd)
		got, err := GenerateTables(text, read)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if string(got) != string(text) {
			t.Errorf("%s differs from its generated tables; run `go run ./scripts/bench -tables` (and never type a figure between bench-table markers)", doc)
		}
	}
	if tables == 0 {
		t.Errorf("no generated table in %v", TableDocs)
	}
}

// TestAHandTypedFigureIsRewritten: GenerateTables writes the figures of
// the result file over whatever stands between the markers, medians over
// the runs it names, says which runs and their load, and refuses a marker
// without its end or a file it cannot read.
func TestAHandTypedFigureIsRewritten(t *testing.T) {
	run := func(mbps, load string) string {
		return `[{"case":"1KiB-keyed","mb_per_s":` + mbps + `,"read_limit_mb_per_s":500,"send_limit_mb_per_s":300,"serial_limit_mb_per_s":187.5,` +
			`"parallel_limit_mb_per_s":250,"ratio_vs_serial_limit":1,"ratio_vs_parallel_limit":0.75,"cpu_efficiency":1.1,"user_cpu_efficiency":1,` +
			`"gc_cpu_share":0.2,"read_gc_cpu_share":0.3,"send_gc_cpu_share":0.1,"cpu_s_per_1k_records":0.005,"peak_rss_mb":300},` +
			`{"case":"run","machine":{"date":"2026-12-06T05:00:00Z","nproc":2,"loadavg_at_start":"` + load + ` 1 1"},"loadavg_at_end":"2.5 1 1"}]`
	}
	files := map[string]string{
		"bench/results/a.json": run("100", "9.5"),
		"bench/results/b.json": run("300", "0.1"),
		"bench/results/c.json": run("200", "4.0"),
	}
	read := func(path string) ([]byte, error) {
		if s, ok := files[path]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	doc := "intro\n<!-- bench-table throughput bench/results/a.json bench/results/b.json bench/results/c.json -->\n| `1KiB-keyed` | 999.9 |\n<!-- end bench-table -->\nafter\n"
	got, err := GenerateTables([]byte(doc), read)
	if err != nil {
		t.Fatal(err)
	}
	text := string(got)
	for _, want := range []string{"| `1KiB-keyed` | 200.0 | 500.0 | 300.0 | 187.5 | 250.0 | 1.00 | 0.75 | 1.10 | 1.00 | 30 / 10 / 20 % | 0.0050 | 300 |", "load average 9.5 at the start, 2.5 at the end", "3 run(s)"} {
		if !strings.Contains(text, want) {
			t.Errorf("generated text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "999.9") || !strings.HasPrefix(text, "intro\n") || !strings.HasSuffix(text, "<!-- end bench-table -->\nafter\n") {
		t.Errorf("the hand-typed row survived or the text around the table changed:\n%s", text)
	}
	again, err := GenerateTables(got, read)
	if err != nil || string(again) != text {
		t.Errorf("generating twice changed the text (%v)", err)
	}
	if _, err := GenerateTables([]byte(strings.Replace(doc, "<!-- end bench-table -->\n", "", 1)), read); err == nil {
		t.Error("a table without its end marker was accepted")
	}
	if _, err := GenerateTables([]byte(strings.Replace(doc, "c.json", "missing.json", 1)), read); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing result file: %v", err)
	}
}

// TestClusterTableIsGenerated: the cluster-sized cases' table quotes each
// case's figures from its result file.
func TestClusterTableIsGenerated(t *testing.T) {
	file := `[{"case":"1x1000","mb_per_s":150,"ratio_vs_20_partitions":0.75,"peak_rss_mb":412,"peak_rss_bound_mb":334.22,` +
		`"cluster":{"records":300000,"first_sent_seconds":1.25,"idle_rss_bytes":300000000,"kafka_connections_catch_up":906,"kafka_connections_idle":1005,"kafka_connections_idle_end":1001,"kafka_requests_per_s_idle":512.5,"eventhubs_connections":1}},` +
		`{"case":"run","machine":{"date":"2026-12-06T05:00:00Z","nproc":2,"loadavg_at_start":"12.0 1 1"},"loadavg_at_end":"14.0 1 1"}]`
	read := func(string) ([]byte, error) { return []byte(file), nil }
	got, err := GenerateTables([]byte("<!-- bench-table cluster bench/results/c.json -->\n<!-- end bench-table -->\n"), read)
	if err != nil {
		t.Fatal(err)
	}
	if want := "| `1x1000` | 300000 | 150.0 | 0.75 | 1.25 | 412 (334) | 300 | 906 / 1005 / 1001 | 512.5 | 1 |"; !strings.Contains(string(got), want) {
		t.Errorf("generated table lacks %q:\n%s", want, got)
	}
}
