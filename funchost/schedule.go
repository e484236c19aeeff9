package funchost

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/functions/ncrontab"
)

// timerState is one timer function's listener: its schedule, the schedule
// monitor's record and the invocation lock that keeps it from overlapping
// itself.
type timerState struct {
	fn           *functions.Function
	binding      string
	schedule     *ncrontab.Schedule
	useMonitor   bool
	runOnStartup bool

	invoking sync.Mutex // TimerListener._invocationLock

	mu       sync.Mutex
	stored   *functions.ScheduleStatus // the monitor's record (persisted status blob)
	listener *functions.ScheduleStatus // the listener's in-memory status
}

// fireKind says why a timer fires.
type fireKind int

const (
	fireScheduled fireKind = iota
	firePastDue
	fireRunOnStartup
	fireManual
	// fireAdmin is a run through the admin API (POST
	// /admin/functions/<name>): FunctionsController.Invoke calls the
	// function through TimerTriggerBinding.BindAsync, outside the
	// listener: it does not wait for a running invocation, sends the
	// monitor's record as it stands with IsPastDue false, and leaves the
	// schedule status alone.
	fireAdmin
)

// TimerInvocation adjusts a timer invocation made with InvokeTimer.
type TimerInvocation struct {
	// IsPastDue sets Data.<timer>.IsPastDue.
	IsPastDue bool
	// Status, when set, is sent as ScheduleStatus instead of the host's
	// record (even when the function has useMonitor false).
	Status *functions.ScheduleStatus
	// RetryContext, when set, is sent as Metadata.RetryContext.
	RetryContext *functions.RetryContext
}

// InvokeTimer fires a timer function now, as its timer listener would: it
// waits for any running invocation of the same function (no overlap),
// sends the host's timer payload (ScheduleStatus from the host's record,
// first run Last = 0001-01-01T00:00:00+00:00, null when useMonitor is off),
// judges the response and then advances the record (Last = this start,
// Next = the occurrence after it), failures included. Calling it in a loop
// fires the function immediately and repeatedly. The error is non-nil only
// when name is not an invocable timer function.
func (h *Host) InvokeTimer(ctx context.Context, name string, opts TimerInvocation) (*Result, error) {
	fn, err := h.function(name)
	if err != nil {
		return nil, err
	}
	ts, ok := h.timers[fn.Name]
	if !ok {
		return nil, fmt.Errorf("funchost: function %s is not timer-triggered", fn.Name)
	}
	return h.fireTimer(ctx, ts, fireManual, opts), nil
}

func (h *Host) now() time.Time { return time.Now().In(h.loc) }

// fireTimer is TimerListener.InvokeJobFunction.
func (h *Host) fireTimer(ctx context.Context, ts *timerState, kind fireKind, opts TimerInvocation) *Result {
	if kind == fireAdmin {
		return h.fireAdmin(ctx, ts)
	}
	ts.invoking.Lock()
	defer ts.invoking.Unlock()
	start := h.now()
	ts.mu.Lock()
	if ts.listener == nil {
		st := initialListenerStatus(start, ts.schedule, ts.stored)
		ts.listener = &st
	}
	status := *ts.listener
	ts.mu.Unlock()

	timer := functions.Timer{Schedule: functions.TimerSchedule{AdjustForDST: true}, IsPastDue: kind == firePastDue || opts.IsPastDue}
	switch {
	case opts.Status != nil:
		st := *opts.Status
		timer.ScheduleStatus = &st
	case ts.useMonitor:
		st := status
		timer.ScheduleStatus = &st
	}
	reason := fmt.Sprintf("Timer fired at %s", functions.FormatLocalTime(start))
	if kind == fireManual {
		reason = manualReason
	}
	res := h.invokeTimerFunction(ctx, ts, timer, reason, opts.RetryContext)

	// Failures advance the schedule too ("We don't want any function
	// errors to stop the execution schedule").
	next := statusAfterRun(start, kind, status, ts.schedule)
	ts.mu.Lock()
	ts.listener = &next
	if ts.useMonitor {
		rec := next
		ts.stored = &rec
	}
	ts.mu.Unlock()
	return h.report(res)
}

// manualReason is the host's reason for a run through its APIs.
const manualReason = "This function was programmatically called via the host APIs."

