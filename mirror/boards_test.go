package mirror_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// instanceMirror is a mirror of e's world named instance, with the Kafka
// control the boards need.
func (e *env) instanceMirror(instance string) *mirror.Mirror {
	e.t.Helper()
	return e.newMirrorWith(mirror.Options{Instance: instance}, nil, func(s *kafka.Source) mirror.Control { return s })
}

// TestRunBoardSharesRuns: a run one instance publishes is read by another
// by its id; an unknown or malformed id is no run.
func TestRunBoardSharesRuns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := mirror.NewRunBoard(e.instanceMirror("vm-a/1")), mirror.NewRunBoard(e.instanceMirror("vm-b/2"))
	st := mirror.CatchUpStatus{ID: "3f2a9c", State: mirror.CatchUpRunning, Started: time.Now(), Records: 42, Lag: 7}
	if err := a.Publish(ctx, st); err != nil {
		t.Fatal(err)
	}
	run, ok, err := b.Lookup(ctx, "3f2a9c")
	if err != nil || !ok || run.Instance != "vm-a/1" || run.Records != 42 || run.State != mirror.CatchUpRunning {
		t.Fatalf("Lookup: %+v %v %v", run, ok, err)
	}
	st.State, st.Lag = mirror.CatchUpCaughtUp, 0
	if err := a.Publish(ctx, st); err != nil {
		t.Fatal(err)
	}
	if run, _, _ := b.Lookup(ctx, "3f2a9c"); run.State != mirror.CatchUpCaughtUp {
		t.Errorf("after the run ended: %+v", run)
	}
	for _, id := range []string{"0123456789ab", "../x", "a b", ""} {
		if _, ok, err := b.Lookup(ctx, id); ok || err != nil {
			t.Errorf("Lookup(%q): ok %v, err %v", id, ok, err)
		}
	}
}

// TestInstanceBoardListsOthers: each instance reads the others' drains, not
// its own; a long history is cut to the newest drains, counted in More.
func TestInstanceBoardListsOthers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := mirror.NewInstanceBoard(e.instanceMirror("vm-a/1")), mirror.NewInstanceBoard(e.instanceMirror("vm-b/2"))
	var history []*mirror.Report
	for i := range 40 {
		history = append(history, &mirror.Report{Run: fmt.Sprintf("catch-up %04d with a long name to fill the record", i), Trigger: "catchup", Started: time.Now().Add(time.Duration(i) * time.Second), Records: int64(i)})
	}
	if err := a.Publish(ctx, nil, history); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, []mirror.RunningDrain{{Run: "timer", Started: time.Now(), Partitions: 20}}, nil); err != nil {
		t.Fatal(err)
	}
	others, err := a.Others(ctx)
	if err != nil || len(others) != 1 || others[0].Instance != "vm-b/2" || len(others[0].Running) != 1 {
		t.Fatalf("a's others: %+v %v", others, err)
	}
	others, err = b.Others(ctx)
	if err != nil || len(others) != 1 || others[0].Instance != "vm-a/1" {
		t.Fatalf("b's others: %+v %v", others, err)
	}
	last := others[0].LastDrains
	if len(last) == 0 || last[0].Records != 39 || len(last)+others[0].More != 40 {
		t.Errorf("a's drains as b reads them: %d kept, newest %+v, %d more; want the newest first and the rest counted", len(last), last[0], others[0].More)
	}
}
