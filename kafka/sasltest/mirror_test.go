package sasltest_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/kafka/sasltest"
	"github.com/ehmirror/ehmirror/mirror"
)

const (
	topic      = "prod.sasl"
	partitions = 3
	audience   = "api://kafka-test"
	// Confluent Cloud style extensions the broker requires.
	logicalCluster = "lkc-test1"
	identityPool   = "pool-test1"
)

// testLogger logs to stderr when SASLTEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("SASLTEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// env is a kfake cluster behind an OAUTHBEARER front, a local OIDC issuer
// and an Event Hubs emulator.
type env struct {
	t       *testing.T
	issuer  *sasltest.Issuer
	front   *sasltest.Front
	cluster *kfake.Cluster
	emu     *emulator.Server
	// aud is the audience the broker accepts.
	aud string
	// producer authenticates the test producer; nil: OAUTHBEARER with
	// client "producer".
	producer kgosasl.Mechanism
}

func newEnv(t *testing.T, tokenLifetime, sessionLifetime time.Duration) *env {
	return newEnvFor(t, tokenLifetime, sessionLifetime, audience)
}

// newEnvFor is newEnv with a broker that wants tokens for aud.
func newEnvFor(t *testing.T, tokenLifetime, sessionLifetime time.Duration, aud string) *env {
	t.Helper()
	is, err := sasltest.NewIssuer(tokenLifetime)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(is.Close)
	is.AddClient("mirror", "mirror-secret")
	is.AddClient("producer", "producer-secret")
	front := &sasltest.Front{
		Verifier: &sasltest.OAuthVerifier{
			JWKSURL: is.JWKSURL(), Issuer: is.URL(), Audience: aud,
			Extensions: map[string]string{"logicalCluster": logicalCluster, "identityPoolId": identityPool},
		},
		SessionLifetime: sessionLifetime,
	}
	e := startEnv(t, front)
	e.issuer, e.aud = is, aud
	return e
}