// invokeTimerFunction sends one timer invocation with timer as its trigger
// value.
func (h *Host) invokeTimerFunction(ctx context.Context, ts *timerState, timer functions.Timer, reason string, retry *functions.RetryContext) *Result {
	sys := functions.Sys{MethodName: ts.fn.Name, UtcNow: time.Now().UTC(), RandGuid: newGUID()}
	id := newGUID()
	inv, err := functions.NewTimerInvocation(ts.binding, timer, sys, retry)
	var body []byte
	if err == nil {
		body, err = json.Marshal(inv)
	}
	if err != nil {
		return &Result{Function: ts.fn.Name, InvocationID: id, Reason: reason, Timer: &timer, Start: time.Now(), Err: fmt.Errorf("build timer invocation: %w", err)}
	}
	return h.invoke(ctx, ts.fn, body, id, reason, &timer)
}

// fireAdmin is a run through the admin API (see fireAdmin's kind).
func (h *Host) fireAdmin(ctx context.Context, ts *timerState) *Result {
	timer := functions.Timer{Schedule: functions.TimerSchedule{AdjustForDST: true}}
	ts.mu.Lock()
	if ts.useMonitor && ts.stored != nil {
		st := safeStatus(*ts.stored)
		timer.ScheduleStatus = &st
	}
	ts.mu.Unlock()
	return h.report(h.invokeTimerFunction(ctx, ts, timer, manualReason, nil))
}

// initialListenerStatus is the status a listener starts with when it has
// not run the startup check: the monitor's record, or the first-run default.
func initialListenerStatus(now time.Time, sched *ncrontab.Schedule, stored *functions.ScheduleStatus) functions.ScheduleStatus {
	if stored != nil {
		return safeStatus(*stored)
	}
	return functions.ScheduleStatus{Next: sched.Next(now)}
}

// statusAfterRun is the status TimerListener records after an invocation
// that started at start: Last = LastUpdated = start (moved forward to the
// scheduled occurrence when a scheduled timer fired slightly early), Next =
// the next occurrence after it.
func statusAfterRun(start time.Time, kind fireKind, before functions.ScheduleStatus, sched *ncrontab.Schedule) functions.ScheduleStatus {
	adjusted := start
	if kind == fireScheduled && before.Next.After(start) {
		adjusted = before.Next.In(start.Location())
	}
	return functions.ScheduleStatus{Last: adjusted, Next: sched.Next(adjusted), LastUpdated: adjusted}
}

// defaultThreshold: the host treats timestamps before year 2 as unset.
func unset(t time.Time) bool { return t.Year() < 2 }

// safeStatus is ScheduleMonitor.GetSafeStatusAsync: unset values become
// the default (zero) time.
func safeStatus(s functions.ScheduleStatus) functions.ScheduleStatus {
	for _, t := range []*time.Time{&s.Last, &s.Next, &s.LastUpdated} {
		if unset(*t) {
			*t = time.Time{}
		}
	}
	return s
}

// timerStartup is TimerListener.StartAsync with
// ScheduleMonitor.CheckPastDueAsync. stored is the monitor's record (nil
// when there is none). It returns the listener's status, the record the
// monitor holds afterwards (nil when useMonitor is off), how the first
// invocation happens, and for a past-due start the missed occurrence.
func timerStartup(now time.Time, sched *ncrontab.Schedule, stored *functions.ScheduleStatus, useMonitor, runOnStartup bool) (listener functions.ScheduleStatus, record *functions.ScheduleStatus, first fireKind, missed time.Time) {
	loc := now.Location()
	var status *functions.ScheduleStatus
	pastDue := false
	if useMonitor {
		if stored != nil {
			s := safeStatus(*stored)
			status = &s
		}
		var recordedNext time.Time
		if status == nil {
			next := sched.Next(now)
			record = &functions.ScheduleStatus{Next: next, LastUpdated: now}
			recordedNext = next
		} else {
			var expected, lastUpdated time.Time
			switch {
			case !unset(status.Last):
				expected, lastUpdated = sched.Next(status.Last.In(loc)), status.Last
			case !unset(status.LastUpdated):
				expected, lastUpdated = sched.Next(status.LastUpdated.In(loc)), status.LastUpdated
			default:
				expected, lastUpdated = sched.Next(now), now
			}
			if !status.Next.Equal(expected) {
				// The schedule changed: recompute, and never count a
				// changed schedule's past occurrence as missed.
				if now.After(expected) {
					expected, lastUpdated = sched.Next(now), now
				}
				status.Last, status.Next, status.LastUpdated = time.Time{}, expected, lastUpdated
			}
			rec := *status
			record = &rec
			recordedNext = status.Next
		}
		pastDue = now.After(recordedNext)
	}
	if status == nil {
		status = &functions.ScheduleStatus{Next: sched.Next(now)}
	}
	switch {
	case pastDue:
		return *status, record, firePastDue, status.Next
	case runOnStartup:
		return *status, record, fireRunOnStartup, time.Time{}
	default:
		return *status, record, fireScheduled, time.Time{}
	}
}

