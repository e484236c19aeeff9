package verify

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ehmirror/ehmirror/mirror"
)

// TopicResult is the comparison of one Kafka topic with its event hub.
type TopicResult struct {
	Topic      string `json:"topic"`
	Hub        string `json:"hub"`
	Partitions int    `json:"partitions"`
	// KafkaRecords counts the records read from Kafka (below the end
	// offsets taken when the verification began).
	KafkaRecords int64 `json:"kafka_records"`
	// Events counts the events in the topic's hub that carry the topic's
	// provenance, duplicates included.
	Events int64 `json:"eventhubs_events"`
	// Missing counts records with no event: lost, unless the mirror has not
	// claimed them yet (see Pending).
	Missing int64 `json:"missing"`
	// Pending counts records with no event at or after the group's
	// committed offset: not mirrored yet, part of the lag.
	Pending int64 `json:"pending"`
	// Duplicates counts extra events of records already seen.
	Duplicates int64 `json:"duplicates"`
	// BodyMismatches, KeyMismatches and HeaderMismatches count events whose
	// body, kafka.key or kafka.header.* differ from the record.
	BodyMismatches   int64 `json:"body_mismatches"`
	KeyMismatches    int64 `json:"key_mismatches"`
	HeaderMismatches int64 `json:"header_mismatches"`
	// OrderViolations counts events that came before, in their Event Hubs
	// partition, an event of the same Kafka partition and key with a
	// higher offset (per Kafka partition alone under preserve).
	OrderViolations int64 `json:"order_violations"`
	// Misrouted counts the topic's events found in another topic's hub.
	Misrouted int64 `json:"misrouted"`
	// Unexpected counts events whose provenance names no readable record:
	// a partition that does not exist, or an offset Kafka did not return
	// (an aborted or compacted record).
	Unexpected int64 `json:"unexpected"`
	// BeforeLogStart counts events of records Kafka no longer holds
	// (retention); they cannot be compared.
	BeforeLogStart int64 `json:"before_log_start"`
	// BeyondSnapshot counts events of records produced after the
	// verification took the end offsets.
	BeyondSnapshot int64 `json:"beyond_snapshot"`
	// Lag is the consumer group's lag (records after its committed
	// offsets); -1 when no group was given.
	Lag int64 `json:"lag"`
}

// Mismatches is the sum of body, key and header mismatches.
func (t TopicResult) Mismatches() int64 {
	return t.BodyMismatches + t.KeyMismatches + t.HeaderMismatches
}

func (t *TopicResult) add(o TopicResult) {
	t.Partitions += o.Partitions
	t.KafkaRecords += o.KafkaRecords
	t.Events += o.Events
	t.Missing += o.Missing
	t.Pending += o.Pending
	t.Duplicates += o.Duplicates
	t.BodyMismatches += o.BodyMismatches
	t.KeyMismatches += o.KeyMismatches
	t.HeaderMismatches += o.HeaderMismatches
	t.OrderViolations += o.OrderViolations
	t.Misrouted += o.Misrouted
	t.Unexpected += o.Unexpected
	t.BeforeLogStart += o.BeforeLogStart
	t.BeyondSnapshot += o.BeyondSnapshot
	if t.Lag >= 0 && o.Lag >= 0 {
		t.Lag += o.Lag
	} else {
		t.Lag = -1
	}
}

// HubResult is what was read from one event hub.
type HubResult struct {
	Hub        string `json:"hub"`
	Partitions int    `json:"partitions"`
	// Events counts every event read.
	Events int64 `json:"events"`
	// Foreign counts events without the mirror's provenance properties.
	Foreign int64 `json:"foreign"`
	// OtherTopics counts events of topics that were not verified.
	OtherTopics int64 `json:"other_topics"`
	// Error is set when the hub could not be read (for example it does
	// not exist); its topics' records then count as missing.
	Error string `json:"error,omitempty"`
	// Incomplete lists partitions that stopped delivering before their
	// last sequence number.
	Incomplete []string `json:"incomplete,omitempty"`
}

// Report is the outcome of a verification.
type Report struct {
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	// Partitioning is the strategy whose order was checked.
	Partitioning mirror.Partitioning `json:"partitioning"`
	// Group is the consumer group whose committed offsets split missing
	// from pending; empty when none.
	Group            string        `json:"group"`
	FailOnDuplicates bool          `json:"fail_on_duplicates"`
	FailOnPending    bool          `json:"fail_on_pending"`
	Topics           []TopicResult `json:"topics"`
	Hubs             []HubResult   `json:"hubs"`
	// Findings are examples of each kind of problem, and notes.
	Findings []string `json:"findings"`
}

