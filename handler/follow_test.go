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
		want   time.Time
	}{
		{"scheduled", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick)}, next},
		{"follow off", false, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick)}, time.Time{}},
		{"manual (next occurrence ahead)", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick.Add(time.Minute))}, time.Time{}},
		{"past due", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick), IsPastDue: true}, time.Time{}},
		{"no schedule status", true, "0 */1 * * * *", functions.Timer{}, time.Time{}},
		{"stale status", true, "0 */1 * * * *", functions.Timer{ScheduleStatus: status(tick.Add(-time.Hour))}, time.Time{}},
		{"window too short", true, "*/1 * * * * *", functions.Timer{ScheduleStatus: status(tick)}, time.Time{}},
		{"every 10 s", true, "*/10 * * * * *", functions.Timer{ScheduleStatus: status(tick)}, tick.Add(10*time.Second - followMargin)},
	} {
		if got := followUntil(c.follow, c.sched, c.timer, now); !got.Equal(c.want) {
			t.Errorf("%s: followUntil = %v, want %v", c.name, got, c.want)
		}
	}
}