// nextInterval is TimerListener.GetNextTimerInterval: how long to wait for
// next; an occurrence already past means "now" (one immediate catch-up).
func nextInterval(next, now time.Time) time.Duration {
	if d := next.Sub(now); d > 0 {
		return d
	}
	return 0
}

// RunSchedules runs every enabled timer function on its schedule until ctx
// ends or the host stops, with the timer listener's semantics: at start, a
// missed occurrence (per the host's record) fires at once with IsPastDue,
// else runOnStartup fires at once; a function never overlaps itself; after
// each run the next occurrence is computed from that run's start and, if
// it has already passed, fires immediately (once: missed occurrences
// collapse). When ctx ends, running invocations complete (bounded by
// functionTimeout or Stop) before RunSchedules returns. It returns the
// host's error if the host shut itself down.
func (h *Host) RunSchedules(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, name := range sortedKeys(h.timers) {
		ts := h.timers[name]
		if h.disabled(ts.fn) {
			h.log.Info("Function is disabled; not scheduling it", "category", hostGeneralLogCategory, "function", ts.fn.Name)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.runTimer(ctx, ts)
		}()
	}
	wg.Wait()
	select {
	case <-h.done:
		return h.Err()
	default:
		return nil
	}
}

func (h *Host) runTimer(ctx context.Context, ts *timerState) {
	if st := h.opts.Storage; st != nil {
		var release func()
		var ok bool
		if ctx, release, ok = h.takeListenerLock(ctx, st, ts); !ok {
			return
		}
		defer release()
		stored, err := st.readStatus(ts.fn.Name)
		if err != nil {
			h.log.Error("Reading the schedule status", "category", hostGeneralLogCategory, "function", ts.fn.Name, "error", err)
		}
		ts.mu.Lock()
		if stored != nil {
			ts.stored = stored
		}
		ts.mu.Unlock()
	}
	now := h.now()
	ts.mu.Lock()
	listener, record, kind, missed := timerStartup(now, ts.schedule, ts.stored, ts.useMonitor, ts.runOnStartup)
	ts.listener = &listener
	if record != nil {
		ts.stored = record
	}
	ts.mu.Unlock()
	var occ []string
	for _, t := range ts.schedule.Occurrences(now, 5) {
		occ = append(occ, functions.FormatLocalTime(t))
	}
	h.log.Info(fmt.Sprintf("The next 5 occurrences of the '%s' schedule (Cron: '%s') will be: %s", ts.fn.Name, ts.schedule, strings.Join(occ, ", ")), "category", hostGeneralLogCategory, "useMonitor", ts.useMonitor)
	if kind == firePastDue {
		h.log.Info(fmt.Sprintf("Function '%s' is past due (missed %s).", ts.fn.Name, functions.FormatLocalTime(missed)), "category", hostGeneralLogCategory)
	}
	invokeCtx := context.WithoutCancel(ctx)
	for {
		wait := time.Millisecond // startup invocations: a 1 ms timer
		if kind == fireScheduled {
			ts.mu.Lock()
			next := ts.listener.Next
			ts.mu.Unlock()
			wait = nextInterval(next, h.now())
			// FireEarly: at most that much before the occurrence, and at
			// once when less remains (a host started 100 ms before an
			// occurrence fires it early too, not on time).
			wait = max(wait-h.opts.FireEarly, 0)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-h.done:
			t.Stop()
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return // both were ready; stopping wins
		}
		h.fireTimer(invokeCtx, ts, kind, TimerInvocation{})
		kind = fireScheduled
		if st := h.opts.Storage; st != nil && ts.useMonitor {
			// UpdateStatusAsync, before the next timer starts.
			ts.mu.Lock()
			rec := *ts.stored
			ts.mu.Unlock()
			if err := st.writeStatus(ts.fn.Name, rec); err != nil {
				h.log.Error("Writing the schedule status", "category", hostGeneralLogCategory, "function", ts.fn.Name, "error", err)
			}
		}
	}
}

