package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// followRecord is one record of the follow tests, produced with its time.
func followRecord(p int32, i int) *kgo.Record {
	return &kgo.Record{Topic: "prod.test1", Partition: p, Key: []byte{byte(i)}, Value: []byte{byte(i), 1, 2, 3}, Timestamp: time.Now()}
}

// A following drain mirrors records produced after it caught up within
// moments (not at the next drain), commits while it follows, and returns
// at the end of its follow window, having committed everything.
func TestFollowMirrorsNewRecordsUntilTheWindowEnds(t *testing.T) {
	e := newEnv(t)
	m := e.newMirror(mirror.Options{})
	for i := range 10 {
		e.produce(followRecord(int32(i%4), i))
	}
	window := 3 * time.Second
	start := time.Now()
	type result struct {
		rep *mirror.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := m.Drain(context.Background(), "follow", mirror.Limits{MaxDuration: 30 * time.Second, FollowUntil: start.Add(window)})
		done <- result{rep, err}
	}()
	// The backlog arrives first; then records produced while it follows.
	waitEvents(t, e, 10, 2*time.Second)
	var lat []time.Duration
	for i := 10; i < 20; i++ {
		t0 := time.Now()
		e.produce(followRecord(int32(i%4), i))
		waitEvents(t, e, int64(i+1), time.Second)
		lat = append(lat, time.Since(t0))
	}
	// A commit happens while the drain follows.
	committedWhileFollowing := false
	for time.Since(start) < window-500*time.Millisecond && !committedWhileFollowing {
		lag, err := m.Lag(context.Background(), nil)
		committedWhileFollowing = err == nil && lag.Total == 0
		time.Sleep(100 * time.Millisecond)
	}
	if !committedWhileFollowing {
		t.Errorf("no commit covered the followed records while the drain was following")
	}
	r := <-done
	took := time.Since(start)
	if r.err != nil {
		t.Fatalf("drain: %v", r.err)
	}
	if r.rep.Stopped != mirror.StopFollowed || r.rep.Records != 20 || r.rep.LagAfter != 0 || len(r.rep.Errors) > 0 {
		t.Fatalf("report: stopped %q, records %d, lag %d, errors %v; want followed, 20, 0, none", r.rep.Stopped, r.rep.Records, r.rep.LagAfter, r.rep.Errors)
	}
	if took < window || took > window+2*time.Second {
		t.Errorf("the drain returned after %s; want the end of its %s window", took, window)
	}
	for _, l := range lat {
		if l > 700*time.Millisecond {
			t.Errorf("a record produced while following took %s to reach Event Hubs (all: %v)", l, lat)
			break
		}
	}
}

// Without FollowUntil a drain returns as soon as it is caught up.
func TestNoFollowReturnsWhenCaughtUp(t *testing.T) {
	e := newEnv(t)
	m := e.newMirror(mirror.Options{})
	e.produce(followRecord(0, 1))
	t0 := time.Now()
	rep := e.drain(m, mirror.Limits{})
	if rep.Stopped != mirror.StopCaughtUp || rep.Records != 1 {
		t.Fatalf("stopped %q with %d records; want caught up with 1", rep.Stopped, rep.Records)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("a drain without follow took %s", d)
	}
}

// A following drain ends early and commits when its caller cancels it
// (SIGTERM in the handler).
func TestFollowEndsOnCancel(t *testing.T) {
	e := newEnv(t)
	m := e.newMirror(mirror.Options{})
	e.produce(followRecord(1, 1), followRecord(2, 2))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	t0 := time.Now()
	rep, err := m.Drain(ctx, "follow", mirror.Limits{MaxDuration: 30 * time.Second, FollowUntil: time.Now().Add(20 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("canceled following drain returned after %s", d)
	}
	if rep.Stopped != mirror.StopCanceled || rep.Records != 2 || rep.LagAfter != 0 {
		t.Fatalf("stopped %q, records %d, lag %d; want canceled, 2, 0 (committed)", rep.Stopped, rep.Records, rep.LagAfter)
	}
}

func TestFollowUntil(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 10, 0, time.UTC)
	next := now.Add(50 * time.Second)
	if got := mirror.FollowUntil(now, next, 500*time.Millisecond, time.Second); !got.Equal(next.Add(-500 * time.Millisecond)) {
		t.Errorf("FollowUntil = %v, want %v", got, next.Add(-500*time.Millisecond))
	}
	if got := mirror.FollowUntil(now, now.Add(1200*time.Millisecond), 500*time.Millisecond, time.Second); !got.IsZero() {
		t.Errorf("FollowUntil with a 0.7 s window = %v, want zero (no follow)", got)
	}
}

func waitEvents(t *testing.T, e *env, n int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for e.emu.Stats().EventsStored < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events in Event Hubs after %s", e.emu.Stats().EventsStored, n, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
