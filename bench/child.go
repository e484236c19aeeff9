package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// The phases a child process measures.
const (
	// PhaseRead reads every record with the Kafka adapter's Fetch, one
	// goroutine per partition, and sends nothing.
	PhaseRead = "read"
	// PhaseSend sends the events of every record through the Event Hubs
	// sink, one sender per hub partition, and reads no Kafka.
	PhaseSend = "send"
	// PhaseParallel does PhaseRead's and PhaseSend's work at the same time
	// in one process, on independent data.
	PhaseParallel = "parallel"
	// PhaseMirror drains every record through the engine, commits included.
	PhaseMirror = "mirror"
)

// childEnv carries a [ChildSpec] as JSON to a child process.
const childEnv = "EHMIRROR_BENCH_CHILD"

// Lines a child writes on stdout. Everything else it writes goes to stderr.
const (
	markStart  = "BENCH-START"
	markEnd    = "BENCH-END"
	markResult = "BENCH-RESULT "
)

// ChildSpec tells a child process what to measure.
type ChildSpec struct {
	Phase string `json:"phase"`
	Shape Shape  `json:"shape"`
	// PerPartition is how many records each of the 20 partitions holds
	// (offsets 0..PerPartition-1).
	PerPartition     int64    `json:"per_partition"`
	Brokers          []string `json:"brokers"`
	ConnectionString string   `json:"connection_string"`
	// Group is the consumer group of a mirror phase: a fresh one per
	// measurement, so the drain starts at offset 0.
	Group string `json:"group"`
	// IdleDrains is how many drains a mirror phase runs after the measured
	// one, on the same warm process, when there is nothing left to do.
	IdleDrains int `json:"idle_drains"`
	// CPUProfile, when set, is where the child writes a CPU profile of the
	// measured interval.
	CPUProfile string `json:"cpu_profile,omitempty"`
	// CAFile, when set, is a PEM CA the child trusts (SSL_CERT_FILE) and
	// makes the child speak TLS to Kafka.
	CAFile string `json:"ca_file,omitempty"`
	// Timeout bounds the measured work.
	Timeout time.Duration `json:"timeout_ns"`
	// Deduplicate runs a mirror phase with MIRROR_DEDUPLICATE on (its
	// clean-drain cost: floors, the commit before sending, the Listen
	// check).
	Deduplicate bool `json:"deduplicate,omitempty"`
	// Records is how many records a quota phase mirrors in all (backlog
	// and records produced meanwhile); DrainDuration is the period of the
	// schedule that fires its drains (MIRROR_MAX_DURATION bounds each).
	Records       int64         `json:"records,omitempty"`
	DrainDuration time.Duration `json:"drain_duration_ns,omitempty"`
	// Partitioning, when set, is a quota phase's MIRROR_PARTITIONING.
	Partitioning string `json:"partitioning,omitempty"`
}

// PhaseResult is what a child measured.
type PhaseResult struct {
	Phase   string  `json:"phase"`
	Records int64   `json:"records"`
	Bytes   int64   `json:"bytes"` // value bytes
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the child's user+system CPU time (getrusage) over the
	// measured interval.
	CPUSeconds float64 `json:"cpu_seconds"`
	// GoCPU is the runtime's estimate of where the child's CPU went over
	// the same interval: its shares split CPUSeconds into the code's own
	// work and the garbage collector's.
	GoCPU GoCPU `json:"go_cpu"`
	// PeakRSS is the child's VmHWM at the end of the measurement, reset to
	// the then current RSS when the measurement started (PeakRSSReset).
	PeakRSS      int64 `json:"peak_rss_bytes"`
	PeakRSSReset bool  `json:"peak_rss_reset"`
	// RSSBefore is the child's RSS when the measurement started.
	RSSBefore int64 `json:"rss_before_bytes"`
	// RSSSamples and HeapLiveSamples are VmRSS and the Go heap's live bytes
	// (as of the last GC) every 250 ms of the measurement.
	RSSSamples      []int64 `json:"rss_samples,omitempty"`
	HeapLiveSamples []int64 `json:"heap_live_samples,omitempty"`
	// IdleDrainsMs are the durations of the idle drains, in milliseconds.
	IdleDrainsMs []float64 `json:"idle_drains_ms,omitempty"`
	// Counters are what the mirror phase's instrumented source and sink
	// saw during the measured drain.
	Counters Counters `json:"counters"`
	// Note says anything worth knowing, e.g. the drain's stop reason.
	Note string `json:"note,omitempty"`
	// ReadTime is where the mirror phase's readers spent their time (the
	// drain's Report.ReadTime): what bounded it.
	ReadTime *mirror.ReadTime `json:"read_time,omitempty"`
	// Drains, FailedDrains and Throttled (sends refused with server-busy)
	// are the quota phase's drains.
	Drains       int   `json:"drains,omitempty"`
	FailedDrains int   `json:"failed_drains,omitempty"`
	Throttled    int64 `json:"throttled,omitempty"`
}

// ChildSpecFromEnv returns the spec of a child process, or nil when this
// process is not a benchmark child.
func ChildSpecFromEnv(getenv func(string) string) (*ChildSpec, error) {
	v := getenv(childEnv)
	if v == "" {
		return nil, nil
	}
	var spec ChildSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", childEnv, err)
	}
	return &spec, nil
}

// meter times the measured interval of a child and tells the parent when it
// starts and ends.
type meter struct {
	w       io.Writer
	profile string
	prof    *os.File
	t0      time.Time
	cpu0    time.Duration
	goCPU0  GoCPU
	res     *PhaseResult
	// sampler records RSS and the live heap while the measurement runs.
	stopSampler chan struct{}
	samplerDone chan struct{}
}