// takeListenerLock is SingletonListener.StartAsync for a timer: it takes the
// timer's lock in st, trying again every LockPoll, and renews it every half
// LockPeriod. It returns a context that ends with ctx or when the lease is
// lost (the host then shuts down; here the listener stops), and release,
// which gives the lock up (a graceful stop, after the running invocation).
// ok is false when ctx ended or the host stopped first.
func (h *Host) takeListenerLock(ctx context.Context, st *Storage, ts *timerState) (_ context.Context, release func(), ok bool) {
	name := ts.fn.Name
	for {
		got, err := st.lease(name, h.instance)
		if err != nil {
			h.log.Error("Taking the listener lock", "category", hostGeneralLogCategory, "function", name, "error", err)
		}
		if got {
			break
		}
		h.log.Debug(fmt.Sprintf("Unable to acquire Singleton lock (%s.Listener); trying again in %s.", name, st.lockPoll()), "category", hostGeneralLogCategory)
		t := time.NewTimer(st.lockPoll())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx, nil, false
		case <-h.done:
			t.Stop()
			return ctx, nil, false
		case <-t.C:
		}
	}
	h.log.Info(fmt.Sprintf("Singleton lock acquired (%s.Listener)", name), "category", hostGeneralLogCategory, "instance", h.instance)
	lctx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		tick := time.NewTicker(st.lockPeriod() / 2)
		defer tick.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			if got, err := st.lease(name, h.instance); !got {
				h.log.Error(fmt.Sprintf("Singleton lock renewal failed (%s.Listener): the lease is lost; the listener stops", name), "category", hostGeneralLogCategory, "error", err)
				cancel()
				return
			}
		}
	}()
	return lctx, func() {
		cancel()
		<-renewed
		if err := st.release(name, h.instance); err != nil {
			h.log.Error("Releasing the listener lock", "category", hostGeneralLogCategory, "function", name, "error", err)
		}
		h.log.Info(fmt.Sprintf("Singleton lock released (%s.Listener)", name), "category", hostGeneralLogCategory, "instance", h.instance)
	}, true
}

// ScheduleStatus returns the schedule monitor's record for a timer
// function (what the host would persist), if it has one.
func (h *Host) ScheduleStatus(name string) (functions.ScheduleStatus, bool) {
	fn, ok := h.app.Function(name)
	if !ok {
		return functions.ScheduleStatus{}, false
	}
	ts, ok := h.timers[fn.Name]
	if !ok {
		return functions.ScheduleStatus{}, false
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.stored == nil {
		return functions.ScheduleStatus{}, false
	}
	return *ts.stored, true
}

// SetScheduleStatus replaces the schedule monitor's record for a timer
// function, as if the host had persisted it earlier; the next RunSchedules
// starts from it (e.g. a Next in the past makes a past-due run).
func (h *Host) SetScheduleStatus(name string, status functions.ScheduleStatus) error {
	fn, err := h.function(name)
	if err != nil {
		return err
	}
	ts, ok := h.timers[fn.Name]
	if !ok {
		return fmt.Errorf("funchost: function %s is not timer-triggered", fn.Name)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.stored = &status
	ts.listener = nil
	return nil
}

// disabled reports whether a function is disabled by function.json or the
// AzureWebJobs.<Name>.Disabled app setting.
func (h *Host) disabled(fn *functions.Function) bool {
	if fn.Disabled {
		return true
	}
	v, ok := h.settings(fn.DisabledSetting())
	return ok && strings.EqualFold(strings.TrimSpace(v), "true")
}
