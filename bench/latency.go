package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/mirror"
)

// timerFunctionName is the function app's timer function.
const timerFunctionName = "MirrorTimer"

// FollowSetting is the app setting that turns follow mode on or off.
const FollowSetting = "MIRROR_FOLLOW"

// LatencyConfig configures the steady-load latency case: a producer writes
// Rate keyed records of Size bytes per second for Duration while the real
// handler runs under the local Functions host (funchost) with Schedule.
type LatencyConfig struct {
	Rate     int           // records per second; default 20,000
	Size     int           // value bytes; default 1 KiB
	Duration time.Duration // default 60 s
	// Schedule is MIRROR_SCHEDULE; default the project's (every minute).
	Schedule string
	// Follow lists the MIRROR_FOLLOW values to run, in order; default
	// false then true.
	Follow []bool
	// Settle bounds the wait, after the producer stops, for the last
	// records to arrive; default Duration plus two schedule periods (2 min).
	Settle time.Duration
	// Runs is how many consecutive runs per follow mode; default 1.
	Runs int
}

func (c LatencyConfig) withDefaults() LatencyConfig {
	if c.Rate <= 0 {
		c.Rate = 20_000
	}
	if c.Size <= 0 {
		c.Size = 1 << 10
	}
	if c.Duration <= 0 {
		c.Duration = 60 * time.Second
	}
	if c.Schedule == "" {
		c.Schedule = functions.DefaultMirrorSchedule
	}
	if len(c.Follow) == 0 {
		c.Follow = []bool{false, true}
	}
	if c.Settle <= 0 {
		c.Settle = c.Duration + 2*time.Minute
	}
	if c.Runs <= 0 {
		c.Runs = 1
	}
	return c
}

// LatencyResult is one steady-load run: for every event, latency = its
// Event Hubs enqueued time − its Kafka record timestamp.
type LatencyResult struct {
	Follow bool `json:"follow"`
	// Run numbers the consecutive runs of one follow mode, from 1.
	Run      int     `json:"run"`
	Schedule string  `json:"schedule"`
	Rate     int     `json:"rate_records_per_s"`
	Size     int     `json:"record_bytes"`
	Seconds  float64 `json:"produce_seconds"`
	Produced int64   `json:"produced"`
	Mirrored int64   `json:"mirrored"` // events found in the emulator
	P50Ms    float64 `json:"latency_p50_ms"`
	P99Ms    float64 `json:"latency_p99_ms"`
	MaxMs    float64 `json:"latency_max_ms"`
	// WorstSeconds are the seconds of production (from its start) whose
	// records waited longest, worst first, with that second's maximum and
	// p99 latency: they show whether the tail is at the ticks.
	WorstSeconds []SecondLatency `json:"worst_seconds"`
	// Invocations are the timer invocations seen, with their durations.
	Invocations []float64 `json:"invocation_seconds"`
	// StallMaxMs is the longest the benchmark process's 10 ms ticker
	// fired late during the run, StallSecondsOver100ms the seconds in
	// which it was over 100 ms late (see SecondLatency.StallMs).
	StallMaxMs            float64 `json:"bench_process_stall_max_ms"`
	StallSecondsOver100ms int     `json:"bench_process_stall_seconds_over_100ms"`
	// LoadAvg is the machine's 1-minute load average at the start and at
	// the end of the run (from /proc/loadavg; 0 where unreadable).
	LoadAvg [2]float64 `json:"load_average_1m_start_end"`
	Log     string     `json:"log"` // the handler's and the host's output
	// LateEvents is a CSV of every event that took longer than
	// lateEventMs: topic, partition, sequence number, Kafka timestamp and
	// enqueued time (RFC 3339, UTC), latency in ms.
	LateEvents string `json:"late_events_csv"`
}

