package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/ehmirror/ehmirror/functions/appbuild"
	"github.com/ehmirror/ehmirror/mirror"
)

// Config configures a benchmark run. Zero fields take the documented
// defaults.
type Config struct {
	// Shapes are the cases to run. Default: DefaultShapes.
	Shapes []Shape
	// Records is each case's backlog in records (rounded to a multiple of
	// the 20 partitions). 0 sizes each case so that its mirror drain takes
	// about Seconds, from a first smaller drain (the probe).
	Records int64
	// Seconds is the target duration of each case's mirror drain when
	// Records is 0. Default 10.
	Seconds float64
	// Quick is a smoke run: 2,000 records per case, one round, few samples.
	Quick bool
	// Rounds is how many times the read, send, parallel and mirror phases
	// run, in turn; each figure is the median round's. Default 3 (1 when
	// Quick).
	Rounds int
	// MaxBacklogBytes caps one case's backlog (value bytes), which kfake
	// keeps in this process's memory. Default 2 GiB.
	MaxBacklogBytes int64
	// IdleDrains is how many idle drains each case's mirror phase times.
	// Default 5 (2 when Quick); negative for none.
	IdleDrains int
	// StartSamples is how many times the handler's start-to-ready time is
	// measured. Default 7 (3 when Quick); negative for none.
	StartSamples int
	// Self is the command line that re-executes this binary as a child
	// (the child finds its spec in the environment). Default: the current
	// executable.
	Self []string
	// HandlerBinary is a built handler; empty builds ./handler of
	// ModuleRoot into OutDir.
	HandlerBinary string
	// ModuleRoot is the repository root, used to build the handler.
	// Default: found from the working directory.
	ModuleRoot string
	// OutDir receives the handler build and CPU profiles. Default .bench
	// under ModuleRoot.
	OutDir string
	// Profile names the cases whose mirror phase is CPU-profiled: the child
	// (engine and clients) and this process (kfake and the emulator).
	Profile []string
	// Far runs the far-Kafka case (FarVariants); TLS the TLS case
	// (TLSVariants).
	Far, TLS bool
	// Latency, when non-nil, runs the steady-load latency case.
	Latency *LatencyConfig
	// Quota, when non-nil, runs the quota case (the namespace's ingress
	// quota, see QuotaConfig).
	Quota *QuotaConfig
	// Scale, when non-nil, runs the scale-out case (see ScaleConfig).
	Scale *ScaleConfig
	// Cluster, when non-nil, runs issue 48's cluster-sized cases (see
	// ClusterConfig).
	Cluster *ClusterConfig
	// Logger receives progress. Default: text on stderr.
	Logger *slog.Logger
	// ChildStderr receives the children's diagnostics. Default os.Stderr.
	ChildStderr io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if c.Shapes == nil { // an empty, non-nil list runs only the extra cases
		c.Shapes = DefaultShapes()
	}
	if c.Seconds <= 0 {
		c.Seconds = 10
	}
	if c.Quick && c.Records == 0 {
		c.Records = 2000
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
		if c.Quick {
			c.Rounds = 1
		}
	}
	if c.MaxBacklogBytes <= 0 {
		c.MaxBacklogBytes = 2 << 30
	}
	if c.IdleDrains == 0 {
		c.IdleDrains = 5
		if c.Quick {
			c.IdleDrains = 2
		}
	}
	if c.StartSamples == 0 {
		c.StartSamples = 7
		if c.Quick {
			c.StartSamples = 3
		}
	}
	if len(c.Self) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("bench: finding this executable: %w", err)
		}
		c.Self = []string{exe}
	}
	if c.ModuleRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return c, fmt.Errorf("bench: %w", err)
		}
		if c.ModuleRoot, err = ModuleRoot(wd); err != nil {
			return c, fmt.Errorf("bench: %w", err)
		}
	}
	if c.OutDir == "" {
		c.OutDir = filepath.Join(c.ModuleRoot, ".bench")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if c.ChildStderr == nil {
		c.ChildStderr = os.Stderr
	}
	return c, nil
}

