package sasltest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// entraEnv points azidentity's managed identity credential at the local
// issuer's App Service identity endpoint (IDENTITY_ENDPOINT and
// IDENTITY_HEADER, what App Service and Functions set).
func entraTokens(t *testing.T, e *env, scope string) kafka.TokenSource {
	t.Helper()
	t.Setenv("IDENTITY_ENDPOINT", e.issuer.IdentityEndpoint())
	t.Setenv("IDENTITY_HEADER", e.issuer.IdentityHeader())
	cred, err := azidentity.NewManagedIdentityCredential(nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := kafka.NewEntraTokens(kafka.EntraTokens{Credential: cred, Scope: scope, Names: testNames})
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// TestEntraIDMirror: OAUTHBEARER with tokens of the app's managed identity
// from azidentity, requested for the default scope https://<broker
// host>/.default (the broker here only accepts that audience), mirrors
// every record while 3 s tokens and 1 s sessions expire; status shows the
// identity's client id and the token's expiry. An explicit scope for
// another audience is refused with a line naming the scope setting.
func TestEntraIDMirror(t *testing.T) {
	e := newEnvFor(t, 3*time.Second, time.Second, "https://127.0.0.1")
	const n = 6000
	produced, prodErr := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(produced)
		prodErr <- e.produce(n, 4*time.Second)
	}()
	src := e.sourceWith(entraTokens(t, e, ""), "managed identity")
	m := e.mirror(src, false)
	drains := e.drainAll(m, produced, 2*time.Second, 2*time.Minute)
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	lost, dups, order := e.check(n)
	st := e.front.Stats()
	tokens := e.issuer.IssuedTo(e.issuer.ManagedIdentityClientID())
	t.Logf("%d records over %d drains; %d tokens from the managed identity endpoint; %d authentications, %d re-authentications, %d refused; principals %v; lost %d, duplicates %d, order violations %d",
		n, drains, tokens, st.Authenticated, st.Reauthenticated, st.Refused, st.Principals, lost, dups, order)
	if lost != 0 || order != 0 || dups != 0 {
		t.Errorf("lost %d, duplicates %d, order violations %d; want 0", lost, dups, order)
	}
	if tokens < 2 || st.Reauthenticated < 3 || st.Refused != 0 {
		t.Errorf("%d tokens, %d re-authentications, %d refused (%s); want tokens refreshed, sessions renewed, none refused", tokens, st.Reauthenticated, st.Refused, st.LastRefusal)
	}
	a := src.Auth()
	if a.Mechanism != "OAUTHBEARER" || a.Principal != e.issuer.ManagedIdentityClientID() || a.TokenExpiry.IsZero() || a.LastError != "" {
		t.Errorf("Auth() = %+v; want OAUTHBEARER for the managed identity's client id with a token expiry", a)
	}

	wrong := e.sourceWith(entraTokens(t, e, "https://other.servicebus.windows.net/.default"), "managed identity")
	rep, err := e.mirror(wrong, false).Drain(context.Background(), "wrong-scope", mirror.Limits{MaxDuration: 10 * time.Second})
	line := ""
	if err != nil {
		line = err.Error()
	} else {
		line = strings.Join(rep.Errors, "; ")
	}
	if !strings.Contains(line, "SCOPE:") || !strings.Contains(line, "audience is https://other.servicebus.windows.net") {
		t.Errorf("drain with the wrong scope: %q; want a line naming the scope and the token's audience", line)
	}
}
