package faults

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestTimerLockMovesToAnotherInstance (issue 49, item 3): two instances of
// the app share a Storage (AzureWebJobsStorage: the timer's singleton lock
// and its schedule status). Instance a holds the lock and hands its
// following drain over from tick to tick (every 3 s) while a producer
// writes; then a's listener stops (a restart, a scale-in: it finishes its
// invocation and releases the lease) while its handler process lives on.
// Instance b, polling for the lock, takes over within its poll; its first
// run is past due when it missed a tick and then does not follow; a's
// follower, adopted by no invocation, lets go after the handover grace;
// b's later ticks follow again. Nothing is lost, and with
// MIRROR_DEDUPLICATE=true nothing is duplicated.
func TestTimerLockMovesToAnotherInstance(t *testing.T) {
	e := newEnv(t, envConfig{})
	ctx := context.Background()
	// The real host polls every minute for a one-minute lease; here both
	// are scaled to the 3 s period.
	storage := &funchost.Storage{Dir: t.TempDir(), LockPeriod: 6 * time.Second, LockPoll: 3 * time.Second}
	settings := map[string]string{
		// Every 3 s, with an hour restricted so that the host keeps the
		// schedule monitor (ShouldDisableScheduleMonitor) and sends a
		// ScheduleStatus: the handler follows.
		config.MirrorSchedule:    "*/3 * " + hoursExcept(time.Now()) + " * * *",
		config.MirrorFollow:      "true",
		config.MirrorDeduplicate: "true",
	}
	shared := func(o *funchost.Options) { o.Storage = storage }
	a := e.startHandlerWith("a", settings, shared)
	b := e.startHandlerWith("b", settings, shared)
	ctxA, stopA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() { doneA <- a.host.RunSchedules(ctxA) }()
	sleepCtx(ctx, time.Second)
	ctxB, stopB := context.WithCancel(ctx)
	doneB := make(chan error, 1)
	go func() { doneB <- b.host.RunSchedules(ctxB) }()
	defer func() { stopA(); stopB() }()
	p := e.startProducer(producerConfig{Batch: 4})

	results := timerResults
	waitUntil := func(what string, limit time.Duration, cond func() bool) time.Time {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; a:\n%s\nb:\n%s", what, limit, tail(a.out.Stdout(), 3000), tail(b.out.Stdout(), 3000))
			}
			sleepCtx(ctx, 5*time.Millisecond)
		}
		return time.Now()
	}
	waitUntil("a hands its drain over twice", 4*time.Minute, func() bool { return a.handedOver() >= 2 })
	if n := len(results(b)); n != 0 {
		t.Fatalf("b ran %d invocations while a held the lock", n)
	}

	// The lock moves: a's listener stops, its handler process lives on.
	e.inject("timer lock moves from a to b")
	stopA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	aRuns := len(results(a))
	takenOver := waitUntil("b takes the timer over", storage.LockPoll+10*time.Second, func() bool { return len(results(b)) > 0 })
	first := results(b)[0]
	records, stopped, _ := drainSummary(first)
	t.Logf("b's first run %s after a released the lock (poll %s): past due %v, %d records, stopped: %s",
		takenOver.Sub(released).Round(time.Millisecond), storage.LockPoll, first.Timer.IsPastDue, records, stopped)
	if lines := reportLines(first); len(lines) > 0 {
		t.Logf("b's first run: %s", lines[0])
	}
	if first.Timer.IsPastDue && stopped == mirror.StopHandedOver {
		t.Errorf("b's past-due first run followed; a past-due run drains and returns")
	}
	if !first.Succeeded() {
		t.Errorf("b's first run failed: %v\n%s", first.Err, strings.Join(reportLines(first), "\n"))
	}
	// a's follower, adopted by nobody, lets go after the handover grace.
	letGo := waitUntil("a's follower lets go", mirror.HandoverGrace+20*time.Second, func() bool { return len(a.runningDrains(ctx)) == 0 })
	t.Logf("a's follower let go %s after a released the lock (handover grace %s)", letGo.Sub(released).Round(time.Millisecond), mirror.HandoverGrace)
	if n := len(results(a)); n != aRuns {
		t.Errorf("a ran %d timer invocations after its listener stopped", n-aRuns)
	}
	before := b.handedOver()
	waitUntil("b's ticks follow again", 2*time.Minute, func() bool { return b.handedOver() > before })

	p.stop()
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	b.settle(ctx)
	verifyNothingLostNorDuplicated(t, e, "timer lock moved from a to b")
}

// hoursExcept is an hour field with every hour but the one 12 hours from
// now: a sub-minute schedule restricted by it keeps the host's schedule
// monitor and fires all through a test.
func hoursExcept(now time.Time) string {
	skip := (now.UTC().Hour() + 12) % 24
	var hours []string
	for h := range 24 {
		if h != skip {
			hours = append(hours, strconv.Itoa(h))
		}
	}
	return strings.Join(hours, ",")
}