// SecondLatency is the latency of the records produced in one second.
type SecondLatency struct {
	Second  int    `json:"second"` // from the start of production
	Clock   string `json:"clock"`  // wall clock, UTC
	Records int    `json:"records"`
	// StallMs is the longest a 10 ms ticker of the benchmark process
	// (kfake, the emulator and the producer) fired late in that second:
	// the machine's CPU contention, not the mirror's.
	StallMs float64 `json:"bench_process_stall_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// runLatency runs the latency case once per follow mode.
func runLatency(ctx context.Context, cfg Config, lc LatencyConfig) ([]LatencyResult, error) {
	lc = lc.withDefaults()
	appDir, err := buildApp(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: latency: %w", err)
	}
	var out []LatencyResult
	for _, follow := range lc.Follow {
		for run := 1; run <= lc.Runs; run++ {
			cfg.Logger.Info("case latency", "follow", follow, "run", run, "rate", lc.Rate, "seconds", lc.Duration.Seconds(), "schedule", lc.Schedule)
			load0 := loadAverage()
			r, err := latencyRun(ctx, cfg, lc, appDir, follow, run)
			r.Run, r.LoadAvg = run, [2]float64{load0, loadAverage()}
			if err != nil {
				return out, fmt.Errorf("bench: latency (follow %t, run %d): %w", follow, run, err)
			}
			cfg.Logger.Info("latency", "follow", follow, "run", run, "produced", r.Produced, "mirrored", r.Mirrored, "p50_ms", r.P50Ms, "p99_ms", r.P99Ms, "max_ms", r.MaxMs,
				"stall_max_ms", r.StallMaxMs, "load", fmt.Sprint(r.LoadAvg), "invocations_s", r.Invocations, "worst_seconds", fmt.Sprint(r.WorstSeconds))
			out = append(out, r)
		}
	}
	return out, nil
}

// loadAverage returns the machine's 1-minute load average, 0 when
// /proc/loadavg cannot be read.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return 0
	}
	return l
}

func latencyRun(ctx context.Context, cfg Config, lc LatencyConfig, appDir string, follow bool, run int) (LatencyResult, error) {
	res := LatencyResult{Follow: follow, Schedule: lc.Schedule, Rate: lc.Rate, Size: lc.Size}
	shape := Shape{Name: "latency", Size: lc.Size, Keyed: true}
	// Keep every event in the emulator: the latencies are read at the end.
	total := int64(lc.Rate) * int64(lc.Duration/time.Second+1) * int64(lc.Size+512)
	in, err := startInfraWith(ctx, shape, infraOptions{PartitionBytes: max(total/int64(NumPartitions), emulatorPartitionBytes)})
	if err != nil {
		return res, err
	}
	defer in.close()

	settings := handlerSettings(in.brokers(), in.connectionString())
	settings[config.KafkaGroup] = fmt.Sprintf("bench-latency-%t", follow)
	settings[functions.MirrorScheduleSetting] = lc.Schedule
	settings[FollowSetting] = fmt.Sprint(follow)
	res.Log = filepath.Join(cfg.OutDir, fmt.Sprintf("latency-follow-%t-run%d.log", follow, run))
	logf, err := os.Create(res.Log)
	if err != nil {
		return res, fmt.Errorf("handler log: %w", err)
	}
	defer logf.Close()
	var invocations []float64
	var invMu sync.Mutex
	h, err := startHost(ctx, appDir, funchost.Options{
		Settings: settings,
		Stdout:   logf,
		Stderr:   logf,
		OnResult: func(r *funchost.Result) {
			invMu.Lock()
			invocations = append(invocations, round2(r.Duration.Seconds()))
			invMu.Unlock()
		},
	})
	if err != nil {
		return res, err
	}
	schedCtx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		_ = h.RunSchedules(schedCtx)
	}()
	defer func() {
		stopSched()
		interruptHost(ctx, h)
		<-schedDone
	}()

	// Measure the steady state: start producing just after the first
	// scheduled tick, when the mirror runs as it always will.
	if sched, ok := h.Schedule(timerFunctionName); ok {
		first := sched.Next(time.Now())
		cfg.Logger.Info("waiting for the first tick", "at", first.Format(time.TimeOnly))
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(time.Until(first) + time.Second):
		}
	}
	start := time.Now()
	stopStalls := watchStalls(start)
	produced, err := produceSteady(ctx, in, lc)
	res.Produced = produced
	res.Seconds = lc.Duration.Seconds()
	if err != nil {
		stopStalls()
		return res, err
	}
	deadline := time.Now().Add(lc.Settle)
	for in.emulatorEvents() < produced && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			stopStalls()
			return res, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	st := stopStalls()
	res.LateEvents = filepath.Join(cfg.OutDir, fmt.Sprintf("latency-follow-%t-run%d-late.csv", follow, run))
	lat, bySecond, err := latencies(in, start, res.LateEvents)
	if err != nil {
		return res, err
	}
	res.WorstSeconds = worstSeconds(bySecond, start, 8)
	for _, ms := range st {
		res.StallMaxMs = max(res.StallMaxMs, round2(ms))
		if ms > 100 {
			res.StallSecondsOver100ms++
		}
	}
	for i := range res.WorstSeconds {
		res.WorstSeconds[i].StallMs = round2(st[res.WorstSeconds[i].Second])
	}

	res.Mirrored = int64(len(lat))
	if len(lat) > 0 {
		sort.Float64s(lat)
		res.P50Ms = round2(percentile(lat, 0.50))
		res.P99Ms = round2(percentile(lat, 0.99))
		res.MaxMs = round2(lat[len(lat)-1])
	}
	invMu.Lock()
	res.Invocations = append([]float64(nil), invocations...)
	invMu.Unlock()
	if res.Mirrored < produced {
		return res, fmt.Errorf("only %d of %d records reached the emulator within %s (log: %s)", res.Mirrored, produced, lc.Settle, res.Log)
	}
	return res, nil
}

// produceSteady produces lc.Rate records per second, keyed, spread over
// every partition, each stamped with the time it is produced, for
// lc.Duration. It returns how many records were acknowledged.
func produceSteady(ctx context.Context, in *infra, lc LatencyConfig) (int64, error) {
	var failed atomic.Pointer[error]
	var acked atomic.Int64
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
			return
		}
		acked.Add(1)
	}
	start := time.Now()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var n int64
	offsets := make([]int64, NumTopics*NumPartitions)
	for {
		now := time.Now()
		el := now.Sub(start)
		if el >= lc.Duration {
			break
		}
		want := int64(el.Seconds() * float64(lc.Rate))
		for ; n < want; n++ {
			i := int(n % int64(len(offsets)))
			ti, p := i/NumPartitions, i%NumPartitions
			off := offsets[i]
			offsets[i]++
			in.producer.Produce(ctx, in.gen.kafkaRecord(ti, p, off, now), done)
		}
		if errp := failed.Load(); errp != nil {
			return acked.Load(), fmt.Errorf("producing: %w", *errp)
		}
		select {
		case <-ctx.Done():
			return acked.Load(), ctx.Err()
		case <-tick.C:
		}
	}
	if err := in.producer.Flush(ctx); err != nil {
		return acked.Load(), fmt.Errorf("flushing the producer: %w", err)
	}
	if errp := failed.Load(); errp != nil {
		return acked.Load(), fmt.Errorf("producing: %w", *errp)
	}
	return acked.Load(), nil
}

// lateEventMs is the latency above which an event is written to a run's
// late-events file.
const lateEventMs = 250

// latencies returns, for every event the emulator holds, its enqueued time
// minus its record's Kafka timestamp, in milliseconds, overall and by
// second of production; it writes the events later than lateEventMs to
// the CSV file lateFile.
func latencies(in *infra, start time.Time, lateFile string) ([]float64, map[int][]float64, error) {
	f, err := os.Create(lateFile)
	if err != nil {
		return nil, nil, fmt.Errorf("late events: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "topic,partition,sequence,kafka_timestamp,enqueued,latency_ms")
	var out []float64
	bySecond := map[int][]float64{}
	for ti := range NumTopics {
		for p := range NumPartitions {
			for _, ev := range in.emu.Events(TopicName(ti), p) {
				ts, ok := ev.Properties[mirror.PropTimestamp].(time.Time)
				if !ok {
					return nil, nil, fmt.Errorf("event %d of %s/%d has no %s property", ev.SequenceNumber, TopicName(ti), p, mirror.PropTimestamp)
				}
				l := float64(ev.EnqueuedTime.Sub(ts).Microseconds()) / 1000
				out = append(out, l)
				sec := int(ts.Sub(start.Truncate(time.Second)) / time.Second)
				bySecond[sec] = append(bySecond[sec], l)
				if l > lateEventMs {
					fmt.Fprintf(w, "%s,%d,%d,%s,%s,%.1f\n", TopicName(ti), p, ev.SequenceNumber,
						ts.UTC().Format(time.RFC3339Nano), ev.EnqueuedTime.UTC().Format(time.RFC3339Nano), l)
				}
			}
		}
	}
	if err := w.Flush(); err != nil {
		return nil, nil, fmt.Errorf("late events: %w", err)
	}
	return out, bySecond, nil
}

// worstSeconds returns the n seconds with the highest maximum latency.
func worstSeconds(bySecond map[int][]float64, start time.Time, n int) []SecondLatency {
	var out []SecondLatency
	for sec, ls := range bySecond {
		sort.Float64s(ls)
		out = append(out, SecondLatency{Second: sec, Clock: start.Truncate(time.Second).Add(time.Duration(sec) * time.Second).UTC().Format(time.TimeOnly),
			Records: len(ls), P99Ms: round2(percentile(ls, 0.99)), MaxMs: round2(ls[len(ls)-1])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MaxMs > out[j].MaxMs })
	return out[:min(n, len(out))]
}

// percentile returns the q-quantile of sorted xs (nearest rank).
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// watchStalls measures, per second from start, how late a 10 ms ticker of
// this process fires. The returned function stops it and returns the
// worst lateness of each second in milliseconds.
func watchStalls(start time.Time) func() map[int]float64 {
	stop := make(chan struct{})
	done := make(chan map[int]float64)
	go func() {
		worst := map[int]float64{}
		const every = 10 * time.Millisecond
		last := time.Now()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- worst
				return
			case <-t.C:
				now := time.Now()
				late := now.Sub(last) - every
				last = now
				sec := int(now.Sub(start.Truncate(time.Second)) / time.Second)
				if ms := float64(late.Microseconds()) / 1000; ms > worst[sec] {
					worst[sec] = ms
				}
			}
		}
	}()
	return func() map[int]float64 {
		close(stop)
		return <-done
	}
}
