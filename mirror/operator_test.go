package mirror_test

// Issue 27, items 6 and 11: pause and resume act on running drains within
// seconds; offset resets reach parity with kafka-consumer-groups.sh
// (shift-by, by-duration, to-current, all topics) and every operator
// action selects topics the same way.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// TestPauseAndResumeActOnARunningDrain: a topic paused while a drain
// follows it stops being mirrored within seconds, its partitions are handed
// back (a reset of it is not refused as busy while the drain goes on with
// the other topic), and a resume mirrors its backlog at once, without
// waiting for the next tick.
func TestPauseAndResumeActOnARunningDrain(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	m := e.newMirrorWith(mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)}}, nil, withControl)
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	t.Cleanup(svc.Close)
	done := make(chan *mirror.Report, 1)
	go func() {
		rep, _ := svc.DrainFollowing(context.Background(), "follow", time.Now().Add(20*time.Second))
		done <- rep
	}()
	produce := func(topic, tag string, n int) {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: fmt.Appendf(nil, "%s%d", tag, i)})
		}
		e.produce(recs...)
	}
	produce(topic, "before", 20)
	waitFor(t, 10*time.Second, "the records before the pause mirrored", func() bool { return len(e.tally(topic, 4)) == 20 })

	if _, err := svc.SetPaused(context.Background(), mirror.TopicSelection{Names: []string{topic}}, true, "test", "maintenance"); err != nil {
		t.Fatal(err)
	}
	// Within a pause check (2 s) plus a commit the drain lets go of the
	// partitions: a reset of the paused topic is no longer refused.
	var res *mirror.ResetResult
	waitFor(t, 10*time.Second, "the paused partitions handed back", func() bool {
		var err error
		res, err = m.ResetOffsets(context.Background(), mirror.ResetRequest{Select: mirror.TopicSelection{Names: []string{topic}}, To: mirror.ResetToCurrent, Apply: true, By: "test"})
		if err != nil && !errors.Is(err, mirror.ErrBusy) {
			t.Fatal(err)
		}
		return err == nil
	})
	if res.Skipped != 0 || res.Resent != 0 {
		t.Fatalf("reset to current moved the position: %+v", res)
	}
	produce(topic, "paused", 10)
	produce("prod.test2", "other", 8)
	waitFor(t, 10*time.Second, "the other topic mirrored by the same drain", func() bool { return len(e.tally("prod.test2", 4)) == 8 })
	time.Sleep(2 * time.Second)
	if n := len(e.tally(topic, 4)); n != 20 {
		t.Fatalf("%d records in the hub while the topic is paused, want 20", n)
	}
	select {
	case rep := <-done:
		t.Fatalf("the following drain ended: %v", rep.Lines())
	default:
	}

	if _, err := svc.SetPaused(context.Background(), mirror.TopicSelection{Pattern: `prod\.test1`}, false, "test", ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the backlog mirrored after the resume", func() bool { return len(e.tally(topic, 4)) == 30 })
	rep := <-done
	for _, p := range rep.Partitions {
		if p.Error != "" {
			t.Fatalf("the following drain reported an error for a paused partition: %v", rep.Lines())
		}
	}
	for prov, n := range e.tally(topic, 4) {
		if n != 1 {
			t.Fatalf("%s mirrored %d times", prov, n)
		}
	}
}

