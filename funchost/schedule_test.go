package funchost

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/functions/ncrontab"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestTimerStartup checks TimerListener.StartAsync + CheckPastDueAsync.
func TestTimerStartup(t *testing.T) {
	every5 := ncrontab.MustParse("0 */5 * * * *")
	now := ts("2026-01-10T10:07:30Z")
	tests := []struct {
		name                  string
		stored                *functions.ScheduleStatus
		useMonitor, onStartup bool
		wantKind              fireKind
		wantListener          functions.ScheduleStatus
		wantRecord            *functions.ScheduleStatus
		wantMissed            time.Time
	}{
		{
			name: "first start ever", useMonitor: true, wantKind: fireScheduled,
			wantListener: functions.ScheduleStatus{Next: ts("2026-01-10T10:10:00Z")},
			wantRecord:   &functions.ScheduleStatus{Next: ts("2026-01-10T10:10:00Z"), LastUpdated: now},
		},
		{
			name:   "restart, nothing missed",
			stored: &functions.ScheduleStatus{Last: ts("2026-01-10T10:05:00Z"), Next: ts("2026-01-10T10:10:00Z"), LastUpdated: ts("2026-01-10T10:05:00Z")}, useMonitor: true, wantKind: fireScheduled,
			wantListener: functions.ScheduleStatus{Last: ts("2026-01-10T10:05:00Z"), Next: ts("2026-01-10T10:10:00Z"), LastUpdated: ts("2026-01-10T10:05:00Z")},
			wantRecord:   &functions.ScheduleStatus{Last: ts("2026-01-10T10:05:00Z"), Next: ts("2026-01-10T10:10:00Z"), LastUpdated: ts("2026-01-10T10:05:00Z")},
		},
		{
			name:   "down over an occurrence: one past-due run",
			stored: &functions.ScheduleStatus{Last: ts("2026-01-10T09:55:00Z"), Next: ts("2026-01-10T10:00:00Z"), LastUpdated: ts("2026-01-10T09:55:00Z")}, useMonitor: true, wantKind: firePastDue,
			wantListener: functions.ScheduleStatus{Last: ts("2026-01-10T09:55:00Z"), Next: ts("2026-01-10T10:00:00Z"), LastUpdated: ts("2026-01-10T09:55:00Z")},
			wantRecord:   &functions.ScheduleStatus{Last: ts("2026-01-10T09:55:00Z"), Next: ts("2026-01-10T10:00:00Z"), LastUpdated: ts("2026-01-10T09:55:00Z")},
			wantMissed:   ts("2026-01-10T10:00:00Z"),
		},
		{
			name:   "never fired, down over the first occurrence",
			stored: &functions.ScheduleStatus{Next: ts("2026-01-10T10:05:00Z"), LastUpdated: ts("2026-01-10T10:01:00Z")}, useMonitor: true, wantKind: firePastDue,
			wantListener: functions.ScheduleStatus{Next: ts("2026-01-10T10:05:00Z"), LastUpdated: ts("2026-01-10T10:01:00Z")},
			wantRecord:   &functions.ScheduleStatus{Next: ts("2026-01-10T10:05:00Z"), LastUpdated: ts("2026-01-10T10:01:00Z")},
			wantMissed:   ts("2026-01-10T10:05:00Z"),
		},
		{
			name:   "schedule changed: recomputed, not past due",
			stored: &functions.ScheduleStatus{Last: ts("2026-01-10T09:00:00Z"), Next: ts("2026-01-10T10:00:00Z"), LastUpdated: ts("2026-01-10T09:00:00Z")}, useMonitor: true, wantKind: fireScheduled,
			wantListener: functions.ScheduleStatus{Next: ts("2026-01-10T10:10:00Z"), LastUpdated: now},
			wantRecord:   &functions.ScheduleStatus{Next: ts("2026-01-10T10:10:00Z"), LastUpdated: now},
		},
		{
			name: "runOnStartup", useMonitor: true, onStartup: true, wantKind: fireRunOnStartup,
			wantListener: functions.ScheduleStatus{Next: ts("2026-01-10T10:10:00Z")},
			wantRecord:   &functions.ScheduleStatus{Next: ts("2026-01-10T10:10:00Z"), LastUpdated: now},
		},
		{
			name:   "past due wins over runOnStartup",
			stored: &functions.ScheduleStatus{Last: ts("2026-01-10T09:55:00Z"), Next: ts("2026-01-10T10:00:00Z"), LastUpdated: ts("2026-01-10T09:55:00Z")}, useMonitor: true, onStartup: true, wantKind: firePastDue,
			wantListener: functions.ScheduleStatus{Last: ts("2026-01-10T09:55:00Z"), Next: ts("2026-01-10T10:00:00Z"), LastUpdated: ts("2026-01-10T09:55:00Z")},
			wantRecord:   &functions.ScheduleStatus{Last: ts("2026-01-10T09:55:00Z"), Next: ts("2026-01-10T10:00:00Z"), LastUpdated: ts("2026-01-10T09:55:00Z")},
			wantMissed:   ts("2026-01-10T10:00:00Z"),
		},
		{
			name:   "no monitor: never past due, record untouched",
			stored: &functions.ScheduleStatus{Last: ts("2026-01-10T09:55:00Z"), Next: ts("2026-01-10T10:00:00Z")}, wantKind: fireScheduled,
			wantListener: functions.ScheduleStatus{Next: ts("2026-01-10T10:10:00Z")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stored *functions.ScheduleStatus
			if tt.stored != nil {
				s := *tt.stored
				stored = &s
			}
			listener, record, kind, missed := timerStartup(now, every5, stored, tt.useMonitor, tt.onStartup)
			if kind != tt.wantKind || !sameStatus(listener, tt.wantListener) || !missed.Equal(tt.wantMissed) {
				t.Errorf("got kind %v listener %+v missed %v\nwant kind %v listener %+v missed %v", kind, listener, missed, tt.wantKind, tt.wantListener, tt.wantMissed)
			}
			if (record == nil) != (tt.wantRecord == nil) || record != nil && !sameStatus(*record, *tt.wantRecord) {
				t.Errorf("record %+v, want %+v", record, tt.wantRecord)
			}
		})
	}
}

