package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Why a drain stopped.
const (
	StopCaughtUp    = "caught up"
	StopMaxRecords  = "max records"
	StopMaxBytes    = "max bytes"
	StopMaxDuration = "max duration"
	StopRebalanced  = "group rebalanced"
	// StopKafkaDown: the drain lost its claim while Kafka could not be
	// reached (its fetches or commits failed), not to a rebalance.
	StopKafkaDown   = "kafka unreachable"
	StopCanceled    = "canceled"
	StopFailed      = "failed"
	StopNothingToDo = "no partitions"
	// StopBusy: every partition the drain was given was held by another
	// drain of this process (a catch-up, or the previous tick still
	// following); it could do nothing.
	StopBusy = "busy"
)

// LagUnknown is Report.LagAfter (and the drain line's lag) when the lag
// after the drain could not be measured.
const LagUnknown = -1

// Report is what one drain did.
type Report struct {
	// Run names who drained, e.g. "timer" or "catch-up 3f2a".
	Run      string        `json:"run"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	// Trigger (timer or catchup) and Budget (the drain's duration bound)
	// are set by the [Service].
	Trigger string        `json:"trigger,omitempty"`
	Budget  time.Duration `json:"budget_ns,omitempty"`
	// Records and Bytes count records (and their value bytes) that Event
	// Hubs acknowledged.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Skipped counts oversized records left out under the skip policy.
	Skipped int64 `json:"skipped"`
	// LagAfter is the sum of the partitions' lag after the drain,
	// LagUnknown (-1) when it could not be measured: the drain could not
	// start, a topic was left out because its hub failed, or the
	// watermarks could not be read.
	LagAfter int64 `json:"lag_after"`
	// Throttled counts the sends Event Hubs refused with server-busy (the
	// namespace's throughput units were exhausted; each was retried), and
	// ThrottledWait is the time senders spent backing off after them,
	// summed over the drain's hub partitions. A batch still refused when
	// reading ended is left for the next drain, not failed, when the drain
	// acknowledged anything or was canceled.
	Throttled     int64         `json:"throttled,omitempty"`
	ThrottledWait time.Duration `json:"throttled_wait_ns,omitempty"`
	// ReadTime is where the drain's readers spent their time: what bounded
	// the drain.
	ReadTime ReadTime `json:"read_time"`
	// Stopped says why the drain ended.
	Stopped string `json:"stopped"`
	// Paused lists the topics left out because they are paused;
	// PausedSince is when the oldest of those pauses was decided.
	Paused      []string  `json:"paused,omitempty"`
	PausedSince time.Time `json:"paused_since,omitzero"`
	// Errors are problems that are not tied to one partition, and topics
	// that could not be mirrored at all (for example their hub is missing).
	Errors []string `json:"errors,omitempty"`
	// HubErrors are the topics left out because their event hub could not
	// be used, with the kind of failure; each is also in Errors.
	HubErrors []HubError `json:"hub_errors,omitempty"`
	// Latency is the end-to-end latency of the records mirrored: when
	// Event Hubs acknowledged each minus its Kafka timestamp; nil without
	// records.
	Latency *Latency `json:"latency,omitempty"`
	// BehindBy is the age of the oldest record the drain left unmirrored
	// on its partitions (0 when it left none or the age is unknown).
	BehindBy time.Duration `json:"behind_by_ns"`
	// Outages are the sends or fetches that kept failing for
	// LiveFailureAfter or longer during the drain, ended or not: records
	// were late or not mirrored, so the drain failed.
	Outages []Outage `json:"outages,omitempty"`
	// Deduplication is a one-line problem of deduplication
	// (MIRROR_DEDUPLICATE), "" when there is none or it is off.
	Deduplication string            `json:"deduplication,omitempty"`
	Partitions    []PartitionReport `json:"partitions"`
}

// HubError is a topic left out of a drain because its event hub could not
// be used.
type HubError struct {
	Topic string `json:"topic"`
	Hub   string `json:"hub"`
	// Kind classifies the failure (one of the Kind constants).
	Kind  string `json:"kind"`
	Error string `json:"error"`
}

// PartitionReport is what one drain did to one Kafka partition.
type PartitionReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Hub       string `json:"hub"`
	Records   int64  `json:"records"`
	Bytes     int64  `json:"bytes"`
	// LastDelivered is when Event Hubs acknowledged the partition's last
	// record in the drain; zero when none.
	LastDelivered time.Time `json:"last_delivered,omitzero"`
	// FirstOffset and LastOffset are the lowest and highest offsets
	// mirrored; -1 when none.
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
	// Committed is the group's offset after the drain (NoOffset if none).
	Committed int64 `json:"committed"`
	LagBefore int64 `json:"lag_before"`
	LagAfter  int64 `json:"lag_after"`
	// Gap counts records removed by retention before they were mirrored.
	Gap int64 `json:"gap,omitempty"`
	// AlreadyMirrored counts records not sent again because their events
	// were read back from the hub (MIRROR_DEDUPLICATE).
	AlreadyMirrored int64 `json:"already_mirrored,omitempty"`
	// SkippedOffsets lists oversized records left out (skip policy).
	SkippedOffsets []int64 `json:"skipped_offsets,omitempty"`
	// Note explains a decision the drain took, e.g. starting a recreated
	// topic over.
	Note string `json:"note,omitempty"`
	// Busy is set when another drain in this process held the partition.
	Busy  bool   `json:"busy,omitempty"`
	Error string `json:"error,omitempty"`
	// Kind classifies Error (one of the Kind constants); empty without one.
	Kind string `json:"kind,omitempty"`
}

// Kinds of failure in reports and in the health of a [Service].
const (
	KindUnauthorized = "unauthorized"
	KindHubMissing   = "hub missing"
	KindThrottled    = "throttled"
	KindOversized    = "oversized"
	KindGap          = "gap"
	KindRecreated    = "recreated"
	KindStalled      = "stalled"
	KindKafka        = "kafka"
	KindCertificate  = "certificate"
	KindBehind       = "behind"
	KindPausedLong   = "paused too long"
	KindError        = "error"
)

// errorKind classifies an error of a drain.
func errorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUnauthorized):
		return KindUnauthorized
	case errors.Is(err, ErrHubNotFound):
		return KindHubMissing
	case errors.Is(err, ErrThrottled):
		return KindThrottled
	case errors.Is(err, ErrEventTooLarge):
		return KindOversized
	}
	return KindError
}

// partitionKind classifies the error of a partition; ps.mu is held.
func partitionKind(ps *partitionState) string {
	switch {
	case ps.changedLog:
		return KindRecreated
	case ps.gap > 0 && errorKind(ps.err) == KindError:
		return KindGap
	}
	return errorKind(ps.err)
}

// Failed reports whether some records could not be mirrored: a partition or
// topic error, or a drain-level error. Skipped records and busy partitions
// are not failures.
func (r *Report) Failed() bool {
	if len(r.Errors) > 0 || len(r.Outages) > 0 {
		return true
	}
	for _, p := range r.Partitions {
		if p.Error != "" {
			return true
		}
	}
	return false
}

// CaughtUp reports whether the drain left no lag on the partitions it owned.
func (r *Report) CaughtUp() bool {
	return r.LagAfter == 0 && (r.Stopped == StopCaughtUp || r.Stopped == StopNothingToDo || r.Stopped == StopFollowed || r.Stopped == StopHandedOver)
}

// markLagUnknown sets LagAfter to LagUnknown when the drain could not
// measure it: startFailed (the drain could not start), a topic left out
// because its hub failed, or the watermarks unread.
func (r *Report) markLagUnknown(startFailed bool) {
	if startFailed || len(r.HubErrors) > 0 || hasPrefixed(r.Errors, "reading watermarks") {
		r.LagAfter = LagUnknown
	}
}

// Summary is the report in one line.
func (r *Report) Summary() string {
	secs := r.Duration.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(r.Records) / secs
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s drain: %d records (%s) in %s (%.0f records/s), %d partitions, lag after %d, stopped: %s",
		r.Run, r.Records, byteSize(r.Bytes), r.Duration.Round(time.Millisecond), rate, len(r.Partitions), r.LagAfter, r.Stopped)
	if len(r.Paused) > 0 {
		fmt.Fprintf(&b, ", paused topics left out: %s", strings.Join(r.Paused, ", "))
	}
	if r.Skipped > 0 {
		fmt.Fprintf(&b, ", %d oversized records skipped", r.Skipped)
	}
	if r.Throttled > 0 {
		fmt.Fprintf(&b, ", throttled by Event Hubs: %d sends refused (server-busy), %s backing off", r.Throttled, r.ThrottledWait.Round(time.Millisecond))
	}
	if r.Records > 0 && r.ReadTime.Total > 0 {
		fmt.Fprintf(&b, ", %s", r.ReadTime)
	}
	if n := r.errorCount(); n > 0 {
		fmt.Fprintf(&b, ", %d errors", n)
	}
	return b.String()
}

func (r *Report) errorCount() int {
	n := len(r.Errors) + len(r.Outages)
	for _, p := range r.Partitions {
		if p.Error != "" {
			n++
		}
	}
	return n
}

// Lines renders the report as log lines: the summary, one line per drain
// error, and one line per partition that had work or an error.
func (r *Report) Lines() []string {
	lines := []string{r.Summary()}
	for _, e := range r.Errors {
		lines = append(lines, "error: "+e)
	}
	for _, o := range r.Outages {
		lines = append(lines, "outage: "+o.describe(r.Started.Add(r.Duration)))
	}
	if r.Deduplication != "" {
		lines = append(lines, "deduplication: "+r.Deduplication)
	}
	for _, p := range r.Partitions {
		if p.Records > 0 || p.AlreadyMirrored > 0 || p.Error != "" || p.Gap > 0 || len(p.SkippedOffsets) > 0 || p.Busy || p.Note != "" {
			lines = append(lines, p.String())
		}
	}
	return lines
}

// String is the partition report in one line.
func (p PartitionReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d -> %s: %d records (%s)", p.Topic, p.Partition, p.Hub, p.Records, byteSize(p.Bytes))
	if p.Records > 0 {
		fmt.Fprintf(&b, " offsets %d..%d", p.FirstOffset, p.LastOffset)
	}
	fmt.Fprintf(&b, ", committed %d, lag %d -> %d", p.Committed, p.LagBefore, p.LagAfter)
	if p.Gap > 0 {
		fmt.Fprintf(&b, ", gap of %d records lost to retention", p.Gap)
	}
	if len(p.SkippedOffsets) > 0 {
		fmt.Fprintf(&b, ", skipped oversized offsets %v", p.SkippedOffsets)
	}
	if p.AlreadyMirrored > 0 {
		fmt.Fprintf(&b, ", %d records already in the hub not sent again", p.AlreadyMirrored)
	}
	if p.Note != "" {
		b.WriteString(", " + p.Note)
	}
	if p.Busy {
		b.WriteString(", busy: another drain in this process holds it")
	}
	if p.Error != "" {
		b.WriteString(", error: " + p.Error)
	}
	return b.String()
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// report fills the drain's report, with the lag measured from ends, the
// partitions' log ends read after reading stopped.
func (d *drain) report(ctx context.Context, ends *watermarkRead) {
	d.fill(ctx, d.rep, d.stopped, d.latency.summary(), ends)
}

// partitions lists the drain's partitions.
func (d *drain) partitions() []TopicPartition {
	tps := make([]TopicPartition, 0, len(d.order))
	for _, ps := range d.order {
		tps = append(tps, ps.tp)
	}
	return tps
}

// fill fills rep with what the drain did so far, as a drain that stopped
// for stopped, with latency. The lag is measured from the log ends that
// ends read, else (ends nil, or its read failed) from those the readers
// last saw.
func (d *drain) fill(ctx context.Context, rep *Report, stopped string, latency *Latency, ends *watermarkRead) {
	var wms map[TopicPartition]Watermarks
	if ends != nil {
		var err error
		if wms, _, _, err = ends.wait(ctx); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("reading watermarks after the drain: %v", err))
		}
	}
	rep.Stopped = stopped
	rep.Throttled, rep.ThrottledWait = d.throttled.Load(), time.Duration(d.throttledWait.Load())
	rep.ReadTime = d.clock.read()
	rep.Outages = d.live.outages(time.Now())
	rep.Latency = latency
	caughtUp := true
	for _, ps := range d.order {
		ps.mu.Lock()
		end := ps.end
		if wm, ok := wms[ps.tp]; ok {
			end = wm.End
		}
		pr := PartitionReport{
			Topic: ps.tp.Topic, Partition: ps.tp.Partition, Hub: ps.hub,
			Records: ps.records, Bytes: ps.bytes, LastDelivered: ps.lastAck,
			FirstOffset: ps.first, LastOffset: ps.last,
			Committed: ps.committed,
			LagBefore: ps.lagBefore,
			Gap:       ps.gap,
			Note:      ps.note,
		}
		ps.mu.Unlock()
		pr.AlreadyMirrored = d.foundCount(ps) + ps.carriedTotal()
		if note := d.identityNote(ps); note != "" {
			pr.Note = strings.TrimPrefix(pr.Note+"; "+note, "; ")
		}
		ps.mu.Lock()
		if len(ps.skipped) > 0 {
			pr.SkippedOffsets = append([]int64(nil), ps.skipped...)
		}
		from := ps.committed
		if from == NoOffset {
			from = ps.start
		}
		pr.LagAfter = max(end-from, 0)
		if wm, ok := wms[ps.tp]; ok && from > wm.End {
			// A committed offset past the log end is not "caught up".
			pr.LagAfter = wm.End - wm.Start
		}
		if ps.err != nil {
			pr.Error, pr.Kind = ps.err.Error(), partitionKind(ps)
		}
		ps.mu.Unlock()
		if pr.LagAfter > 0 {
			caughtUp = false
		}
		rep.Records += pr.Records
		rep.Bytes += pr.Bytes
		rep.Skipped += int64(len(pr.SkippedOffsets))
		rep.LagAfter += pr.LagAfter
		rep.Partitions = append(rep.Partitions, pr)
	}
	if (rep.Stopped == StopCaughtUp || rep.Stopped == StopFollowed) && !caughtUp {
		// Readers ended at the end they saw, but failed partitions or new
		// records left lag behind.
		if rep.Failed() {
			rep.Stopped = StopFailed
		}
	}
	if rep.Stopped == StopRebalanced && d.kafkaFailed(rep) {
		rep.Stopped = StopKafkaDown
	}
	d.dedupReport(rep)
	d.m.busyLag(ctx, rep)
	sortReports(rep.Partitions)
}

// kafkaFailed reports whether the drain's fetches from Kafka failed, or a
// drain error says Kafka could not be reached.
func (d *drain) kafkaFailed(rep *Report) bool {
	if slices.ContainsFunc(d.live.attempted(), func(o Outage) bool { return o.Kind == KindKafka }) {
		return true
	}
	return slices.ContainsFunc(rep.Errors, func(e string) bool { return textCause(e) != "" })
}

func sortReports(prs []PartitionReport) {
	slices.SortFunc(prs, func(a, b PartitionReport) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
}