// Total sums the topics.
func (r *Report) Total() TopicResult {
	t := TopicResult{Topic: "total"}
	if r.Group == "" {
		t.Lag = -1
	}
	for _, tr := range r.Topics {
		t.add(tr)
	}
	return t
}

// Failures lists, one line each, why the verification fails; empty when it
// passes.
func (r *Report) Failures() []string {
	t := r.Total()
	var out []string
	if len(r.Topics) == 0 {
		out = append(out, "no Kafka topic matched")
	}
	add := func(n int64, what string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(t.Missing, "missing")
	add(t.Mismatches(), "mismatched")
	add(t.OrderViolations, "out of order")
	add(t.Misrouted, "misrouted")
	add(t.Unexpected, "unexpected")
	if r.FailOnDuplicates {
		add(t.Duplicates, "duplicated")
	}
	if r.FailOnPending {
		add(t.Pending, "pending (lag)")
	}
	for _, h := range r.Hubs {
		if h.Error != "" {
			out = append(out, "hub "+h.Hub+" unreadable")
		}
		if len(h.Incomplete) > 0 {
			out = append(out, fmt.Sprintf("hub %s: %d partitions read incompletely", h.Hub, len(h.Incomplete)))
		}
	}
	return out
}

// OK reports whether the verification passed: some topic matched, nothing
// is missing, mismatched, out of order, misrouted or unexpected, every hub
// was read completely, and there are no duplicates or pending records when
// those fail.
func (r *Report) OK() bool { return len(r.Failures()) == 0 }

// Verdict is the outcome in one line.
func (r *Report) Verdict() string {
	t := r.Total()
	if f := r.Failures(); len(f) > 0 {
		return fmt.Sprintf("FAIL: %s (of %d Kafka records, %d Event Hubs events)", strings.Join(f, ", "), t.KafkaRecords, t.Events)
	}
	s := fmt.Sprintf("OK: %d Kafka records, %d Event Hubs events, 0 missing, %d duplicates, order kept", t.KafkaRecords, t.Events, t.Duplicates)
	if t.Pending > 0 {
		s += fmt.Sprintf(", %d pending", t.Pending)
	}
	return s
}

// Column is an extra column of the table: its header and its value for a
// row (the total row included, with Topic "total").
type Column struct {
	Header string
	Value  func(TopicResult) string
}

// WriteTable writes one row per topic and a total row: Kafka records, Event
// Hubs events, missing, pending, duplicates, mismatches, order violations
// and lag, then the extra columns.
func (r *Report) WriteTable(w io.Writer, extra ...Column) error {
	headers := []string{"topic", "hub", "kafka records", "eventhubs events", "missing", "pending", "duplicates", "mismatched", "out of order", "lag"}
	for _, c := range extra {
		headers = append(headers, c.Header)
	}
	row := func(t TopicResult) []string {
		lag := "-"
		if t.Lag >= 0 {
			lag = strconv.FormatInt(t.Lag, 10)
		}
		cells := []string{t.Topic, t.Hub, num(t.KafkaRecords), num(t.Events), num(t.Missing), num(t.Pending), num(t.Duplicates), num(t.Mismatches()), num(t.OrderViolations), lag}
		for _, c := range extra {
			cells = append(cells, c.Value(t))
		}
		return cells
	}
	rows := [][]string{headers}
	for _, t := range r.Topics {
		rows = append(rows, row(t))
	}
	rows = append(rows, row(r.Total()))
	return writeAligned(w, rows, 2)
}

// WriteFindings writes the hub summary lines and the findings, one a line.
func (r *Report) WriteFindings(w io.Writer) error {
	var b strings.Builder
	for _, h := range r.Hubs {
		if h.Error != "" {
			fmt.Fprintf(&b, "hub %s: %s\n", h.Hub, h.Error)
		}
		for _, inc := range h.Incomplete {
			fmt.Fprintf(&b, "hub %s: %s\n", h.Hub, inc)
		}
		if h.Foreign > 0 || h.OtherTopics > 0 {
			fmt.Fprintf(&b, "hub %s: %d events without provenance, %d of topics not verified (ignored)\n", h.Hub, h.Foreign, h.OtherTopics)
		}
	}
	for _, f := range r.Findings {
		b.WriteString(f + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func num(n int64) string { return strconv.FormatInt(n, 10) }

// writeAligned writes rows as columns separated by gap spaces: the first
// leftCols columns left-aligned, the others right-aligned.
func writeAligned(w io.Writer, rows [][]string, leftCols int) error {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < leftCols {
				b.WriteString(c)
				if i < len(r)-1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad + c)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
