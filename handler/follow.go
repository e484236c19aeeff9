package main

import (
	"time"

	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/functions/ncrontab"
	"github.com/ehmirror/ehmirror/mirror"
)

// Follow mode (MIRROR_FOLLOW): how a scheduled drain's follow window ends.
const (
	// followMargin is left between the end of an invocation's follow
	// window and the next tick, for the window's report and the
	// response, so the next invocation starts on time and adopts the
	// drain (mirror.HandoverGrace).
	followMargin = 500 * time.Millisecond
	// scheduledWithin: an invocation whose schedule occurrence (the
	// monitor's Next) is this close to now was fired by the schedule.
	scheduledWithin = time.Minute
)

// followUntil returns when the drain of a MirrorTimer invocation stops
// following, or the zero time for a drain that returns once caught up. Only
// invocations fired by the schedule follow: manual and past-due runs, and
// invocations without a schedule status (useMonitor false), drain and
// return. The window ends followMargin before the occurrence after the one
// that fired the run (the status's Next), evaluated in zone
// (WEBSITE_TIME_ZONE, where the host evaluates the schedule). The host's
// timer may fire a few milliseconds before that occurrence (TimerListener
// expects it: "If the trigger fired before it was officially scheduled"),
// so the next tick is never computed from now alone: from now it would be
// the occurrence that fired, and the window zero. The drain's
// MIRROR_MAX_DURATION bounds the window anyway.
func followUntil(follow bool, schedule string, zone *time.Location, timer functions.Timer, now time.Time) time.Time {
	st := timer.ScheduleStatus
	if !follow || st == nil || timer.IsPastDue {
		return time.Time{}
	}
	since := now.Sub(st.Next)
	if since < -time.Second || since > scheduledWithin {
		return time.Time{}
	}
	sched, err := ncrontab.Parse(schedule)
	if err != nil {
		return time.Time{}
	}
	return mirror.FollowUntil(now, nextTick(sched, zone, st.Next, now), followMargin, mirror.MinFollowWindow)
}

// nextTick is the schedule's first occurrence after both the occurrence
// that fired the run (fired; zero when unknown) and now, in zone (UTC when
// nil).
func nextTick(sched *ncrontab.Schedule, zone *time.Location, fired, now time.Time) time.Time {
	if zone == nil {
		zone = time.UTC
	}
	from := now
	if fired.After(now) {
		from = fired
	}
	return sched.Next(from.In(zone))
}
