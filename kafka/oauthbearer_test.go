package kafka

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/sasl"

	"github.com/ehmirror/ehmirror/kafka/sasltest"
)

// fakeClock is a settable clock for tokenCache.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// TestTokenCacheRefreshesAhead: a token is reused in the first third of its
// life, refreshed in the background after that (the caller still gets the
// current token), and fetched synchronously once less than the margin is
// left.
func TestTokenCacheRefreshesAhead(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	var fetches atomic.Int64
	c := &tokenCache{now: clock.Now, fetch: func(context.Context) (Token, error) {
		n := fetches.Add(1)
		return Token{Value: "t" + string(rune('0'+n)), Expiry: clock.Now().Add(time.Hour)}, nil
	}}
	ctx := context.Background()
	get := func() string {
		tok, err := c.Token(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return tok.Value
	}
	if v := get(); v != "t1" || fetches.Load() != 1 {
		t.Fatalf("first token %s, %d fetches", v, fetches.Load())
	}
	clock.set(start.Add(15 * time.Minute))
	if v := get(); v != "t1" || fetches.Load() != 1 {
		t.Fatalf("in the first third: token %s, %d fetches; want t1 reused", v, fetches.Load())
	}
	clock.set(start.Add(25 * time.Minute))
	if v := get(); v != "t1" {
		t.Fatalf("after a third: token %s; want t1 while t2 is fetched in the background", v)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fetches.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for time.Now().Before(deadline) {
		if v := get(); v == "t2" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if v := get(); v != "t2" || fetches.Load() != 2 {
		t.Fatalf("after the background refresh: token %s, %d fetches", v, fetches.Load())
	}
	// t2 was fetched at 25 min and expires at 85 min: at 84 min less than
	// the margin (a tenth of its life, 6 min) is left: fetched synchronously.
	clock.set(start.Add(84 * time.Minute))
	if v := get(); v != "t3" || fetches.Load() != 3 {
		t.Fatalf("near expiry: token %s, %d fetches; want a synchronous fetch", v, fetches.Load())
	}
}

// TestOAuthInitialResponse: the client's first message is RFC 7628's, with
// the extensions, and the broker-side parser reads it back.
func TestOAuthInitialResponse(t *testing.T) {
	m, err := newOAuthMechanism(OAuthBearer{Tokens: staticTokens{Value: "header.eyJzdWIiOiJtaXJyb3IifQ.sig"}, Extensions: map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}}, &authState{})
	if err != nil {
		t.Fatal(err)
	}
	_, ir, err := m.Start(sasl.WithMetadata(context.Background(), &sasl.Metadata{Host: "b", Port: 9092}))
	if err != nil {
		t.Fatal(err)
	}
	want := "n,,\x01auth=Bearer header.eyJzdWIiOiJtaXJyb3IifQ.sig\x01identityPoolId=pool-2\x01logicalCluster=lkc-1\x01\x01"
	if string(ir) != want {
		t.Fatalf("initial response %q, want %q", ir, want)
	}
	tok, ext, err := sasltest.ParseOAuthBearer(ir)
	if err != nil || tok != "header.eyJzdWIiOiJtaXJyb3IifQ.sig" || ext["logicalCluster"] != "lkc-1" || ext["identityPoolId"] != "pool-2" {
		t.Fatalf("parsed %q %v %v", tok, ext, err)
	}
	if _, err := newOAuthMechanism(OAuthBearer{Tokens: staticTokens{}, Extensions: map[string]string{"auth": "x"}}, &authState{}); err == nil {
		t.Error("the reserved extension name auth was accepted")
	}
	if s := (SASL{Mechanism: SASLOAuthBearer, OAuth: &OAuthBearer{Principal: "p"}}).String(); strings.Contains(s, "header.") {
		t.Errorf("String shows the token: %s", s)
	}
}

type staticTokens Token

func (s staticTokens) Token(context.Context, string) (Token, error) { return Token(s), nil }

// TestFramesAcrossWrites: frame boundaries are found whatever the writes'
// sizes, so in-flight requests are counted right.
func TestFramesAcrossWrites(t *testing.T) {
	var stream []byte
	for _, n := range []int{0, 5, 300, 1} {
		stream = binary.BigEndian.AppendUint32(stream, uint32(n))
		stream = append(stream, make([]byte, n)...)
	}
	for _, chunk := range []int{1, 2, 3, 7, 64, len(stream)} {
		var f frames
		started, ended := 0, 0
		for i := 0; i < len(stream); i += chunk {
			s, e := f.feed(stream[i:min(i+chunk, len(stream))])
			started, ended = started+s, ended+e
			if started-ended < 0 || started-ended > 1 {
				t.Fatalf("chunk %d: %d started, %d ended at %d", chunk, started, ended, i)
			}
		}
		if started != 4 || ended != 4 || !f.atBoundary() {
			t.Errorf("chunk %d: %d started, %d ended, boundary %t; want 4, 4, true", chunk, started, ended, f.atBoundary())
		}
	}
}
