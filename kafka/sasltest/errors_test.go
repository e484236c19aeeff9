package sasltest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/kafka/sasltest"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestOAuthBearerRefusals: a wrong client secret, a scope that gives the
// wrong audience, a token endpoint that issues expired tokens, and a token
// endpoint that is down each fail the drain with one line naming the
// setting to fix; the source's Auth reports it; nothing is mirrored and
// nothing committed; the secret is in no error.
func TestOAuthBearerRefusals(t *testing.T) {
	e := newEnv(t, time.Minute, 0)
	if err := e.produce(300, 0); err != nil {
		t.Fatal(err)
	}
	reader, err := kafka.NewClientCredentialsTokens(kafka.ClientCredentials{TokenURL: e.issuer.TokenURL(), ClientID: "producer", ClientSecret: "producer-secret", Scopes: []string{audience + "/.default"}})
	if err != nil {
		t.Fatal(err)
	}
	readerToken, err := reader.Token(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, secret, scope, setting, says string
		before                             func()
	}{
		{name: "wrong-secret", secret: "not-the-secret", scope: audience + "/.default", setting: "CLIENT_SECRET", says: "invalid_client"},
		{name: "wrong-audience", secret: "mirror-secret", scope: "api://another-cluster/.default", setting: "SCOPE", says: "audience is api://another-cluster"},
		{name: "expired-token", secret: "mirror-secret", scope: audience + "/.default", setting: "TOKEN_ENDPOINT", says: "issued a token that expired",
			before: func() { e.issuer.IssueExpired(true) }},
		{name: "endpoint-down", secret: "mirror-secret", scope: audience + "/.default", setting: "TOKEN_ENDPOINT", says: "connection refused",
			before: func() { e.issuer.IssueExpired(false); e.issuer.Close() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.before != nil {
				c.before()
			}
			src := e.source(c.secret, c.scope)
			line := failedDrain(t, e, src, c.name)
			if !strings.Contains(line, c.setting+":") || !strings.Contains(line, c.says) || strings.Contains(line, "\n") {
				t.Errorf("drain error %q; want one line naming %s and saying %q", line, c.setting, c.says)
			}
			if strings.Contains(line, "mirror-secret") || strings.Contains(line, "not-the-secret") {
				t.Errorf("the client secret is in the error: %q", line)
			}
			a := src.Auth()
			if !strings.Contains(a.LastError, c.setting+":") || strings.Contains(a.LastError, "\n") {
				t.Errorf("Auth().LastError = %q; want one line naming %s", a.LastError, c.setting)
			}
			if n := e.emu.Stats().EventsStored; n != 0 {
				t.Errorf("%d events mirrored", n)
			}
			if committed := committedAny(t, e, readerToken); committed {
				t.Errorf("offsets committed")
			}
		})
	}
}

// failedDrain runs a drain with src that must fail, and returns its
// error line.
func failedDrain(t *testing.T, e *env, src *kafka.Source, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := e.mirror(src, false).Drain(ctx, name, mirror.Limits{MaxDuration: 10 * time.Second})
	line := ""
	switch {
	case err != nil:
		line = err.Error()
	case rep.Failed():
		line = strings.Join(rep.Errors, "; ")
	default:
		t.Fatalf("drain succeeded: %s", rep.Summary())
	}
	t.Logf("%s: %s", name, line)
	return line
}

// committedAny reads the group's offsets through a source that
// authenticates with a token taken before the issuer went down.
func committedAny(t *testing.T, e *env, tok kafka.Token) bool {
	t.Helper()
	tps := make([]mirror.TopicPartition, partitions)
	for p := range tps {
		tps[p] = mirror.TopicPartition{Topic: topic, Partition: int32(p)}
	}
	src, err := kafka.NewSource(kafka.Options{
		Brokers: e.cluster.ListenAddrs(), Group: "mirror",
		SASL: kafka.SASL{Mechanism: kafka.SASLOAuthBearer, OAuth: &kafka.OAuthBearer{
			Tokens:     staticToken(tok),
			Extensions: map[string]string{"logicalCluster": logicalCluster, "identityPoolId": identityPool},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := src.Committed(ctx, tps)
	if err != nil {
		t.Fatalf("reading committed offsets: %v", err)
	}
	for _, o := range got {
		if o >= 0 {
			return true
		}
	}
	return false
}

// staticToken is a kafka.TokenSource that always returns the same token.
type staticToken kafka.Token

func (s staticToken) Token(context.Context, string) (kafka.Token, error) { return kafka.Token(s), nil }

// TestOAuthBearerRefusalsNameTheCandidates: the broker says only
// invalid_token for a token signed by a key it does not trust (another
// issuer, the audience exactly right): the error lists the candidates
// (audience, issuer and signing key, expiry and clock skew) with what the
// token carried, instead of blaming the scope. Missing SASL extensions
// (refused by Kafka with an error code and message) name
// EXTENSIONS, in the drain's error and in Auth().LastError.
func TestOAuthBearerRefusalsNameTheCandidates(t *testing.T) {
	e := newEnv(t, time.Minute, 0)
	if err := e.produce(30, 0); err != nil {
		t.Fatal(err)
	}
	other, err := sasltest.NewIssuer(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	other.AddClient("mirror", "mirror-secret")
	untrusted, err := kafka.NewClientCredentialsTokens(kafka.ClientCredentials{TokenURL: other.TokenURL(), ClientID: "mirror", ClientSecret: "mirror-secret",
		Scopes: []string{audience + "/.default"}, Names: testNames})
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := kafka.NewClientCredentialsTokens(kafka.ClientCredentials{TokenURL: e.issuer.TokenURL(), ClientID: "mirror", ClientSecret: "mirror-secret",
		Scopes: []string{audience + "/.default"}, Names: testNames})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		src  *kafka.Source
		want []string
	}{
		{"untrusted-key", e.sourceWith(untrusted, "mirror"), []string{"invalid_token", "audience is " + audience, "SCOPE:",
			"issuer is " + other.URL(), "signed with key k1", "TOKEN_ENDPOINT:", "expiry is ", "clock skew"}},
		{"missing-extensions", e.sourceSASL(kafka.SASL{Mechanism: kafka.SASLOAuthBearer, OAuth: &kafka.OAuthBearer{Tokens: trusted, Names: testNames}}),
			[]string{"EXTENSIONS:", "extensions are invalid", "logicalCluster", "sent: none"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			line := failedDrain(t, e, c.src, c.name)
			last := c.src.Auth().LastError
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("drain error %q does not say %q", line, w)
				}
				if !strings.Contains(last, w) {
					t.Errorf("Auth().LastError %q does not say %q", last, w)
				}
			}
			if strings.Contains(line, "\n") || strings.Contains(line, "mirror-secret") {
				t.Errorf("drain error %q: want one line without the secret", line)
			}
		})
	}
}