// startEnv starts kfake behind front, and the emulator.
func startEnv(t *testing.T, front *sasltest.Front) *env {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic), kfake.ListenFn(front.Listen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	emu, err := emulator.Start(context.Background(), emulator.Config{
		Listen: "127.0.0.1:0",
		Hubs:   []emulator.HubConfig{{Name: topic, PartitionCount: partitions}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	return &env{t: t, front: front, cluster: c, emu: emu}
}

// produce writes n records of 100 bytes round-robin over the partitions,
// spread evenly over the given time, authenticating with its own client and
// re-authenticating (franz-go does KIP-368) as sessions expire. It returns
// the first error.
func (e *env) produce(n int, over time.Duration) error {
	mech := e.producer
	if mech == nil {
		cc := clientcredentials.Config{ClientID: "producer", ClientSecret: "producer-secret", TokenURL: e.issuer.TokenURL(), Scopes: []string{e.aud + "/.default"}}
		mech = oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			tok, err := cc.Token(ctx)
			if err != nil {
				return oauth.Auth{}, err
			}
			return oauth.Auth{Token: tok.AccessToken, Extensions: map[string]string{"logicalCluster": logicalCluster, "identityPoolId": identityPool}}, nil
		})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.SASL(mech), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), over+60*time.Second)
	defer cancel()
	const chunk = 500
	start := time.Now()
	for done := 0; done < n; done += chunk {
		time.Sleep(time.Until(start.Add(over * time.Duration(done) / time.Duration(n))))
		rs := make([]*kgo.Record, min(chunk, n-done))
		for i := range rs {
			k := done + i
			rs[i] = &kgo.Record{Topic: topic, Partition: int32(k % partitions), Key: []byte(strconv.Itoa(k)), Value: fmt.Appendf(nil, "%-100d", k)}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	return nil
}

// sourceSASL is the mirror's Kafka source with sasl.
func (e *env) sourceSASL(sasl kafka.SASL) *kafka.Source {
	e.t.Helper()
	src, err := kafka.NewSource(kafka.Options{Brokers: e.cluster.ListenAddrs(), Group: "mirror", SASL: sasl, Logger: testLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = src.Close() })
	return src
}

// source is the mirror's Kafka source with client credentials OAUTHBEARER.
func (e *env) source(secret, scope string) *kafka.Source {
	e.t.Helper()
	tokens, err := kafka.NewClientCredentialsTokens(kafka.ClientCredentials{
		TokenURL: e.issuer.TokenURL(), ClientID: "mirror", ClientSecret: secret, Scopes: []string{scope},
		Names: testNames,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.sourceWith(tokens, "mirror")
}

// sourceWith is the mirror's Kafka source with OAUTHBEARER tokens from
// tokens.
func (e *env) sourceWith(tokens kafka.TokenSource, principal string) *kafka.Source {
	e.t.Helper()
	src, err := kafka.NewSource(kafka.Options{
		Brokers: e.cluster.ListenAddrs(),
		Group:   "mirror",
		SASL: kafka.SASL{Mechanism: kafka.SASLOAuthBearer, OAuth: &kafka.OAuthBearer{
			Tokens: tokens, Principal: principal, Names: testNames,
			Extensions: map[string]string{"logicalCluster": logicalCluster, "identityPoolId": identityPool},
		}},
		Logger: testLogger(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = src.Close() })
	return src
}

var testNames = kafka.OAuthSettings{TokenEndpoint: "TOKEN_ENDPOINT", ClientID: "CLIENT_ID", ClientSecret: "CLIENT_SECRET", Scope: "SCOPE", Extensions: "EXTENSIONS"}

func (e *env) mirror(src *kafka.Source, dedup bool) *mirror.Mirror {
	e.t.Helper()
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: e.emu.ConnectionString(), Logger: testLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sink.Close(ctx)
	})
	m, err := mirror.New(src, sink, mirror.Options{
		Topics:         mirror.TopicFilter{},
		Partitioning:   mirror.PartitionPreserve,
		CommitInterval: 200 * time.Millisecond,
		Deduplicate:    dedup,
		Logger:         testLogger(),
		Control:        src,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// check reads every event back and counts, per Kafka partition, offsets
// never mirrored (lost), mirrored more than once (duplicates), and events
// whose offset is below the highest one before it in the same hub partition
// (order violations; PartitionPreserve keeps a Kafka partition on one hub
// partition).
func (e *env) check(n int) (lost, dups, order int) {
	perPartition := n / partitions
	for p := range partitions {
		seen := map[int64]int{}
		high := int64(-1)
		for _, ev := range e.emu.Events(topic, p) {
			if ev.Properties[mirror.PropPartition] != int64(p) {
				e.t.Errorf("hub partition %d holds an event of Kafka partition %v", p, ev.Properties[mirror.PropPartition])
			}
			off, _ := ev.Properties[mirror.PropOffset].(int64)
			if want := fmt.Sprintf("%-100d", int(off)*partitions+p); string(ev.Body) != want {
				e.t.Errorf("partition %d offset %d: body %.20q, want %.20q", p, off, ev.Body, want)
			}
			seen[off]++
			if off < high && seen[off] == 1 {
				order++
			}
			high = max(high, off)
		}
		for o := range int64(perPartition) {
			switch c := seen[o]; {
			case c == 0:
				lost++
			case c > 1:
				dups += c - 1
			}
		}
	}
	return lost, dups, order
}

// drainAll runs drains that follow their partitions for up to follow each,
// until produced is closed and a drain caught up; every drain must succeed.
func (e *env) drainAll(m *mirror.Mirror, produced <-chan struct{}, follow, deadline time.Duration) (drains int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for ctx.Err() == nil {
		drains++
		done := false
		select {
		case <-produced:
			done = true
		default:
		}
		rep, err := m.Drain(ctx, fmt.Sprintf("drain-%d", drains), mirror.Limits{MaxDuration: 20 * time.Second, FollowUntil: time.Now().Add(follow)})
		if err != nil {
			e.t.Fatalf("drain %d: %v", drains, err)
		}
		e.t.Logf("drain %d: %s", drains, rep.Summary())
		if rep.Failed() {
			e.t.Errorf("drain %d failed: %v", drains, rep.Lines())
		}
		if done && rep.CaughtUp() && rep.LagAfter == 0 && rep.Stopped != mirror.StopNothingToDo {
			return drains
		}
	}
	e.t.Fatalf("not caught up after %v", deadline)
	return drains
}
