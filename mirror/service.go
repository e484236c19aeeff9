package mirror

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// reportsKept is how many recent drain reports a Service keeps.
const reportsKept = 10

// Service runs a Mirror the way the function app uses it: a scheduled drain
// at a time, and at most one background catch-up that drains repeatedly
// until the group has no lag. It keeps the last reports for the status page.
type Service struct {
	mirror *Mirror
	limits Limits

	ctx    context.Context // canceled by Close; parent of catch-up runs
	cancel context.CancelFunc
	wg     sync.WaitGroup

	health *healthTracker

	mu      sync.Mutex
	reports []*Report
	active  *catchUp
	runs    []*catchUp // most recent last

	// observers get each drain's report (Observe); under mu.
	observers []func(*Report)
	// follower is the following drain handed over from invocation to
	// invocation (DrainFollowing), nil when none runs; under mu.
	follower *follower
}

// NewService returns a service whose drains use limits (a catch-up uses the
// same bounds for each of its drains).
func NewService(m *Mirror, limits Limits) *Service {
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{mirror: m, limits: limits, ctx: ctx, cancel: cancel, health: newHealthTracker()}
}

// Health returns whether records are being mirrored, from the last outcome
// per hub and partition. With lag, problems of partitions no longer
// mirrored are dropped.
func (s *Service) Health(lag *LagReport) Health {
	if lag != nil {
		tps := make(map[TopicPartition]bool, len(lag.Partitions))
		hubs := make(map[string]bool)
		for _, p := range lag.Partitions {
			tps[TopicPartition{Topic: p.Topic, Partition: p.Partition}] = true
			hubs[p.Hub] = true
		}
		s.health.forget(func(tp TopicPartition) bool { return tps[tp] }, hubs)
		s.health.kafkaAnswered()
		s.kafkaAnswered()
	}
	return s.health.snapshot(s.mirror.Running(), s.mirror.live.recoveredAfter)
}

// kafkaAnswered clears the last error of catch-ups whose last drain only
// failed to reach Kafka: Kafka has just answered.
func (s *Service) kafkaAnswered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.runs {
		c.mu.Lock()
		if c.kafkaError {
			c.status.LastError, c.status.LastErrorAt, c.kafkaError = "", time.Time{}, false
		}
		c.mu.Unlock()
	}
}

// Mirror returns the service's mirror.
func (s *Service) Mirror() *Mirror { return s.mirror }

// Triggers of a drain, as the drain log line names them.
const (
	TriggerTimer   = "timer"
	TriggerCatchUp = "catchup"
)

// Drain runs one scheduled drain named run within the service's limits,
// keeps its report and logs it (see [LogReport]).
func (s *Service) Drain(ctx context.Context, run string) (*Report, error) {
	s.stopFollower()
	return s.drain(ctx, run, TriggerTimer, s.limits)
}

// drain runs one drain, keeps its report, with a start failure recorded in
// it, updates the health and logs the report.
func (s *Service) drain(ctx context.Context, run, trigger string, lim Limits) (*Report, error) {
	rep, err := s.mirror.Drain(ctx, run, lim)
	s.conclude(ctx, rep, err, trigger, lim.MaxDuration, time.Second)
	return rep, err
}

// conclude records a drain's report (or an invocation's window of a drain
// handed over): a start failure in it, the backlog left, the health, the
// reports kept and the log. wait bounds the look-up of the backlog.
func (s *Service) conclude(ctx context.Context, rep *Report, err error, trigger string, budget, wait time.Duration) {
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	rep.markLagUnknown(err != nil)
	s.measureBacklog(ctx, rep, wait)
	if budget <= 0 {
		budget = time.Minute
	}
	rep.Trigger, rep.Budget = trigger, budget
	s.keep(rep)
	s.health.observe(rep)
	LogReport(ctx, s.mirror.opts.Logger, rep, trigger, budget, err != nil)
}

func (s *Service) keep(rep *Report) {
	s.mu.Lock()
	s.reports = append(s.reports, rep)
	if len(s.reports) > reportsKept {
		s.reports = s.reports[len(s.reports)-reportsKept:]
	}
	observers := slices.Clone(s.observers)
	s.mu.Unlock()
	for _, f := range observers {
		f(rep)
	}
}