func sameStatus(a, b functions.ScheduleStatus) bool {
	return a.Last.Equal(b.Last) && a.Next.Equal(b.Next) && a.LastUpdated.Equal(b.LastUpdated)
}

func TestStatusAfterRun(t *testing.T) {
	every5 := ncrontab.MustParse("0 */5 * * * *")
	before := functions.ScheduleStatus{Next: ts("2026-01-10T10:05:00Z")}
	// A scheduled timer that fired 3 ms early counts as the occurrence.
	got := statusAfterRun(ts("2026-01-10T10:04:59.997Z"), fireScheduled, before, every5)
	if want := (functions.ScheduleStatus{Last: ts("2026-01-10T10:05:00Z"), Next: ts("2026-01-10T10:10:00Z"), LastUpdated: ts("2026-01-10T10:05:00Z")}); !sameStatus(got, want) {
		t.Errorf("early fire: %+v, want %+v", got, want)
	}
	// A run that overran: Next computed from its start is already past,
	// which makes the single immediate catch-up.
	got = statusAfterRun(ts("2026-01-10T10:05:00.01Z"), fireScheduled, before, every5)
	if !got.Next.Equal(ts("2026-01-10T10:10:00Z")) || !got.Last.Equal(ts("2026-01-10T10:05:00.01Z")) {
		t.Errorf("late: %+v", got)
	}
	if d := nextInterval(got.Next, ts("2026-01-10T10:12:00Z")); d != 0 {
		t.Errorf("overrun interval = %v, want 0 (immediate)", d)
	}
	if d := nextInterval(got.Next, ts("2026-01-10T10:09:00Z")); d != time.Minute {
		t.Errorf("interval = %v", d)
	}
	// Manual and past-due runs are not adjusted.
	got = statusAfterRun(ts("2026-01-10T10:01:00Z"), fireManual, before, every5)
	if !got.Last.Equal(ts("2026-01-10T10:01:00Z")) || !got.Next.Equal(ts("2026-01-10T10:05:00Z")) {
		t.Errorf("manual: %+v", got)
	}
}