// Run measures every case, then the handler's start-to-ready time.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	eng, err := mirror.New(nil, nil, engineOptions(nil))
	if err != nil {
		return nil, fmt.Errorf("bench: engine options: %w", err)
	}
	res := &Results{
		Machine:       DescribeMachine(start),
		InFlightBytes: eng.Options().InFlightBytes,
		FetchBytes:    eng.Options().FetchBytes,
	}
	defer func() { res.Duration, res.LoadAvgEnd = time.Since(start), DescribeMachine(time.Now()).LoadAvg }()
	sp := spawner{self: cfg.Self, stderr: cfg.ChildStderr}
	for i, shape := range cfg.Shapes {
		cfg.Logger.Info(fmt.Sprintf("case %d/%d: %s", i+1, len(cfg.Shapes), shape.Name))
		cr, err := runCase(ctx, cfg, sp, shape, res.InFlightBytes)
		if err != nil {
			return res, fmt.Errorf("bench: case %s: %w", shape.Name, err)
		}
		res.Cases = append(res.Cases, cr)
		res.IdleDrainsMs = append(res.IdleDrainsMs, cr.IdleDrainsMs...)
	}
	for _, c := range []struct {
		on       bool
		name     string
		variants []Variant
	}{{cfg.Far, "1KiB-far", FarVariants()}, {cfg.TLS, "1KiB-tls", TLSVariants()}} {
		if !c.on {
			continue
		}
		cfg.Logger.Info("case " + c.name)
		cc, err := runConditionCase(ctx, cfg, sp, c.name, c.variants, res.InFlightBytes)
		if err != nil {
			return res, err
		}
		res.Conditions = append(res.Conditions, cc)
	}
	if cfg.Latency != nil {
		lr, err := runLatency(ctx, cfg, *cfg.Latency)
		res.Latency = append(res.Latency, lr...)
		if err != nil {
			return res, err
		}
	}
	if cfg.Quota != nil {
		qr, err := runQuota(ctx, cfg, sp, *cfg.Quota)
		res.Quota = append(res.Quota, qr...)
		if err != nil {
			return res, err
		}
	}
	if cfg.Scale != nil {
		sr, err := runScale(ctx, cfg, *cfg.Scale)
		res.Scale = append(res.Scale, sr...)
		if err != nil {
			return res, err
		}
	}
	if cfg.Cluster != nil {
		cr, err := runCluster(ctx, cfg, *cfg.Cluster)
		res.Cluster = append(res.Cluster, cr...)
		if err != nil {
			return res, err
		}
	}
	if cfg.StartSamples > 0 {
		if res.StartToReadyMs, err = measureStartToReady(ctx, cfg); err != nil {
			return res, fmt.Errorf("bench: start-to-ready: %w", err)
		}
	}
	return res, nil
}

// partitions is the number of Kafka partitions (and hub partitions) of a case.
const partitions = NumTopics * NumPartitions

// probePerPartition sizes the probe: about twice the in-flight bound as the
// engine charges it, so that even the smaller backlog fills the engine's
// memory bound, and at least the bound in value bytes. A probe of 100 B
// records sized by the charge alone (18 MB) drained in under a second,
// before the heap reached its steady size, and the check that peak RSS
// does not grow with the backlog compared a ramp-up with a steady state
// (1.73–2.18×, 2026-12-04).
func probePerPartition(cfg Config, shape Shape, inflight int64) int64 {
	if cfg.Records > 0 {
		return max(cfg.Records/4/partitions, 1)
	}
	rec := mirror.Record{Value: make([]byte, shape.Size)}
	if shape.Keyed {
		rec.Key = make([]byte, 11)
	}
	weight := mirror.InFlightWeight(&rec) // what the engine charges per record
	return min(max(2*inflight/weight/partitions, inflight/int64(shape.Size)/partitions, 1000), 40000)
}

// sizedBacklog is a case's backlog as loadBacklog sized and loaded it.
type sizedBacklog struct {
	// PerPartition is the records loaded per partition.
	PerPartition int64
	// Probe and Calibration are the drains that sized it (Calibration is
	// zero when Config.Records fixed the size).
	Probe, Calibration Measured
	// Load is the time spent producing it.
	Load time.Duration
}