// Observe calls f with the report of every drain that ends from now on
// (metrics); f must not keep the report.
func (s *Service) Observe(f func(*Report)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observers = append(s.observers, f)
}

// Reports returns the most recent drain reports, oldest first.
func (s *Service) Reports() []*Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Report(nil), s.reports...)
}

// CatchUpRequest asks for a catch-up.
type CatchUpRequest struct {
	// Topics narrows the catch-up to topics matching this filter; nil means
	// every mirrored topic.
	Topics *TopicFilter
	// TopicsPattern is the pattern Topics was compiled from, for the status.
	TopicsPattern string
	// MaxDuration bounds the whole run.
	MaxDuration time.Duration
}

// Catch-up states.
const (
	CatchUpRunning  = "running"
	CatchUpCaughtUp = "caught up"
	CatchUpTimedOut = "max duration reached"
	CatchUpCanceled = "canceled"
)

// CatchUpStatus is a snapshot of a catch-up run.
type CatchUpStatus struct {
	ID          string        `json:"id"`
	State       string        `json:"state"`
	Topics      string        `json:"topics,omitempty"`
	Started     time.Time     `json:"started"`
	Ended       time.Time     `json:"ended,omitzero"`
	MaxDuration time.Duration `json:"max_duration_ns"`
	Drains      int           `json:"drains"`
	Records     int64         `json:"records"`
	// Lag is the group's total lag (paused topics left out) measured after
	// the latest drain; -1 before the first measurement.
	Lag       int64  `json:"lag"`
	LastError string `json:"last_error,omitempty"`
	// LastErrorAt is when the drain that failed with LastError ended.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

type catchUp struct {
	mu     sync.Mutex
	status CatchUpStatus
	// kafkaError is set when LastError only says that Kafka could not be
	// reached: it clears as soon as Kafka answers.
	kafkaError bool
}

func (c *catchUp) snapshot() CatchUpStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

func (c *catchUp) update(f func(*CatchUpStatus)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.status)
}

// StartCatchUp starts a background catch-up, or returns the active one (with
// started false) when a run is already going.
func (s *Service) StartCatchUp(req CatchUpRequest) (status CatchUpStatus, started bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil {
		return s.active.snapshot(), false, nil
	}
	if err := s.ctx.Err(); err != nil {
		return CatchUpStatus{}, false, fmt.Errorf("service is shutting down: %w", err)
	}
	if req.MaxDuration <= 0 {
		req.MaxDuration = s.mirror.opts.CatchUpMaxDuration
	}
	id, err := newRunID()
	if err != nil {
		return CatchUpStatus{}, false, err
	}
	c := &catchUp{status: CatchUpStatus{ID: id, State: CatchUpRunning, Topics: req.TopicsPattern, Started: time.Now(), MaxDuration: req.MaxDuration, Lag: -1}}
	s.active = c
	s.runs = append(s.runs, c)
	if len(s.runs) > reportsKept {
		s.runs = s.runs[len(s.runs)-reportsKept:]
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runCatchUp(c, req)
	}()
	return c.snapshot(), true, nil
}

