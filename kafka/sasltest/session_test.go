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