// loadBacklog sizes a case's backlog so that its drain takes about
// cfg.Seconds and loads it into in: a probe drain of a small backlog, a
// backlog 1.5 times what the probe's rate needs (the probe runs slower
// than a long drain: most of it is the ramp-up of a fresh process), then a
// calibration drain of that backlog and, when it was shorter than 1.5
// times cfg.Seconds (the rounds run faster), a top-up, within
// cfg.MaxBacklogBytes. base is the spec the drains run with (brokers,
// connection string).
func loadBacklog(ctx context.Context, cfg Config, sp spawner, in *infra, base ChildSpec, inflight int64, log *slog.Logger) (sizedBacklog, error) {
	var sb sizedBacklog
	shape := base.Shape
	probePer := probePerPartition(cfg, shape, inflight)
	t0 := time.Now()
	if err := in.loadTo(ctx, probePer); err != nil {
		return sb, err
	}
	sb.Load = time.Since(t0)
	log.Info("loaded the probe backlog", "records", probePer*partitions, "mb", mb(probePer*partitions*int64(shape.Size)), "seconds", secs(sb.Load))

	var err error
	spec := base
	spec.Phase, spec.PerPartition, spec.Group = PhaseMirror, probePer, "bench-probe-"+shape.Name
	if sb.Probe, err = runPhase(ctx, sp, in, spec, ""); err != nil {
		return sb, fmt.Errorf("probe drain: %w", err)
	}
	log.Info("probe drain", "rss_mb_over_time", series(sb.Probe.RSSSamples, 8), "records", sb.Probe.Records, "rec_per_s", round2(sb.Probe.RecordsPerSecond()), "mb_per_s", round2(sb.Probe.MBPerSecond()), "peak_rss_mb", mb(sb.Probe.PeakRSS))

	maxPer := max(cfg.MaxBacklogBytes/int64(shape.Size)/partitions, probePer+1)
	perPartition := cfg.Records / partitions
	if cfg.Records <= 0 {
		want := int64(1.5 * sb.Probe.RecordsPerSecond() * cfg.Seconds / partitions)
		perPartition = min(max(want, 3*probePer), maxPer)
	}
	perPartition = max(perPartition, probePer+1)
	t0 = time.Now()
	if err := in.loadTo(ctx, perPartition); err != nil {
		return sb, err
	}
	sb.Load += time.Since(t0)
	log.Info("loaded the backlog", "records", perPartition*partitions, "mb", mb(perPartition*partitions*int64(shape.Size)), "load_seconds", secs(time.Since(t0)))

	if cfg.Records <= 0 {
		spec := base
		spec.Phase, spec.PerPartition, spec.Group = PhaseMirror, perPartition, "bench-calibrate-"+shape.Name
		if sb.Calibration, err = runPhase(ctx, sp, in, spec, ""); err != nil {
			return sb, fmt.Errorf("calibration drain: %w", err)
		}
		log.Info("calibration drain", "records", sb.Calibration.Records, "seconds", secs(time.Duration(sb.Calibration.Seconds*float64(time.Second))),
			"mb_per_s", round2(sb.Calibration.MBPerSecond()), "peak_rss_mb", mb(sb.Calibration.PeakRSS))
		// Rounds are often faster than the calibration (the median of them
		// counts): aim 1.5 times higher. The calibration is the first
		// drain after a load, which kfake serves slower (1 KiB, 2026-12-04:
		// 100–123 MB/s where the rounds after it ran 195–227 MB/s, its
		// fetches taking 110–140 ms instead of 35–42 ms), so the decision
		// to top up uses the same factor: a calibration of 10.65 s left
		// the far case's loopback rounds at 5.5 s of the 10 s asked, and
		// the drains' fixed cost of round trips a larger share of them.
		if want := int64(1.5 * sb.Calibration.RecordsPerSecond() * cfg.Seconds / partitions); want > perPartition && perPartition < maxPer {
			perPartition = min(want, maxPer)
			t0 = time.Now()
			if err := in.loadTo(ctx, perPartition); err != nil {
				return sb, err
			}
			sb.Load += time.Since(t0)
			log.Info("topped up the backlog", "records", perPartition*partitions, "mb", mb(perPartition*partitions*int64(shape.Size)), "load_seconds", secs(time.Since(t0)))
		}
	}
	sb.PerPartition = perPartition
	return sb, nil
}

func runCase(ctx context.Context, cfg Config, sp spawner, shape Shape, inflight int64) (CaseResult, error) {
	cr := CaseResult{Shape: shape}
	log := cfg.Logger.With("case", shape.Name)
	in, err := startInfra(ctx, shape)
	if err != nil {
		return cr, err
	}
	defer in.close()
	base := ChildSpec{Shape: shape, Brokers: in.brokers(), ConnectionString: in.emu.ConnectionString(), Timeout: 30 * time.Minute}

	sized, err := loadBacklog(ctx, cfg, sp, in, base, inflight, log)
	if err != nil {
		return cr, err
	}
	cr.Probe, cr.Calibration = sized.Probe, sized.Calibration
	perPartition := sized.PerPartition
	cr.LoadSeconds = sized.Load.Seconds()
	cr.Records = perPartition * partitions
	cr.BacklogBytes = cr.Records * int64(shape.Size)

	for round := range cfg.Rounds {
		if err := runRound(ctx, cfg, sp, in, base, perPartition, round, &cr); err != nil {
			return cr, err
		}
	}
	cr.Read, cr.Send, cr.Parallel, cr.Mirror = medianRound(cr.ReadRounds), medianRound(cr.SendRounds), medianRound(cr.ParallelRounds), medianRound(cr.MirrorRounds)
	cr.MirrorDedup = medianRound(cr.MirrorDedupRounds)
	for _, m := range cr.MirrorRounds {
		cr.Mirror.PeakRSS = max(cr.Mirror.PeakRSS, m.PeakRSS)
		cr.IdleDrainsMs = append(cr.IdleDrainsMs, m.IdleDrainsMs...)
	}
	log.Info("case done", "mirror_mb_per_s", round2(cr.Mirror.MBPerSecond()), "read_mb_per_s", round2(cr.Read.MBPerSecond()), "send_mb_per_s", round2(cr.Send.MBPerSecond()),
		"parallel_mb_per_s", round2(cr.Parallel.MBPerSecond()), "ratio", fmt.Sprintf("%.2f", cr.Ratio()), "ratio_vs_serial", fmt.Sprintf("%.2f", cr.SerialRatio()),
		"ratio_vs_parallel", fmt.Sprintf("%.2f", cr.ParallelRatio()), "peak_rss_mb", mb(cr.Mirror.PeakRSS))
	return cr, nil
}