// TestRunSchedulesNoOverlapAndCatchUp runs a 1-second schedule whose
// function takes 1.1 s: runs never overlap, each starts right after the
// previous one ends (a single catch-up, not a backlog), and the sub-minute
// schedule turns the monitor off (ScheduleStatus null).
func TestRunSchedulesNoOverlapAndCatchUp(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{"SleepTimer": timerFn("* * * * * *", true)})
	var mu sync.Mutex
	var runs []*Result
	th := startHost(t, app, Options{Settings: map[string]string{"TEST_SLEEP_MS": "1100"}, OnResult: func(r *Result) {
		mu.Lock()
		runs = append(runs, r)
		mu.Unlock()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- th.RunSchedules(ctx) }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) >= 3 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("RunSchedules did not return\n%s", buf[:n])
	}
	mu.Lock()
	defer mu.Unlock()
	for i, r := range runs {
		if r.Err != nil {
			t.Fatalf("run %d: %v", i, r.Err)
		}
		if r.Logs[0] != "overlap=false" {
			t.Errorf("run %d overlapped another", i)
		}
		if !strings.Contains(string(r.Request), `"ScheduleStatus":null`) {
			t.Errorf("run %d: sub-minute schedule sent a ScheduleStatus: %s", i, r.Request)
		}
		if i == 0 {
			// The first run fires on a whole second.
			if ms := r.Start.Nanosecond() / 1e6; ms > 400 {
				t.Errorf("first run started %d ms after the second", ms)
			}
			continue
		}
		prev := runs[i-1]
		prevEnd, _ := strconv.ParseInt(strings.TrimPrefix(prev.Logs[2], "end="), 10, 64)
		start, _ := strconv.ParseInt(strings.TrimPrefix(r.Logs[1], "start="), 10, 64)
		if start < prevEnd {
			t.Errorf("run %d started before run %d ended", i, i-1)
		}
		if gap := time.Duration(start - prevEnd); gap > 500*time.Millisecond {
			t.Errorf("run %d started %v after the previous ended; want an immediate catch-up", i, gap)
		}
	}
}

// TestRunSchedulesPastDueAndRunOnStartup: a missed occurrence in the
// host's record fires at once with IsPastDue; runOnStartup fires at once
// without it; both then follow the schedule.
func TestRunSchedulesPastDueAndRunOnStartup(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{
		"EchoTimer":   timerFn("0 * * * * *", true),
		"EchoStartup": `{"bindings":[{"name":"timer","type":"timerTrigger","direction":"in","schedule":"0 0 0 1 1 *","runOnStartup":true}]}`,
		"EchoOff":     timerFn("0 * * * * *", true),
	})
	results := make(chan *Result, 8)
	th := startHost(t, app, Options{Settings: map[string]string{"AzureWebJobs.EchoOff.Disabled": "true"}, OnResult: func(r *Result) { results <- r }})
	last := time.Now().UTC().Truncate(time.Minute).Add(-3 * time.Minute)
	missed := last.Add(time.Minute)
	must(t, th.SetScheduleStatus("EchoTimer", functions.ScheduleStatus{Last: last, Next: missed, LastUpdated: last}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go th.RunSchedules(ctx)
	got := map[string]*Result{}
	for len(got) < 2 {
		select {
		case r := <-results:
			got[r.Function] = r
		case <-time.After(5 * time.Second):
			t.Fatalf("only %v fired", keys(got))
		}
	}
	due := got["EchoTimer"]
	if due.Err != nil || due.Timer == nil || !due.Timer.IsPastDue || !due.Timer.ScheduleStatus.Next.Equal(missed) || !due.Timer.ScheduleStatus.Last.Equal(last) {
		t.Errorf("past-due run: %+v %+v", due.Timer, due.Err)
	}
	if !strings.Contains(due.Reason, "Timer fired at") {
		t.Errorf("reason %q", due.Reason)
	}
	rec, _ := th.ScheduleStatus("EchoTimer")
	if rec.Last.Sub(due.Start).Abs() > 500*time.Millisecond || !rec.Next.Equal(due.Start.UTC().Truncate(time.Minute).Add(time.Minute)) {
		t.Errorf("record after the past-due run: %+v (start %v)", rec, due.Start)
	}
	startup := got["EchoStartup"]
	if startup.Err != nil || startup.Timer.IsPastDue || !startup.Timer.ScheduleStatus.FirstRun() {
		t.Errorf("runOnStartup run: %+v %v", startup.Timer, startup.Err)
	}
	if _, ok := got["EchoOff"]; ok {
		t.Error("disabled timer ran")
	}
}
