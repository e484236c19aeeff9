package sasltest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// TestPooledConnectionPastItsSessionIsRedialed: behind a front that
// enforces the session on every request (a re-authentication begun after
// the session's end closes the connection, as some brokers and proxies
// do), drains that reuse pooled connections idle past their session
// succeed: such a connection is replaced by a freshly dialed one, never
// re-authenticated late, so the front closes none.
func TestPooledConnectionPastItsSessionIsRedialed(t *testing.T) {
	e := newEnv(t, time.Minute, 1500*time.Millisecond)
	e.front.EnforceSession = true
	src := e.source("mirror-secret", audience+"/.default")
	m := e.mirror(src, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 3 {
		if err := e.produce(30, 0); err != nil {
			t.Fatal(err)
		}
		rep, err := m.Drain(ctx, fmt.Sprintf("drain-%d", i), mirror.Limits{MaxDuration: 10 * time.Second})
		if err != nil || rep.Failed() {
			t.Fatalf("drain %d: %v %v", i, err, rep.Lines())
		}
		st := e.front.Stats()
		t.Logf("drain %d: %s; front: %d authentications, %d re-authentications, %d connections closed at the session's end", i, rep.Summary(), st.Authenticated, st.Reauthenticated, st.Expired)
		if st.Expired != 0 {
			t.Fatalf("drain %d: the front closed %d connection(s) used after their session's end", i, st.Expired)
		}
		time.Sleep(2 * time.Second) // every pooled connection's session ends
	}
	if n := e.emu.Stats().EventsStored; n != 90 {
		t.Errorf("%d events mirrored, want 90", n)
	}
}

// TestTokenEndpointOutageEndsNoDrain: tokens live 6 s (the broker's
// sessions end with them) and the token endpoint is down for 1.5 s while
// a following drain runs, right when the connections re-authenticate: a
// re-authentication that gets no token keeps the connection's session
// and tries again, so the drain is not ended by the outage, reports no
// error, and nothing Event Hubs acknowledged is sent again (0 duplicates
// without deduplication, 0 lost).
func TestTokenEndpointOutageEndsNoDrain(t *testing.T) {
	e := newEnv(t, 6*time.Second, 0)
	const n = 3000
	produced, prodErr := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(produced)
		prodErr <- e.produce(n, 12*time.Second)
	}()
	src := e.source("mirror-secret", audience+"/.default")
	m := e.mirror(src, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	outage := time.AfterFunc(4*time.Second, func() {
		e.issuer.Down(true)
		time.AfterFunc(1500*time.Millisecond, func() { e.issuer.Down(false) })
	})
	defer outage.Stop()
	rep, err := m.Drain(ctx, "outage", mirror.Limits{MaxDuration: 40 * time.Second, FollowUntil: start.Add(14 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; ended after %v", rep.Summary(), time.Since(start).Round(time.Millisecond))
	if rep.Failed() || len(rep.Errors) > 0 || rep.Stopped == mirror.StopRebalanced || time.Since(start) < 13*time.Second {
		t.Fatalf("the token endpoint's outage ended the drain or failed it: stopped %q, errors %v", rep.Stopped, rep.Errors)
	}
	<-produced
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	e.drainAll(m, produced, 0, time.Minute)
	lost, dups, order := e.check(n)
	st := e.front.Stats()
	t.Logf("front: %d authentications, %d re-authentications, %d sessions ended, %d refused; lost %d, duplicates %d, order %d", st.Authenticated, st.Reauthenticated, st.Expired, st.Refused, lost, dups, order)
	if lost != 0 || dups != 0 || order != 0 {
		t.Errorf("lost %d, re-sent %d, order violations %d; want 0", lost, dups, order)
	}
}
