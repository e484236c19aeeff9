package kafka

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/internal/testpki"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestMutualTLS runs kfake with TLS that requires and verifies client
// certificates (ssl.client.auth=required), together with SASL/SCRAM. With
// the right certificate (presented the way the handler does, through
// config.ClientCert) every call works; with no certificate, one from another
// CA, or an expired one, every call fails, and the topic listing and
// the group join with one line that says the certificate was refused.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	const user, pass = "mirror", "mtls-pw-not-in-errors"
	serverCA, clientCA, otherCA := testpki.NewCA(t, "broker CA"), testpki.NewCA(t, "client CA"), testpki.NewCA(t, "another CA")
	c := newCluster(t,
		kfake.TLS(testpki.BrokerTLS(serverCA.Server(t), clientCA)),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", user, pass))
	addrs := c.ListenAddrs()
	good := clientCA.Client(t, "mirror")
	produceN(t, newProducer(t, addrs,
		kgo.DialTLSConfig(&tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{good.TLS}, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())), "prod.test1", 0, 5)

	clientTLS := func(cert *testpki.Cert) *tls.Config {
		cfg := &tls.Config{RootCAs: serverCA.Pool(), MinVersion: tls.VersionTLS12}
		if cert != nil {
			cc, err := config.ParseClientCertificate(string(cert.CertPEM), string(cert.KeyPEM), "", time.Now(), config.SettingNames)
			if err != nil {
				t.Fatal(err)
			}
			cc.Apply(cfg)
		}
		return cfg
	}
	withTLS := func(cfg *tls.Config) func(*Options) {
		return func(o *Options) {
			o.TLS = cfg
			o.SASL = SASL{Mechanism: "scram-sha-512", Username: user, Password: pass}
			o.DialTimeout = 2 * time.Second
		}
	}
	ctx := ctxT(t, 30*time.Second)
	tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 0}

	s := newTestSource(t, addrs, "g-mtls", withTLS(clientTLS(good)))
	if _, err := s.Topics(ctx); err != nil {
		t.Fatalf("topics: %v", err)
	}
	if f, err := s.Fetch(ctx, tp, 0, 0); err != nil || len(f.Records) != 5 {
		t.Fatalf("fetch: %v", err)
	}
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{tp: 5}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Committed(ctx, []mirror.TopicPartition{tp}); err != nil || got[tp] != 5 {
		t.Fatalf("committed: %v %v", got, err)
	}

	// An expired certificate the client would still send (config refuses
	// to load it; this is what the broker says).
	expired := clientCA.ClientValid(t, "mirror", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour), nil)
	rawExpired := &tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{expired.TLS}, MinVersion: tls.VersionTLS12}
	for _, bad := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"no certificate", clientTLS(nil)},
		{"another CA", clientTLS(otherCA.Client(t, "mirror"))},
		{"expired", rawExpired},
	} {
		s := newTestSource(t, addrs, "g-mtls", withTLS(bad.cfg))
		start := time.Now()
		// A drain lists the topics first, and a Claim joins the group;
		// both dial their own connections and say why the broker refused.
		// (Calls through kafka-go's Transport, Fetch for one, fail too, but
		// kafka-go reports a failed metadata load as "topic not found".)
		_, terr := s.Topics(ctx)
		_, cerr := s.Claim(ctx, testTopics)
		if _, err := s.Fetch(ctx, tp, 0, 0); err == nil {
			t.Fatalf("%s: fetch succeeded", bad.name)
		}
		for i, err := range []error{terr, cerr} {
			if err == nil {
				t.Fatalf("%s: call %d succeeded", bad.name, i)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, "certificate") || strings.Contains(msg, pass) || (i == 0 && !strings.Contains(msg, "refused this client")) {
				t.Errorf("%s: call %d: %q, want one line about the certificate", bad.name, i, msg)
			}
		}
		t.Logf("%s: calls failed in %v; e.g. %v", bad.name, time.Since(start).Round(time.Millisecond), cerr)
	}
}
