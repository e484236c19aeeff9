// Command faultstable renders the figures the fault scenarios wrote (one
// JSON line per scenario, EHMIRROR_FAULTS_REPORT) as the Markdown table of
// docs/faults.md:
//
//	EHMIRROR_FAULTS_REPORT=/tmp/faults.jsonl go test -count=1 -v ./faults/
//	go run ./faults/cmd/faultstable -in /tmp/faults.jsonl -doc docs/faults.md
//
// Without -doc the table is written to stdout.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ehmirror/ehmirror/faults"
)

func main() {
	in := flag.String("in", "", "JSON-lines figures file written by the tests (required)")
	doc := flag.String("doc", "", "Markdown file whose table (between the faults-table markers) is replaced")
	flag.Parse()
	if err := run(*in, *doc); err != nil {
		slog.Error("faultstable", "err", err)
		os.Exit(1)
	}
}

func run(in, doc string) error {
	if in == "" {
		return fmt.Errorf("-in is required")
	}
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("opening figures: %w", err)
	}
	defer f.Close()
	rows, err := faults.ReadRows(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s holds no figures", in)
	}
	var table bytes.Buffer
	latest := rows[0].Time
	for _, r := range rows {
		if r.Time.After(latest) {
			latest = r.Time
		}
	}
	fmt.Fprintf(&table, "Run of %s UTC (%d scenarios).\n\n", latest.UTC().Format(time.DateTime), len(rows))
	if err := faults.WriteMarkdown(&table, rows); err != nil {
		return err
	}
	if doc == "" {
		_, err := os.Stdout.Write(table.Bytes())
		return err
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return fmt.Errorf("reading %s: %w", doc, err)
	}
	updated, err := faults.ReplaceTable(string(old), table.String())
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	if err := os.WriteFile(doc, []byte(updated), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", doc, err)
	}
	return nil
}
