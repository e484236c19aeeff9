package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// PhaseQuota drains, in back-to-back drains of a bounded duration, a
// backlog into a namespace with an ingress quota while records keep coming.
const PhaseQuota = "quota"

// QuotaConfig configures the quota case: the mirror catching up at the
// namespace's throughput quota (emulator.Quota).
type QuotaConfig struct {
	// Units are the namespace sizes in throughput units. Default 1 and 2.
	Units []int
	// Shapes are the record shapes. Default 100B-keyed and 1KiB-keyed.
	Shapes []Shape
	// Period compresses time: the emulator grants a unit's 1 MiB or 1,000
	// events per Period instead of per second. Default 100 ms (10×).
	Period time.Duration
	// BacklogMinutes is the backlog in minutes of quota (quota time).
	// Default 3.
	BacklogMinutes float64
	// LiveFraction is the rate of the records produced during the
	// catch-up, as a fraction of the quota's events. Default 0.1.
	LiveFraction float64
	// DrainSeconds is the timer schedule's period in quota time: drains
	// run as MirrorTimer runs them with the default settings, fired every
	// DrainSeconds and following until just before the next tick
	// (MIRROR_FOLLOW). Default 60, the default schedule's.
	DrainSeconds float64
	// Partitioning is the engine's MIRROR_PARTITIONING. Default hash.
	Partitioning mirror.Partitioning
	// Deduplicate runs the drains with MIRROR_DEDUPLICATE on.
	Deduplicate bool
}

func (c QuotaConfig) withDefaults() QuotaConfig {
	if len(c.Units) == 0 {
		c.Units = []int{1, 2}
	}
	if len(c.Shapes) == 0 {
		c.Shapes = []Shape{{Name: "100B-keyed", Size: 100, Keyed: true}, {Name: "1KiB-keyed", Size: 1 << 10, Keyed: true}}
	}
	if c.Period <= 0 {
		c.Period = 100 * time.Millisecond
	}
	if c.BacklogMinutes <= 0 {
		c.BacklogMinutes = 3
	}
	if c.LiveFraction <= 0 {
		c.LiveFraction = 0.1
	}
	if c.DrainSeconds <= 0 {
		c.DrainSeconds = 60
	}
	if c.Partitioning == "" {
		c.Partitioning = mirror.PartitionByHash
	}
	return c
}

// QuotaResult is one quota run. Rates, times and latencies are in quota
// time (real ones times Scale), so they read as a real namespace's.
type QuotaResult struct {
	Case         string              `json:"case"`
	Units        int                 `json:"units"`
	Partitioning mirror.Partitioning `json:"partitioning"`
	Deduplicate  bool                `json:"deduplicate,omitempty"`
	Scale        float64             `json:"time_scale"` // quota seconds per real second
	// QuotaEventsPerSec and QuotaBytesPerSec are the namespace's quota.
	QuotaEventsPerSec float64 `json:"quota_events_per_sec"`
	QuotaBytesPerSec  float64 `json:"quota_bytes_per_sec"`
	Backlog           int64   `json:"backlog_records"`
	Live              int64   `json:"live_records"`
	Seconds           float64 `json:"seconds"` // catch-up, quota time
	// EventsPerSec and BytesPerSec are what the emulator accepted (bytes:
	// encoded deliveries, as the quota counts them), duplicates included;
	// RecordsPerSec and MBPerSec (value bytes, 10^6 per MB) count each
	// record once.
	EventsPerSec  float64 `json:"events_per_sec"`
	BytesPerSec   float64 `json:"bytes_per_sec"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"value_mb_per_sec"`
	// Fraction is the accepted ingress as a fraction of the binding limit
	// (events or bytes, whichever is the larger fraction); UsefulFraction
	// is the part of it that carried each record once.
	Fraction       float64 `json:"fraction_of_quota"`
	UsefulFraction float64 `json:"useful_fraction_of_quota"`
	Drains         int     `json:"drains"`
	FailedDrains   int     `json:"failed_drains"`
	// Failures are the summaries of the first failed drains.
	Failures string `json:"failures,omitempty"`
	// Throttled counts the sends the drains saw refused; ThrottledRequests
	// is the emulator's count (what the eventhubs-throttled alert sees).
	Throttled         int64 `json:"throttled"`
	ThrottledRequests int64 `json:"throttled_requests"`
	// Duplicates are events stored beyond one per record: a drain that
	// ends with a batch refused commits its Kafka partitions below it, and
	// the next drain sends again what other hub partitions had stored
	// above it.
	Duplicates int64 `json:"duplicates"`
	PeakRSS    int64 `json:"peak_rss_bytes"`
	// Live latency: enqueued time minus the record's Kafka timestamp, for
	// the records produced during the catch-up, quota time.
	LiveP50Sec float64 `json:"live_p50_sec"`
	LiveP99Sec float64 `json:"live_p99_sec"`
	LiveMaxSec float64 `json:"live_max_sec"`
}

