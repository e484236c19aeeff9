package faults

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// soak reports whether the long soak runs (EHMIRROR_SOAK=1); fast scenarios
// use it to scale up.
func soak() bool { return os.Getenv(soakEnv) != "" }

// seedEnv fixes the seed of the scenarios' random choices (kill points,
// purged partitions, the soak's fault mix) to replay a run.
const seedEnv = "EHMIRROR_FAULTS_SEED"

// newRand returns the random source of one test, seeded from
// EHMIRROR_FAULTS_SEED or the clock; the seed is logged so that a failing
// run can be replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(seedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", seedEnv, v)
		}
		seed = s
	}
	t.Logf("random seed %d (replay with %s=%d)", seed, seedEnv, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// needSoak skips a soak test unless EHMIRROR_SOAK is set.
func needSoak(t *testing.T) {
	t.Helper()
	if !soak() {
		t.Skipf("soak: set %s=1 (make soak)", soakEnv)
	}
}

// scale returns fast, or soak under EHMIRROR_SOAK.
func scale[T any](fast, long T) T {
	if soak() {
		return long
	}
	return fast
}

// drainLoop runs drains of m back to back, so that a fault injected at any
// moment hits a running drain, until stop is called. Drains that cannot
// start (Kafka down) are retried after a short pause.
type drainLoop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	reports []*mirror.Report
	errs    int
}

func (e *env) startDrains(m *mirror.Mirror, run string, lim mirror.Limits) *drainLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &drainLoop{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ctx.Err() == nil {
			rep, err := e.runDrain(ctx, m, run, lim)
			l.mu.Lock()
			if err != nil {
				l.errs++
			} else {
				l.reports = append(l.reports, rep)
			}
			l.mu.Unlock()
			if err != nil || rep.Records == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	e.t.Cleanup(l.stop)
	return l
}

// stop cancels the running drain (which still commits what Event Hubs
// acknowledged) and waits for it.
func (l *drainLoop) stop() {
	l.cancel()
	l.wg.Wait()
}

// result returns the reports of the drains that ran and how many could not
// start.
func (l *drainLoop) result() ([]*mirror.Report, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*mirror.Report(nil), l.reports...), l.errs
}

// failedDrains counts reports with a failure.
func failedDrains(reps []*mirror.Report) int {
	n := 0
	for _, r := range reps {
		if r.Failed() {
			n++
		}
	}
	return n
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// inProcess is the common shape of the in-process scenarios: produce
// continuously, drain back to back with m, run inject (which injects the
// faults while drains run), stop producing, clear the faults, settle, and
// verify every record Kafka holds.
type inProcess struct {
	e        *env
	f        *figures
	m        *mirror.Mirror
	lim      mirror.Limits
	producer producerConfig
	// warmup lets records flow before the first fault.
	warmup time.Duration
	// explain, when set, is the expectation's Explain.
	explain func(kafkaRecord) string
}

// run executes the scenario and returns the drain reports (settling
// excluded) and the verdict, already asserted.
func (s inProcess) run(ctx context.Context, inject func(ctx context.Context)) ([]*mirror.Report, verdict) {
	e := s.e
	e.t.Helper()
	p := e.startProducer(s.producer)
	loop := e.startDrains(s.m, "drain", s.lim)
	sleepCtx(ctx, max(s.warmup, 300*time.Millisecond))
	inject(ctx)
	loop.stop()
	p.stop()
	e.emu.Faults().Reset()
	reps, errs := loop.result()
	e.t.Logf("%d drains during the faults (%d failed, %d could not start); %d records produced (%d produce errors)",
		len(reps), failedDrains(reps), errs, p.acked.Load(), p.errs.Load())
	for _, r := range reps {
		if r.Failed() {
			lines := r.Lines()
			e.t.Logf("failed drain: %s; first problem: %s", r.Summary(), firstProblem(r))
			_ = lines
		}
	}
	e.settle(ctx, s.m, mirror.Limits{})
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs, Explain: s.explain})
	e.assert(s.f, v)
	return reps, v
}

// firstProblem returns the report's first error line.
func firstProblem(r *mirror.Report) string {
	if len(r.Errors) > 0 {
		return r.Errors[0]
	}
	for _, p := range r.Partitions {
		if p.Error != "" {
			return p.String()
		}
	}
	return ""
}
