package kafka

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ehmirror/ehmirror/mirror"
)

func TestOptionsValidation(t *testing.T) {
	t.Parallel()
	ok := Options{Brokers: []string{"127.0.0.1:9092"}, Group: "g"}
	for name, mod := range map[string]func(*Options){
		"no brokers":       func(o *Options) { o.Brokers = nil },
		"no port":          func(o *Options) { o.Brokers = []string{"localhost"} },
		"no group":         func(o *Options) { o.Group = "" },
		"bad mechanism":    func(o *Options) { o.SASL = SASL{Mechanism: "gssapi", Username: "u"} },
		"no user":          func(o *Options) { o.SASL = SASL{Mechanism: "plain", Password: "p"} },
		"negative timeout": func(o *Options) { o.DialTimeout = -1 },
		"heartbeat":        func(o *Options) { o.HeartbeatInterval = 10 * time.Second },
	} {
		o := ok
		mod(&o)
		if s, err := NewSource(o); err == nil {
			_ = s.Close()
			t.Errorf("%s: NewSource succeeded", name)
		}
	}
	s, err := NewSource(ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.SessionTimeout != DefaultSessionTimeout || s.opts.FetchMaxWait != DefaultFetchMaxWait || s.opts.ClientID != DefaultClientID {
		t.Errorf("defaults not applied: %+v", s.opts)
	}
	_ = s.Close()

	secret := "hunter2-secret"
	o := ok
	o.SASL = SASL{Mechanism: "SCRAM-SHA-512", Username: "u", Password: secret}
	for _, str := range []string{fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprint(o.SASL), fmt.Sprintf("%#v", o.SASL)} {
		if strings.Contains(str, secret) {
			t.Errorf("password in %q", str)
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "sasl", o.SASL)
	if strings.Contains(buf.String(), secret) {
		t.Errorf("password in log line %q", buf.String())
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestSASLAndTLS(t *testing.T) {
	t.Parallel()
	const user, pass = "mirror", "pw-Ü-not-in-errors"
	serverTLS, clientTLS := testTLS(t)
	cases := []struct {
		name      string
		mechanism string
		tls       bool
		kgoMech   func() kgo.Opt
	}{
		{"plain", "plain", false, func() kgo.Opt { return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()) }},
		{"scram-sha-256", "scram-sha-256", false, func() kgo.Opt { return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()) }},
		{"scram-sha-512+tls", "SCRAM-SHA-512", true, func() kgo.Opt { return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()) }},
		{"tls only", "", true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var kopts []kfake.Opt
			var popts []kgo.Opt
			if tc.mechanism != "" {
				kopts = append(kopts, kfake.EnableSASL(), kfake.Superuser(strings.ToUpper(tc.mechanism), user, pass))
				popts = append(popts, tc.kgoMech())
			}
			var ctls *tls.Config
			if tc.tls {
				kopts = append(kopts, kfake.TLS(serverTLS))
				ctls = clientTLS.Clone()
				popts = append(popts, kgo.DialTLSConfig(clientTLS.Clone()))
			}
			c := newCluster(t, kopts...)
			addrs := c.ListenAddrs()
			logs := &syncBuffer{}
			withAuth := func(o *Options) {
				o.SASL = SASL{Mechanism: tc.mechanism, Username: user, Password: pass}
				o.TLS = ctls
				o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			s := newTestSource(t, addrs, "g-auth", withAuth)
			ctx := ctxT(t, 15*time.Second)
			produceN(t, newProducer(t, addrs, popts...), "prod.test1", 0, 5)

			ts, err := s.Topics(ctx)
			if err != nil || len(ts) < 2 {
				t.Fatalf("topics: %v %v", ts, err)
			}
			tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 0}
			f, err := s.Fetch(ctx, tp, 0, 0)
			if err != nil || len(f.Records) != 5 {
				t.Fatalf("fetch: %v (%d records)", err, len(f.Records))
			}
			cl, err := s.Claim(ctx, testTopics)
			if err != nil {
				t.Fatalf("claim: %v", err)
			}
			if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{tp: 5}); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if err := cl.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			got, err := s.Committed(ctx, []mirror.TopicPartition{tp})
			if err != nil || got[tp] != 5 {
				t.Fatalf("committed: %v %v", got, err)
			}
			if _, err := s.Watermarks(ctx, []mirror.TopicPartition{tp}); err != nil {
				t.Fatalf("watermarks: %v", err)
			}

			if tc.mechanism != "" {
				// A wrong password fails fast and is not echoed.
				const wrong = "wrong-Password-xyz"
				bad := newTestSource(t, addrs, "g-auth", withAuth, func(o *Options) { o.SASL.Password = wrong })
				start := time.Now()
				var errs []error
				_, err := bad.Topics(ctx)
				errs = append(errs, err)
				_, err = bad.Fetch(ctx, tp, 0, 0)
				errs = append(errs, err)
				_, err = bad.Claim(ctx, testTopics)
				errs = append(errs, err)
				_, err = bad.Committed(ctx, []mirror.TopicPartition{tp})
				errs = append(errs, err)
				for i, err := range errs {
					if err == nil {
						t.Fatalf("call %d with a wrong password succeeded", i)
					}
					for _, secret := range []string{wrong, pass} {
						if strings.Contains(err.Error(), secret) {
							t.Fatalf("password in error: %v", err)
						}
					}
				}
				t.Logf("wrong password: 4 calls failed in %v; e.g. %v", time.Since(start), errs[2])
				_ = bad.Close()
			}
			_ = s.Close()
			if strings.Contains(logs.String(), pass) {
				t.Fatal("password in the logs")
			}
		})
	}
	// Plaintext client against a TLS listener fails within the ctx.
	c := newCluster(t, kfake.TLS(serverTLS))
	s := newTestSource(t, c.ListenAddrs(), "g-auth", func(o *Options) { o.DialTimeout = time.Second })
	start := time.Now()
	if _, err := s.Topics(ctxT(t, 3*time.Second)); err == nil {
		t.Fatal("plaintext against TLS succeeded")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("plaintext against TLS took %v", d)
	}
}

// testTLS returns a server config with a certificate for 127.0.0.1 signed
// by a fresh CA, and a client config trusting that CA.
func testTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kfake"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client
}

// TestTLSVerifies: a client that does not trust the server's CA fails.
func TestTLSVerifies(t *testing.T) {
	t.Parallel()
	serverTLS, _ := testTLS(t)
	_, otherClient := testTLS(t)
	c := newCluster(t, kfake.TLS(serverTLS))
	s := newTestSource(t, c.ListenAddrs(), "g-tls", func(o *Options) { o.TLS = otherClient })
	_, err := s.Topics(ctxT(t, 5*time.Second))
	var uerr x509.UnknownAuthorityError
	if !errors.As(err, &uerr) && (err == nil || !strings.Contains(err.Error(), "certificate")) {
		t.Fatalf("untrusted server: %v", err)
	}
}
