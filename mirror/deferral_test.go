package mirror

import (
	"testing"
	"time"
)

// lagOf is a lag report of one topic's partitions, each given as
// committed and end offsets.
func lagOf(parts ...[2]int64) *LagReport {
	rep := &LagReport{}
	for i, p := range parts {
		rep.Partitions = append(rep.Partitions, PartitionLag{Topic: "t", Partition: int32(i), Committed: p[0], End: p[1], Lag: p[1] - p[0]})
	}
	return rep
}

// The deferral's decision at the end of a window, for the drains of other
// instances seen through the group's lag: it goes on deferring to drains
// that bring the lag down or keep up with production (a lag that never
// reaches 0 while records arrive), and stops for a member that mirrors
// nothing or drains falling behind.
func TestDeferralJudgesProgressOverAWindow(t *testing.T) {
	t0 := time.Now()
	start := lagOf([2]int64{100, 150}, [2]int64{200, 260})
	for _, tc := range []struct {
		name      string
		end       *LagReport
		deferring bool
	}{
		{"stalled: nothing committed", lagOf([2]int64{100, 170}, [2]int64{200, 290}), false},
		{"falling behind: commits short of the ends", lagOf([2]int64{140, 250}, [2]int64{250, 360}), false},
		{"keeping up: the lag stays, the commits passed the ends", lagOf([2]int64{150, 210}, [2]int64{260, 310}), true},
		{"catching up: the lag falls", lagOf([2]int64{120, 150}, [2]int64{230, 260}), true},
		{"unknown lag", nil, false},
	} {
		d := newDeferral(time.Minute, 100*time.Millisecond)
		if !d.observe(t0, start) || !d.observe(t0.Add(d.window/2), tc.end) {
			t.Fatalf("%s: stopped deferring within the window", tc.name)
		}
		if got := d.observe(t0.Add(d.window), tc.end); got != tc.deferring {
			t.Errorf("%s: deferring %v at the window's end, want %v", tc.name, got, tc.deferring)
		}
	}
	// A partition paused since the window's start is left out.
	d := newDeferral(time.Minute, 100*time.Millisecond)
	d.observe(t0, start)
	end := lagOf([2]int64{150, 300}, [2]int64{200, 290})
	end.Partitions[1].Paused = true
	if !d.observe(t0.Add(d.window), end) {
		t.Error("a paused partition kept the others' progress from counting")
	}
	// The window: CatchUpDeferWindow, half a shorter catch-up, never less
	// than two commits.
	for _, tc := range []struct{ maxDuration, commit, want time.Duration }{
		{10 * time.Minute, time.Second, CatchUpDeferWindow},
		{8 * time.Second, time.Second, 4 * time.Second},
		{2 * time.Second, time.Second, 2 * time.Second},
	} {
		if got := newDeferral(tc.maxDuration, tc.commit).window; got != tc.want {
			t.Errorf("window of a %s catch-up committing every %s: %s, want %s", tc.maxDuration, tc.commit, got, tc.want)
		}
	}
}