// medianRound returns the median of a phase's rounds by throughput (of an
// even number, the slower of the two middle ones: a round that ran, not a
// mean of two). The fastest would be the round the shared machine's
// neighbours disturbed least, and quoting it flatters every figure.
func medianRound(rounds []Measured) Measured {
	if len(rounds) == 0 {
		return Measured{}
	}
	s := slices.Clone(rounds)
	slices.SortStableFunc(s, func(a, b Measured) int { return cmp.Compare(a.RecordsPerSecond(), b.RecordsPerSecond()) })
	return s[(len(s)-1)/2]
}

// runRound measures the read limit, the send limit, the parallel limit and
// the mirror once, in that order, appending to cr's rounds.
func runRound(ctx context.Context, cfg Config, sp spawner, in *infra, base ChildSpec, perPartition int64, round int, cr *CaseResult) error {
	log := cfg.Logger.With("case", cr.Shape.Name, "round", round+1)
	profiles := func(spec *ChildSpec) string {
		if round > 0 || !slices.Contains(cfg.Profile, cr.Shape.Name) {
			return ""
		}
		spec.CPUProfile = filepath.Join(cfg.OutDir, "cpu-"+cr.Shape.Name+"-"+spec.Phase+".pprof")
		infra := filepath.Join(cfg.OutDir, "cpu-"+cr.Shape.Name+"-"+spec.Phase+"-infra.pprof")
		cr.Profiles = append(cr.Profiles, spec.CPUProfile, infra)
		return infra
	}

	spec := base
	spec.Phase, spec.PerPartition = PhaseRead, perPartition
	m, err := runPhase(ctx, sp, in, spec, profiles(&spec))
	if err != nil {
		return err
	}
	cr.ReadRounds = append(cr.ReadRounds, m)
	log.Info("read limit", "rec_per_s", round2(m.RecordsPerSecond()), "mb_per_s", round2(m.MBPerSecond()))

	spec.Phase = PhaseSend
	before := in.emulatorEvents()
	if m, err = runPhase(ctx, sp, in, spec, profiles(&spec)); err != nil {
		return err
	}
	if got := in.emulatorEvents() - before; got != cr.Records {
		return fmt.Errorf("send phase: the emulator stored %d events, want %d", got, cr.Records)
	}
	cr.SendRounds = append(cr.SendRounds, m)
	log.Info("send limit", "rec_per_s", round2(m.RecordsPerSecond()), "mb_per_s", round2(m.MBPerSecond()), "io", m.Counters.describe())

	spec.Phase = PhaseParallel
	before = in.emulatorEvents()
	if m, err = runPhase(ctx, sp, in, spec, profiles(&spec)); err != nil {
		return err
	}
	if got := in.emulatorEvents() - before; got != cr.Records {
		return fmt.Errorf("parallel phase: the emulator stored %d events, want %d", got, cr.Records)
	}
	cr.ParallelRounds = append(cr.ParallelRounds, m)
	log.Info("parallel limit", "rec_per_s", round2(m.RecordsPerSecond()), "mb_per_s", round2(m.MBPerSecond()))

	spec.Phase, spec.Group = PhaseMirror, fmt.Sprintf("bench-mirror-%d", round+1)
	if round == cfg.Rounds-1 {
		spec.IdleDrains = max(cfg.IdleDrains, 0)
	}
	before = in.emulatorEvents()
	if m, err = runPhase(ctx, sp, in, spec, profiles(&spec)); err != nil {
		return err
	}
	if got := in.emulatorEvents() - before; got != cr.Records {
		return fmt.Errorf("mirror phase: the emulator stored %d events, want %d", got, cr.Records)
	}
	cr.MirrorRounds = append(cr.MirrorRounds, m)
	log.Info("mirror", "rec_per_s", round2(m.RecordsPerSecond()), "mb_per_s", round2(m.MBPerSecond()), "seconds", round2(m.Seconds),
		"peak_rss_mb", mb(m.PeakRSS), "idle_drain_ms", m.IdleDrainsMs, "rss_mb_over_time", series(m.RSSSamples, 8),
		"heap_live_mb_over_time", series(m.HeapLiveSamples, 8), "io", m.Counters.describe(), "read_time", m.ReadTime)

	// The same drain with MIRROR_DEDUPLICATE on, in a fresh group: a clean
	// drain's cost of the feature.
	spec.Group, spec.Deduplicate, spec.IdleDrains, spec.CPUProfile = fmt.Sprintf("bench-mirror-dedup-%d", round+1), true, 0, ""
	before = in.emulatorEvents()
	if m, err = runPhase(ctx, sp, in, spec, ""); err != nil {
		return err
	}
	if got := in.emulatorEvents() - before; got != cr.Records {
		return fmt.Errorf("mirror phase (deduplicate): the emulator stored %d events, want %d", got, cr.Records)
	}
	cr.MirrorDedupRounds = append(cr.MirrorDedupRounds, m)
	log.Info("mirror (MIRROR_DEDUPLICATE=true)", "rec_per_s", round2(m.RecordsPerSecond()), "mb_per_s", round2(m.MBPerSecond()), "seconds", round2(m.Seconds))
	return nil
}

