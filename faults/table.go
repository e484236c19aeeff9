// Package faults proves, with real components only, that the mirror loses no
// record under faults, kills, bad input and concurrency (issue 8).
//
// The scenarios are tests (go test ./faults/; the long soak runs with
// EHMIRROR_SOAK=1 and -run Soak). Each runs kfake, the project's Event Hubs
// emulator, the real azeventhubs SDK and, for the process scenarios, the real
// handler binary under the local Functions host, injects its fault while
// records are produced and drained, and verifies the provenance properties
// documented in docs/faults.md.
//
// This file holds what the tests and cmd/faultstable share: one figures row
// per scenario, written as a JSON line to the file named by
// EHMIRROR_FAULTS_REPORT, and the Markdown table rendered from those rows.
package faults

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// ReportEnv names the environment variable that, when set to a file path,
// makes every scenario append its Row to that file as one JSON line.
const ReportEnv = "EHMIRROR_FAULTS_REPORT"

// Row is the figures of one scenario run.
type Row struct {
	// Scenario is the scenario number and letter, e.g. "2b".
	Scenario string `json:"scenario"`
	// Name says what was injected.
	Name string `json:"name"`
	// Test is the Go test that produced the row.
	Test string `json:"test"`
	// Produced counts the records Kafka held (read back from the broker
	// after the run, across topic incarnations).
	Produced int64 `json:"produced"`
	// Mirrored counts the distinct records found in Event Hubs.
	Mirrored int64 `json:"mirrored"`
	// Lost counts records neither mirrored nor explained by a reported,
	// policy-driven outcome (retention gap, skipped or held oversized
	// record, missing hub, topic deleted by an operator). Must be 0.
	Lost int64 `json:"lost"`
	// Explained counts records not mirrored for a reason the mirror
	// reported (see Notes).
	Explained int64 `json:"explained"`
	// Duplicates counts extra copies: events beyond the first per record.
	Duplicates int64 `json:"duplicates"`
	// DuplicateBound is the bound the test asserted Duplicates against.
	DuplicateBound int64 `json:"duplicate_bound"`
	// OrderViolations counts events that broke per-key order (definition
	// in docs/faults.md).
	OrderViolations int64 `json:"order_violations"`
	// OffsetRegressions counts committed offsets seen to move backwards.
	OffsetRegressions int64 `json:"offset_regressions"`
	// OffsetSamples counts the committed-offset samples taken.
	OffsetSamples int64 `json:"offset_samples"`
	// Faults counts the fault injections (or kills) made.
	Faults int `json:"faults"`
	// Drains counts the drains (or invocations) run.
	Drains int `json:"drains"`
	// Notes says what else the scenario checked or explained.
	Notes string `json:"notes,omitempty"`
	// Time is when the row was written; Duration how long the run took.
	Time     time.Time     `json:"time"`
	Duration time.Duration `json:"duration_ns"`
	// Passed is false when the test failed.
	Passed bool `json:"passed"`
}

// Recorder appends rows to a JSON-lines file. It is safe for concurrent use;
// the zero value (or a nil *Recorder) records nothing.
type Recorder struct {
	path string
	mu   sync.Mutex
}

// NewRecorder returns a recorder writing to path; an empty path records
// nothing.
func NewRecorder(path string) *Recorder { return &Recorder{path: path} }

// Record appends one row.
func (r *Recorder) Record(row Row) error {
	if r == nil || r.path == "" {
		return nil
	}
	b, err := json.Marshal(row)
	if err != nil {
		return fmt.Errorf("encoding figures: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", r.path, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", r.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", r.path, err)
	}
	return nil
}

// ReadRows reads the rows of a JSON-lines file; when a scenario appears more
// than once, the last row wins.
func ReadRows(r io.Reader) ([]Row, error) {
	byKey := map[string]Row{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var row Row
		if err := json.Unmarshal([]byte(text), &row); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		key := row.Scenario + "\x00" + row.Test
		if _, seen := byKey[key]; !seen {
			order = append(order, key)
		}
		byKey[key] = row
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading figures: %w", err)
	}
	rows := make([]Row, 0, len(order))
	for _, k := range order {
		rows = append(rows, byKey[k])
	}
	slices.SortStableFunc(rows, func(a, b Row) int { return compareScenario(a.Scenario, b.Scenario) })
	return rows, nil
}

// compareScenario orders "2b" after "2a" and "10" after "9".
func compareScenario(a, b string) int {
	na, ra := splitScenario(a)
	nb, rb := splitScenario(b)
	if na != nb {
		return na - nb
	}
	return strings.Compare(ra, rb)
}

func splitScenario(s string) (int, string) {
	n, i := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		n = n*10 + int(s[i]-'0')
		i++
	}
	return n, s[i:]
}

// WriteMarkdown writes the figures table.
func WriteMarkdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| # | scenario | records produced | records lost | explained (reported) | duplicates (bound) | order violations | offset regressions (samples) | faults / drains | result |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		result := "pass"
		if !r.Passed {
			result = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d (≤ %d) | %d | %d (%d) | %d / %d | %s |\n",
			r.Scenario, cell(r.Name), r.Produced, r.Lost, r.Explained, r.Duplicates, r.DuplicateBound,
			r.OrderViolations, r.OffsetRegressions, r.OffsetSamples, r.Faults, r.Drains, result)
	}
	notes := false
	for _, r := range rows {
		if r.Notes == "" {
			continue
		}
		if !notes {
			b.WriteString("\nNotes:\n\n")
			notes = true
		}
		fmt.Fprintf(&b, "- **%s** (%s): %s\n", r.Scenario, r.Test, r.Notes)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Table markers delimit the generated part of docs/faults.md.
const (
	TableBegin = "<!-- faults-table:begin -->"
	TableEnd   = "<!-- faults-table:end -->"
)

// ReplaceTable returns doc with the text between the table markers replaced
// by table.
func ReplaceTable(doc, table string) (string, error) {
	before, rest, ok := strings.Cut(doc, TableBegin)
	if !ok {
		return "", errors.New("no " + TableBegin + " marker")
	}
	_, after, ok := strings.Cut(rest, TableEnd)
	if !ok {
		return "", errors.New("no " + TableEnd + " marker")
	}
	return before + TableBegin + "\n" + table + TableEnd + after, nil
}
