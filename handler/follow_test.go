package main

import (
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

func TestFollowUntil(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 0, 20_000_000, time.UTC) // 20 ms after the tick
	tick := now.Truncate(time.Minute)
	next := tick.Add(time.Minute).Add(-followMargin)
	status := func(next time.Time) *functions.ScheduleStatus { return &functions.ScheduleStatus{Next: next} }
	for _, c := range []struct {
		name   string
		follow bool
		sched  string
		timer  functions.Timer
		now    time.Time
		want   time.Time
	}{
		{"scheduled", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick)}, now, next},
		// The host's timer fires early (TimerListener.cs: "If the trigger
		// fired before it was officially scheduled"): the window still
		// runs to the following tick (issue 49, item 4).
		{"fired 5 ms early", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick)}, tick.Add(-5 * time.Millisecond), next},
		{"fired 5 ms early, every 10 s", true, "*/10 * * * * *", functions.Timer{ScheduleStatus: status(tick)}, tick.Add(-5 * time.Millisecond), tick.Add(10*time.Second - followMargin)},
		{"follow off", false, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick)}, now, time.Time{}},
		{"manual (next occurrence ahead)", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick.Add(time.Minute))}, now, time.Time{}},
		{"past due", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick), IsPastDue: true}, now, time.Time{}},
		{"no schedule status", true, "0 */1 * * * *", functions.Timer{}, now, time.Time{}},
		{"stale status", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick.Add(-time.Hour))}, now, time.Time{}},
		{"window too short", true, "*/1 * * * * *", functions.Timer{ScheduleStatus: status(tick)}, now, time.Time{}},
		{"every 10 s", true, "*/10 * * * * *", functions.Timer{ScheduleStatus: status(tick)}, now, tick.Add(10*time.Second - followMargin)},
	} {
		if got := followUntil(c.follow, c.sched, time.UTC, c.timer, c.now); !got.Equal(c.want) {
			t.Errorf("%s: followUntil = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFollowUntilHonoursTimeZone: the host evaluates the schedule in
// WEBSITE_TIME_ZONE (TimerListener uses the machine's local time, which
// WEBSITE_TIME_ZONE sets on Linux), so a daily 09:00 schedule's next tick
// is 09:00 in Berlin, not 09:00 UTC.
func TestFollowUntilHonoursTimeZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// Hourly from 09:00 to 17:00 Berlin time, fired at 17:00 Berlin
	// (16:00 UTC): the next tick is 09:00 Berlin the next morning; in UTC
	// the rule would give 17:00 UTC, an hour after the last Berlin tick.
	tick := time.Date(2026, 12, 3, 17, 0, 0, 0, berlin)
	now := tick.Add(20 * time.Millisecond)
	timer := functions.Timer{ScheduleStatus: &functions.ScheduleStatus{Next: tick}}
	got := followUntil(true, "0 0 9-17 * * *", berlin, timer, now)
	want := time.Date(2026, 12, 4, 9, 0, 0, 0, berlin).Add(-followMargin)
	if !got.Equal(want) {
		t.Errorf("followUntil in Europe/Berlin = %v, want %v (in UTC it would be %v)", got, want,
			followUntil(true, "0 0 9-17 * * *", time.UTC, timer, now))
	}
}