// runPhase runs one child and measures this process's CPU time (kfake and
// the emulator) over the child's measured interval, optionally profiling it.
func runPhase(ctx context.Context, sp spawner, in *infra, spec ChildSpec, infraProfile string) (Measured, error) {
	var m Measured
	var cpu0 time.Duration
	var prof *os.File
	var profErr error
	onStart := func() {
		if infraProfile != "" {
			f, err := os.Create(infraProfile)
			if err == nil {
				err = pprof.StartCPUProfile(f)
				if err != nil {
					_ = f.Close()
				} else {
					prof = f
				}
			}
			profErr = err
		}
		cpu0 = cpuTime()
	}
	onEnd := func() {
		m.InfraCPUSeconds = (cpuTime() - cpu0).Seconds()
		if prof != nil {
			pprof.StopCPUProfile()
			profErr = prof.Close()
			prof = nil
		}
	}
	r, err := sp.run(ctx, spec, onStart, onEnd)
	if err != nil {
		return m, err
	}
	if profErr != nil {
		return m, fmt.Errorf("infra CPU profile: %w", profErr)
	}
	m.PhaseResult = r
	return m, nil
}

// measureStartToReady builds the handler (unless given) and times its start
// against a small Kafka and emulator.
func measureStartToReady(ctx context.Context, cfg Config) ([]float64, error) {
	bin := cfg.HandlerBinary
	if bin == "" {
		bin = filepath.Join(cfg.OutDir, "handler")
		cfg.Logger.Info("building the handler", "out", bin)
		if err := appbuild.BuildHandler(ctx, cfg.ModuleRoot, bin); err != nil {
			return nil, err
		}
	}
	in, err := startInfra(ctx, Shape{Name: "handler", Size: 1})
	if err != nil {
		return nil, err
	}
	defer in.close()
	settings := handlerSettings(in.brokers(), in.emu.ConnectionString())
	var out []float64
	for range cfg.StartSamples {
		d, err := startToReady(ctx, bin, settings, time.Millisecond)
		if err != nil {
			return out, err
		}
		out = append(out, float64(d.Microseconds())/1000)
	}
	cfg.Logger.Info("handler start-to-ready", "samples_ms", out, "median_ms", median(out))
	return out, nil
}

func mb(b int64) float64           { return round2(float64(b) / 1e6) }
func secs(d time.Duration) float64 { return round2(d.Seconds()) }

// round2 keeps two decimals, or none for large numbers.
func round2(x float64) float64 {
	if x >= 1000 || x <= -1000 {
		return float64(int64(x + 0.5))
	}
	return float64(int64(x*100+0.5)) / 100
}

// series picks up to n evenly spaced samples, in MB, for a log line.
func series(xs []int64, n int) []float64 {
	if len(xs) == 0 {
		return nil
	}
	var out []float64
	for i := range n {
		j := i * (len(xs) - 1) / max(n-1, 1)
		out = append(out, mb(xs[j]))
		if len(xs) == 1 {
			break
		}
	}
	return out
}