// sampleEvery is how often the child samples its memory.
const sampleEvery = 250 * time.Millisecond

// sample records VmRSS and the Go heap's live bytes until stop is closed.
func (m *meter) sample() {
	defer close(m.samplerDone)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stopSampler:
			return
		case <-t.C:
			m.res.RSSSamples = append(m.res.RSSSamples, currentRSS())
			m.res.HeapLiveSamples = append(m.res.HeapLiveSamples, heapLive())
		}
	}
}

func (m *meter) start() error {
	m.goCPU0 = readGoCPU()
	m.res.PeakRSSReset = resetPeakRSS()
	m.res.RSSBefore = currentRSS()
	if m.profile != "" {
		f, err := os.Create(m.profile)
		if err != nil {
			return fmt.Errorf("creating the CPU profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		m.prof = f
	}
	if _, err := fmt.Fprintln(m.w, markStart); err != nil {
		return fmt.Errorf("telling the parent: %w", err)
	}
	m.stopSampler, m.samplerDone = make(chan struct{}), make(chan struct{})
	go m.sample()
	m.t0, m.cpu0 = time.Now(), cpuTime()
	return nil
}

func (m *meter) stop() error {
	m.res.Seconds = time.Since(m.t0).Seconds()
	m.res.CPUSeconds = (cpuTime() - m.cpu0).Seconds()
	m.res.GoCPU = readGoCPU().since(m.goCPU0)
	m.res.PeakRSS = peakRSS()
	close(m.stopSampler)
	<-m.samplerDone
	var errs []error
	if m.prof != nil {
		pprof.StopCPUProfile()
		errs = append(errs, m.prof.Close())
		m.prof = nil
	}
	if _, err := fmt.Fprintln(m.w, markEnd); err != nil {
		errs = append(errs, fmt.Errorf("telling the parent: %w", err))
	}
	return errors.Join(errs...)
}

// RunChild measures spec's phase and writes the start and end markers and
// the result to w (the child's stdout); logger receives diagnostics.
func RunChild(ctx context.Context, spec ChildSpec, w io.Writer, logger *slog.Logger) error {
	if spec.Timeout <= 0 {
		spec.Timeout = 10 * time.Minute
	}
	res := &PhaseResult{Phase: spec.Phase}
	m := &meter{w: w, profile: spec.CPUProfile, res: res}
	var err error
	switch spec.Phase {
	case PhaseRead:
		err = readPhase(ctx, spec, m)
	case PhaseSend:
		err = sendPhase(ctx, spec, m)
	case PhaseParallel:
		err = parallelPhase(ctx, spec, m)
	case PhaseMirror:
		err = mirrorPhase(ctx, spec, m, logger)
	case PhaseQuota:
		err = quotaPhase(ctx, spec, m, logger)
	default:
		err = fmt.Errorf("unknown phase %q", spec.Phase)
	}
	if err != nil {
		return fmt.Errorf("bench: %s phase of %s: %w", spec.Phase, spec.Shape.Name, err)
	}
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("bench: encoding the result: %w", err)
	}
	if _, err := fmt.Fprintf(w, "%s%s\n", markResult, data); err != nil {
		return fmt.Errorf("bench: writing the result: %w", err)
	}
	return nil
}

// spawner runs child processes for the parent.
type spawner struct {
	self   []string  // argv that re-executes this binary
	stderr io.Writer // where the children's stderr goes
}

// run starts a child for spec and waits for its result, calling onStart and
// onEnd when the child starts and ends its measured interval.
func (s spawner) run(ctx context.Context, spec ChildSpec, onStart, onEnd func()) (PhaseResult, error) {
	var res PhaseResult
	data, err := json.Marshal(spec)
	if err != nil {
		return res, fmt.Errorf("encoding the child spec: %w", err)
	}
	cmd := exec.CommandContext(ctx, s.self[0], s.self[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+string(data))
	if spec.CAFile != "" {
		cmd.Env = append(cmd.Env, "SSL_CERT_FILE="+spec.CAFile)
	}
	var tail tailBuffer
	cmd.Stderr = io.MultiWriter(s.stderr, &tail)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return res, fmt.Errorf("child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("starting the %s child: %w", spec.Phase, err)
	}
	got, started, ended := false, false, false
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == markStart && !started:
			started = true
			onStart()
		case line == markEnd && started && !ended:
			ended = true
			onEnd()
		case strings.HasPrefix(line, markResult):
			if err := json.Unmarshal([]byte(line[len(markResult):]), &res); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return res, fmt.Errorf("decoding the %s child's result: %w", spec.Phase, err)
			}
			got = true
		default:
			fmt.Fprintln(s.stderr, line)
		}
	}
	if started && !ended {
		onEnd()
	}
	if err := cmd.Wait(); err != nil {
		return res, fmt.Errorf("%s child: %w: %s", spec.Phase, err, strings.TrimSpace(tail.String()))
	}
	if !got {
		return res, fmt.Errorf("%s child exited without a result", spec.Phase)
	}
	return res, nil
}

// tailBuffer keeps the last few KiB written to it.
type tailBuffer struct{ b bytes.Buffer }

const tailKeep = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b.Write(p)
	if t.b.Len() > 2*tailKeep {
		keep := append([]byte(nil), t.b.Bytes()[t.b.Len()-tailKeep:]...)
		t.b.Reset()
		t.b.Write(keep)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	s := t.b.String()
	if len(s) > tailKeep {
		s = s[len(s)-tailKeep:]
	}
	return s
}