// TestResetParity: shift-by, by-duration and to-current, over all topics
// selected by a regular expression.
func TestResetParity(t *testing.T) {
	e := newEnv(t)
	m := e.newMirrorWith(mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)}}, nil, withControl)
	for _, topic := range []string{"prod.test1", "prod.test2"} {
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i)})
		}
		e.produce(recs...)
	}
	e.drain(m, mirror.Limits{})
	all := mirror.TopicSelection{Pattern: ".*"}
	ctx := context.Background()

	res, err := m.ResetOffsets(ctx, mirror.ResetRequest{Select: all, Partitions: []int32{0}, To: mirror.ResetShiftBy, Shift: -4})
	if err != nil || len(res.Partitions) != 2 || res.Resent != 8 || res.Partitions[0].After != 6 {
		t.Fatalf("shift-by -4 over all topics: %+v %v", res, err)
	}
	res, err = m.ResetOffsets(ctx, mirror.ResetRequest{Select: all, Partitions: []int32{0}, To: mirror.ResetShiftBy, Shift: 100})
	if err != nil || res.Partitions[0].After != 10 || res.Skipped != 0 {
		t.Fatalf("shift-by past the end is clamped to it: %+v %v", res, err)
	}
	res, err = m.ResetOffsets(ctx, mirror.ResetRequest{Select: all, Partitions: []int32{0}, To: mirror.ResetByDuration, Duration: time.Hour})
	if err != nil || res.Partitions[0].After != 0 || res.Resent != 20 {
		t.Fatalf("by-duration 1h: %+v %v", res, err)
	}
	res, err = m.ResetOffsets(ctx, mirror.ResetRequest{Select: all, To: mirror.ResetToCurrent, Apply: true, By: "test"})
	if err != nil || res.Skipped != 0 || res.Resent != 0 || !res.Applied {
		t.Fatalf("to-current: %+v %v", res, err)
	}
	var ie *mirror.InputError
	if _, err := m.ResetOffsets(ctx, mirror.ResetRequest{Select: mirror.TopicSelection{Pattern: "nothing.*"}, To: mirror.ResetEarliest}); !errors.As(err, &ie) || ie.Field != "topics" {
		t.Fatalf("a pattern that matches nothing: %v", err)
	}
	if _, err := m.ResetOffsets(ctx, mirror.ResetRequest{Select: all, To: mirror.ResetShiftBy}); !errors.As(err, &ie) || ie.Field != "shift" {
		t.Fatalf("shift-by without a shift: %v", err)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAForgottenPauseIsAProblem: a topic paused for longer than
// MIRROR_MAX_PAUSE_AGE is a problem (the status is not ok), and the drain
// line carries the oldest pause's age for the alert.
func TestAForgottenPauseIsAProblem(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	lag := &mirror.LagReport{Paused: []mirror.Pause{
		{Topic: "prod.test2", Paused: true, By: "key default (bob)", At: now.Add(-time.Hour), Reason: "deploy"},
		{Topic: "prod.test1", Paused: true, By: "key default (ann)", At: now.Add(-30 * time.Hour), Reason: "maintenance"},
	}}
	p := mirror.PauseProblem(lag, 24*time.Hour, now)
	if p == nil || p.Kind != mirror.KindPausedLong || p.Topic != "prod.test1" || !strings.Contains(p.Message, "ann") {
		t.Fatalf("problem %+v", p)
	}
	if p := mirror.PauseProblem(lag, 0, now); p != nil {
		t.Fatalf("the check is off with 0: %+v", p)
	}
	if p := mirror.PauseProblem(lag, 48*time.Hour, now); p != nil {
		t.Fatalf("no pause is older than 48 h: %+v", p)
	}

	var buf strings.Builder
	rep := &mirror.Report{Run: "timer", Started: now, Paused: []string{"prod.test1"}, PausedSince: now.Add(-30 * time.Hour), Stopped: mirror.StopNothingToDo}
	mirror.LogReport(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), rep, mirror.TriggerTimer, time.Minute, false)
	if !strings.Contains(buf.String(), "paused_age_ms=108000000") {
		t.Fatalf("drain line: %s", buf.String())
	}
}

// TestResumeCatchUpKeepsTheConfiguredBound: the catch-up a resume starts is
// bounded by Options.CatchUpMaxDuration (MIRROR_CATCHUP_MAX_DURATION), not
// by a built-in ten minutes.
func TestResumeCatchUpKeepsTheConfiguredBound(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test1"
	m := e.newMirrorWith(mirror.Options{CatchUpMaxDuration: 3 * time.Minute}, nil, withControl)
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	t.Cleanup(svc.Close)
	sel := mirror.TopicSelection{Names: []string{topic}}
	if _, err := svc.SetPaused(context.Background(), sel, true, "test", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetPaused(context.Background(), sel, false, "test", ""); err != nil {
		t.Fatal(err)
	}
	runs := svc.CatchUps()
	if len(runs) != 1 {
		t.Fatalf("%d catch-ups after a resume, want 1: %+v", len(runs), runs)
	}
	if runs[0].MaxDuration != 3*time.Minute {
		t.Fatalf("the resume's catch-up is bounded by %s, want the configured 3m0s", runs[0].MaxDuration)
	}
}

// TestDrainFailsWhenEveryReadableTopicLacksItsHub: with one topic paused
// and the other routed to a hub that does not exist, the drain mirrors
// nothing and says so as a failure, not as "no partitions".
func TestDrainFailsWhenEveryReadableTopicLacksItsHub(t *testing.T) {
	e := newEnv(t)
	routes, err := mirror.ParseRoutes(`prod\.test2=>missing`)
	if err != nil {
		t.Fatal(err)
	}
	m := e.newMirrorWith(mirror.Options{Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)}, Routes: routes}, nil, withControl)
	if _, err := m.SetPaused(context.Background(), "prod.test1", true, "test", "maintenance"); err != nil {
		t.Fatal(err)
	}
	e.produce(&kgo.Record{Topic: "prod.test2", Partition: 0, Value: []byte("v")})
	rep, err := m.Drain(context.Background(), "lacking", mirror.Limits{MaxDuration: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.HubErrors) == 0 {
		t.Fatalf("no hub error for prod.test2 routed to a missing hub: %v", rep.Lines())
	}
	if rep.Stopped != mirror.StopFailed || !rep.Failed() {
		t.Fatalf("stopped %q (failed %v), want %q: %v", rep.Stopped, rep.Failed(), mirror.StopFailed, rep.Lines())
	}
}
