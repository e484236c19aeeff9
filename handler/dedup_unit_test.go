package main

import (
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// TestLastDeduplication: /api/status shows the deduplication problem of the
// latest drain that had partitions, not of an idle one or an older one.
func TestLastDeduplication(t *testing.T) {
	t0 := time.Now()
	reps := []*mirror.Report{
		{Started: t0, Stopped: mirror.StopCaughtUp, Deduplication: "old"},
		{Started: t0.Add(2 * time.Second), Stopped: mirror.StopNothingToDo},
		{Started: t0.Add(time.Second), Stopped: mirror.StopCaughtUp, Deduplication: "MIRROR_DEDUPLICATE is on but the credentials lack the Listen right"},
	}
	if got := lastDeduplication(reps); got != reps[2].Deduplication {
		t.Errorf("got %q", got)
	}
	if got := lastDeduplication(nil); got != "" {
		t.Errorf("no drains: %q", got)
	}
}
