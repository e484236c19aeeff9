package sasltest_test

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// records is how many records the end-to-end test mirrors: 100,000
// (30,000 under the race detector), or SASLTEST_RECORDS; rounded down to a
// multiple of the partition count.
func records(t *testing.T) int {
	n := 100000
	if raceDetector {
		n = 30000
	}
	if v := os.Getenv("SASLTEST_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SASLTEST_RECORDS: %v", err)
		}
	}
	return n - n%partitions
}

// TestOAuthBearerMirrorAcrossSessionExpiries mirrors over OAUTHBEARER with
// client credentials while tokens live 2 s and the broker ends every
// session after 1 s, while a producer writes for 10 s (connections.max.reauth.ms; kafka-go does not
// re-authenticate, so the broker closes its connections): every drain
// succeeds, and every record arrives once, in order, across many token and
// session expiries.
func TestOAuthBearerMirrorAcrossSessionExpiries(t *testing.T) {
	for _, dedup := range []bool{false, true} {
		t.Run("dedup="+strconv.FormatBool(dedup), func(t *testing.T) {
			n := records(t)
			e := newEnv(t, 2*time.Second, time.Second)
			produced, prodErr := make(chan struct{}), make(chan error, 1)
			go func() {
				defer close(produced)
				prodErr <- e.produce(n, 10*time.Second)
			}()
			src := e.source("mirror-secret", audience+"/.default")
			m := e.mirror(src, dedup)
			start := time.Now()
			drains := e.drainAll(m, produced, 3*time.Second, 3*time.Minute)
			took := time.Since(start)
			if err := <-prodErr; err != nil {
				t.Fatal(err)
			}
			lost, dups, order := e.check(n)
			st := e.front.Stats()
			tokens := e.issuer.IssuedTo("mirror")
			t.Logf("%d records in %v over %d drains; %d tokens issued to the mirror, %d authentications of which %d re-authentications, %d sessions ended by the broker, %d refused; lost %d, duplicates %d, order violations %d",
				n, took.Round(time.Millisecond), drains, tokens, st.Authenticated, st.Reauthenticated, st.Expired, st.Refused, lost, dups, order)
			if lost != 0 || order != 0 {
				t.Errorf("lost %d, order violations %d; want 0", lost, order)
			}
			if dedup && dups != 0 {
				t.Errorf("%d duplicates with deduplication on; want 0", dups)
			}
			if st.Reauthenticated+st.Expired < 10 || tokens < 10 {
				t.Errorf("%d sessions renewed or ended and %d tokens issued; want at least 10 each (the test must cross many expiries)", st.Reauthenticated+st.Expired, tokens)
			}
			if st.Refused != 0 {
				t.Errorf("%d authentications refused: %s", st.Refused, st.LastRefusal)
			}
			a := src.Auth()
			if a.Mechanism != "OAUTHBEARER" || a.Principal != "mirror" || a.TokenExpiry.IsZero() || a.LastError != "" {
				t.Errorf("Auth() = %+v; want OAUTHBEARER, principal mirror, a token expiry, no error", a)
			}
		})
	}
}