func (s *Service) runCatchUp(c *catchUp, req CatchUpRequest) {
	ctx, cancel := context.WithTimeout(s.ctx, req.MaxDuration)
	defer cancel()
	defer func() {
		s.mu.Lock()
		if s.active == c {
			s.active = nil
		}
		s.mu.Unlock()
	}()
	run := "catch-up " + c.snapshot().ID
	logger := s.mirror.opts.Logger
	logger.Info("catch-up started", "run", run, "trigger", TriggerCatchUp, "topics", req.TopicsPattern, "max_duration", req.MaxDuration.String())
	defer func() {
		st := c.snapshot()
		level := slog.LevelInfo
		if st.State != CatchUpCaughtUp {
			level = slog.LevelWarn
		}
		logger.Log(context.Background(), level, "catch-up ended", "run", run, "trigger", TriggerCatchUp, "state", st.State,
			"drains", st.Drains, "records", st.Records, "lag", st.Lag, "duration_ms", time.Since(st.Started).Milliseconds(), "last_error", st.LastError)
	}()
	limits := s.limits
	limits.Topics = req.Topics
	backoff := s.mirror.opts.RetryBackoff
	watch := newDeferral(req.MaxDuration, s.mirror.opts.CommitInterval)
	for {
		if ctx.Err() != nil {
			s.finish(c)
			return
		}
		if watching, caughtUp := s.watchOthers(ctx, c, req, watch); caughtUp {
			return
		} else if watching {
			// Other instances' drains mirror the partitions: watch the lag.
			if sleep(ctx, backoff) {
				backoff = min(backoff*2, time.Second)
			}
			continue
		}
		lim := limits
		if d, ok := ctx.Deadline(); ok {
			lim.MaxDuration = min(max(lim.MaxDuration, time.Second), time.Until(d))
		}
		rep, _ := s.drain(ctx, run, TriggerCatchUp, lim)
		watch.reset()
		c.mu.Lock()
		c.status.Drains++
		c.status.Records += rep.Records
		c.status.LastError, c.status.LastErrorAt, c.kafkaError = "", time.Time{}, false
		if rep.Failed() {
			lines := rep.Lines()
			c.status.LastError, c.status.LastErrorAt = lines[len(lines)-1], rep.Started.Add(rep.Duration)
			c.kafkaError = rep.Stopped == StopFailed && len(rep.Partitions) == 0 && len(rep.HubErrors) == 0
		}
		c.mu.Unlock()
		lag, err := s.mirror.Lag(ctx, req.Topics)
		if err == nil {
			c.update(func(st *CatchUpStatus) { st.Lag = lag.Unpaused() })
			if lag.Unpaused() == 0 {
				c.update(func(st *CatchUpStatus) { st.State, st.Ended = CatchUpCaughtUp, time.Now() })
				return
			}
		}
		if rep.Records == 0 {
			// No progress (another process holds the partitions, or errors):
			// back off instead of spinning.
			if !sleep(ctx, backoff) {
				continue
			}
			backoff = min(backoff*2, s.mirror.opts.MaxRetryBackoff)
		} else {
			backoff = s.mirror.opts.RetryBackoff
		}
	}
}

// finish marks a run that ran out of time, or was canceled by Close.
func (s *Service) finish(c *catchUp) {
	state := CatchUpTimedOut
	if s.ctx.Err() != nil {
		state = CatchUpCanceled
	}
	c.update(func(st *CatchUpStatus) { st.State, st.Ended = state, time.Now() })
}

// CatchUp returns the status of a recent run.
func (s *Service) CatchUp(id string) (CatchUpStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.runs {
		if st := c.snapshot(); st.ID == id {
			return st, true
		}
	}
	return CatchUpStatus{}, false
}

// ActiveCatchUp returns the running catch-up, if any.
func (s *Service) ActiveCatchUp() (CatchUpStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		return CatchUpStatus{}, false
	}
	return s.active.snapshot(), true
}

// CatchUps returns recent runs, oldest first.
func (s *Service) CatchUps() []CatchUpStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CatchUpStatus, 0, len(s.runs))
	for _, c := range s.runs {
		out = append(out, c.snapshot())
	}
	return out
}

// Close cancels a running catch-up and waits for it to commit and stop.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

func newRunID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating run id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// measureBacklog sets rep.BehindBy from the oldest record the drain left
// unmirrored on its partitions, waiting at most wait for it.
func (s *Service) measureBacklog(ctx context.Context, rep *Report, wait time.Duration) {
	from := map[TopicPartition]int64{}
	for _, p := range rep.Partitions {
		if p.LagAfter > 0 && p.Committed != NoOffset {
			from[TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.Committed
		}
	}
	if len(from) == 0 {
		return
	}
	// Briefly: the next tick of a following drain is due soon.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	now := time.Now()
	for _, t := range s.mirror.oldestUnmirrored(ctx, from) {
		rep.BehindBy = max(rep.BehindBy, now.Sub(t))
	}
}