// runQuota runs the quota case for every shape and unit count.
func runQuota(ctx context.Context, cfg Config, sp spawner, qc QuotaConfig) ([]QuotaResult, error) {
	qc = qc.withDefaults()
	var out []QuotaResult
	for _, shape := range qc.Shapes {
		for _, units := range qc.Units {
			cfg.Logger.Info(fmt.Sprintf("quota case %s, %d TU", shape.Name, units))
			r, err := quotaRun(ctx, sp, qc, shape, units)
			if err != nil {
				return out, fmt.Errorf("bench: quota case %s %d TU: %w", shape.Name, units, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func quotaRun(ctx context.Context, sp spawner, qc QuotaConfig, shape Shape, units int) (QuotaResult, error) {
	q := emulator.Quota{ThroughputUnits: units, Period: qc.Period}
	scale := float64(time.Second) / float64(qc.Period)
	res := QuotaResult{Case: shape.Name, Units: units, Partitioning: qc.Partitioning, Deduplicate: qc.Deduplicate, Scale: scale,
		QuotaEventsPerSec: float64(units * emulator.DefaultIngressEventsPerUnit),
		QuotaBytesPerSec:  float64(units * emulator.DefaultIngressBytesPerUnit)}
	in, err := startInfraWith(ctx, shape, infraOptions{Quota: q, PartitionBytes: 64 << 20})
	if err != nil {
		return res, err
	}
	defer in.close()
	// The backlog: BacklogMinutes of the events quota, or of the bytes
	// quota at the value size when that binds first.
	perSec := min(res.QuotaEventsPerSec, res.QuotaBytesPerSec/float64(shape.Size))
	perPartition := int64(qc.BacklogMinutes*60*perSec) / partitions
	if err := in.loadTo(ctx, perPartition); err != nil {
		return res, err
	}
	res.Backlog = perPartition * partitions
	// Records produced during the catch-up, for about 80% of its expected
	// duration (real time).
	liveRate := qc.LiveFraction * perSec * scale
	liveFor := time.Duration(0.8 * float64(res.Backlog) / ((1 - qc.LiveFraction) * perSec * scale) * float64(time.Second))
	liveN := int64(liveRate*liveFor.Seconds()) / partitions * partitions
	res.Live = liveN
	spec := in.childSpec(shape)
	spec.Phase, spec.PerPartition, spec.Group = PhaseQuota, perPartition, "bench-quota"
	spec.Records = res.Backlog + liveN
	spec.DrainDuration = time.Duration(qc.DrainSeconds * float64(qc.Period))
	spec.Partitioning, spec.Deduplicate = string(qc.Partitioning), qc.Deduplicate
	spec.Timeout = 20 * time.Minute
	liveStart := time.Now()
	var st0, st1 emulator.Stats
	var t0, t1 time.Time
	var liveErr atomic.Pointer[error]
	liveDone := make(chan struct{})
	pr, err := sp.run(ctx, spec, func() {
		st0, t0 = in.emu.Stats(), time.Now()
		liveStart = t0
		go func() {
			defer close(liveDone)
			if err := in.produceLive(ctx, liveN, liveFor); err != nil {
				liveErr.Store(&err)
			}
		}()
	}, func() { st1, t1 = in.emu.Stats(), time.Now() })
	if t0.IsZero() {
		close(liveDone)
	}
	<-liveDone
	if err != nil {
		return res, err
	}
	if errp := liveErr.Load(); errp != nil {
		return res, *errp
	}
	// The catch-up ends with the last event stored: a following drain
	// goes on until its window's end once caught up.
	if last := in.lastEnqueued(); last.After(t0) && last.Before(t1) {
		t1 = last
	}
	secs := t1.Sub(t0).Seconds()
	res.Seconds = secs * scale
	events, bytes := float64(st1.EventsStored-st0.EventsStored), float64(st1.BytesStored-st0.BytesStored)
	res.EventsPerSec, res.BytesPerSec = events/res.Seconds, bytes/res.Seconds
	distinct := res.Backlog + res.Live
	res.RecordsPerSec = float64(distinct) / res.Seconds
	res.MBPerSec = float64(distinct) * float64(shape.Size) / 1e6 / res.Seconds
	res.Fraction = max(res.EventsPerSec/res.QuotaEventsPerSec, res.BytesPerSec/res.QuotaBytesPerSec)
	if events > 0 {
		res.UsefulFraction = res.Fraction * float64(distinct) / events
	}
	res.Drains, res.FailedDrains, res.Throttled, res.Failures = pr.Drains, pr.FailedDrains, pr.Throttled, pr.Note
	res.ThrottledRequests = st1.ThrottledRequests - st0.ThrottledRequests
	res.Duplicates = int64(events) - distinct
	res.PeakRSS = pr.PeakRSS
	lat := in.liveLatencies(liveStart)
	sort.Float64s(lat)
	if len(lat) > 0 {
		res.LiveP50Sec = round2(percentile(lat, 0.5) * scale)
		res.LiveP99Sec = round2(percentile(lat, 0.99) * scale)
		res.LiveMaxSec = round2(lat[len(lat)-1] * scale)
	}
	return res, nil
}

// produceLive produces n records, spread evenly over d, after the backlog
// in every partition, stamped with the time they are produced.
func (in *infra) produceLive(ctx context.Context, n int64, d time.Duration) error {
	var failed atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	offsets := make([]int64, partitions)
	for i := range offsets {
		offsets[i] = in.loaded
	}
	for i := int64(0); i < n; {
		want := min(n, int64(float64(n)*time.Since(start).Seconds()/d.Seconds()))
		now := time.Now()
		for ; i < want; i++ {
			k := int(i % partitions)
			ti, p := k/NumPartitions, k%NumPartitions
			off := offsets[k]
			offsets[k]++
			in.producer.Produce(ctx, in.gen.kafkaRecord(ti, p, off, now), done)
		}
		if errp := failed.Load(); errp != nil {
			return fmt.Errorf("producing live records: %w", *errp)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	if err := in.producer.Flush(ctx); err != nil {
		return fmt.Errorf("flushing live records: %w", err)
	}
	return nil
}

// liveLatencies returns, in seconds, the enqueued time minus the Kafka
// timestamp of every event whose record was produced after start (the
// backlog's timestamps are in 2026-01).
func (in *infra) liveLatencies(start time.Time) []float64 {
	var out []float64
	from := start.Add(-time.Second)
	for ti := range NumTopics {
		for p := range NumPartitions {
			for _, ev := range in.emu.Events(TopicName(ti), p) {
				ts, ok := ev.Properties[mirror.PropTimestamp].(time.Time)
				if ok && ts.After(from) {
					out = append(out, ev.EnqueuedTime.Sub(ts).Seconds())
				}
			}
		}
	}
	return out
}

// lastEnqueued returns the enqueued time of the last event stored.
func (in *infra) lastEnqueued() time.Time {
	var last time.Time
	for ti := range NumTopics {
		for p := range NumPartitions {
			for _, ev := range in.emu.Events(TopicName(ti), p) {
				if ev.EnqueuedTime.After(last) {
					last = ev.EnqueuedTime
				}
			}
		}
	}
	return last
}

// quotaPhase drains as a deployment's timer did before the handover, every spec.DrainDuration
// with follow mode on, until spec.Records records were mirrored and a drain
// left no lag.
func quotaPhase(ctx context.Context, spec ChildSpec, m *meter, logger *slog.Logger) error {
	quiet := slog.New(slog.DiscardHandler)
	src, err := newSource(spec, spec.Group, quiet)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	sink, err := newSink(spec, quiet)
	if err != nil {
		return err
	}
	defer func() { _ = sink.Close(context.WithoutCancel(ctx)) }()
	opts := engineOptions(logger)
	if spec.Partitioning != "" {
		opts.Partitioning = mirror.Partitioning(spec.Partitioning)
	}
	var engSink mirror.Sink = sink
	if spec.Deduplicate {
		opts.Deduplicate = true
		engSink = readingSink{countingSink: countingSink{Sink: sink, c: &counters{}}, HubReader: sink}
	}
	eng, err := mirror.New(src, engSink, opts)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if err := m.start(); err != nil {
		return err
	}
	deadline := time.Now().Add(spec.Timeout)
	var records int64
	var problems []string
	// The drains run as a deployment's MirrorTimer ran them (the default
	// settings) before the handover at the tick (Service.DrainFollowing):
	// fired by a schedule of period spec.DrainDuration, bounded by
	// MIRROR_MAX_DURATION, following (MIRROR_FOLLOW) until
	// timerFollowMargin before the next tick, then a new drain.
	origin := time.Now()
	for time.Now().Before(deadline) {
		fired := time.Now()
		next := nextOccurrence(origin, spec.DrainDuration, fired)
		lim := mirror.Limits{MaxDuration: config.DefaultMaxDuration,
			FollowUntil: mirror.FollowUntil(fired, next, timerFollowMargin, timerMinFollowWindow)}
		rep, err := eng.Drain(ctx, "bench-quota", lim)
		if err != nil {
			return errors.Join(fmt.Errorf("drain: %w", err), m.stop())
		}
		// The drain's line as the service logs it (msg=drain with
		// throttled=N), on stderr whatever the diagnostics' level.
		var lines bytes.Buffer
		mirror.LogReport(ctx, slog.New(slog.NewTextHandler(&lines, nil)), rep, mirror.TriggerTimer, lim.MaxDuration, false)
		for l := range strings.Lines(lines.String()) {
			if strings.Contains(l, " msg="+mirror.DrainLogMessage+" ") {
				_, _ = io.WriteString(os.Stderr, l)
			}
		}
		m.res.Drains++
		m.res.Throttled += rep.Throttled
		if rep.Failed() {
			m.res.FailedDrains++
			if len(problems) < 3 {
				problems = append(problems, rep.Summary()+": "+firstError(rep))
			}
		}
		records += rep.Records
		m.res.Records, m.res.Bytes = records, m.res.Bytes+rep.Bytes
		if records >= spec.Records && rep.LagAfter == 0 {
			break
		}
		// The next drain fires at the schedule's next occurrence, or at
		// once when this one returned after it (the host fires an
		// occurrence that came while the function ran once it returns).
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), m.stop())
		case <-time.After(time.Until(next)):
		}
	}
	if err := m.stop(); err != nil {
		return err
	}
	m.res.Note = strings.Join(problems, "; ")
	if records < spec.Records {
		return fmt.Errorf("mirrored %d of %d records before the timeout", records, spec.Records)
	}
	return nil
}

// The handler's follow window (handler/follow.go): a scheduled drain
// follows until followMargin before the next tick, when that leaves at
// least minFollowWindow.
const (
	timerFollowMargin    = 500 * time.Millisecond
	timerMinFollowWindow = time.Second
)

// nextOccurrence returns the first occurrence after t of a schedule that
// fires every period from origin.
func nextOccurrence(origin time.Time, period time.Duration, t time.Time) time.Time {
	if t.Before(origin) {
		return origin
	}
	return origin.Add((t.Sub(origin)/period + 1) * period)
}

// firstError is a failed report's first problem.
func firstError(rep *mirror.Report) string {
	if len(rep.Errors) > 0 {
		return rep.Errors[0]
	}
	for _, p := range rep.Partitions {
		if p.Error != "" {
			return p.String()
		}
	}
	return ""
}

// PrintQuotaTable writes the quota runs as a table.
func PrintQuotaTable(w io.Writer, rs []QuotaResult) error {
	if len(rs) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nquota: catch-up at the namespace's ingress quota (emulator, %g× compressed time; rates and latencies in quota time).\n", rs[0].Scale)
	fmt.Fprintf(&b, "fraction = accepted events/s or bytes/s (encoded, as the quota counts, duplicates included) ÷ the quota, whichever is larger; useful = the part carrying each record once. records/s and MB/s (10^6 value bytes) count each record once.\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tpartitioning\tTU\tbacklog\tlive\tcatch-up s\tevents/s\trecords/s\tvalue MB/s\tfraction\tuseful\tdrains\tfailed\tthrottled\tThrottledRequests\tduplicates\tpeak RSS MB\tlive p50 s\tlive p99 s\tlive max s\t")
	for _, r := range rs {
		part := string(r.Partitioning)
		if r.Deduplicate {
			part += "+dedup"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t\n",
			r.Case, part, r.Units, r.Backlog, r.Live, r.Seconds, r.EventsPerSec, r.RecordsPerSec, r.MBPerSec, r.Fraction, r.UsefulFraction, r.Drains, r.FailedDrains,
			r.Throttled, r.ThrottledRequests, r.Duplicates, float64(r.PeakRSS)/1e6, r.LiveP50Sec, r.LiveP99Sec, r.LiveMaxSec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Failures != "" {
			fmt.Fprintf(&b, "%s %d TU failed drains: %s\n", r.Case, r.Units, r.Failures)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Targets of the quota case: the namespace's quota used in full, each
// record once, and no drain failed by throttling.
const (
	// TargetQuotaUseful: the part of the namespace's quota that carried
	// each record once (QuotaResult.UsefulFraction).
	TargetQuotaUseful = 0.9
)

// quotaTargets checks every quota run against its targets.
func quotaTargets(rs []QuotaResult) []Target {
	var out []Target
	for _, q := range rs {
		name := fmt.Sprintf("quota %s %d TU", q.Case, q.Units)
		out = append(out,
			verdict(q.UsefulFraction >= TargetQuotaUseful, "%s: %.2f of the quota carried each record once (%.2f accepted) (target ≥ %.2f)", name, q.UsefulFraction, q.Fraction, TargetQuotaUseful),
			verdict(q.FailedDrains == 0, "%s: %d of %d drains failed (target 0)", name, q.FailedDrains, q.Drains),
			verdict(q.Duplicates == 0, "%s: %d duplicates (target 0 within one process)", name, q.Duplicates))
	}
	return out
}
