package faults

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/internal/testpki"
)

// encryptedTestKey returns a key OpenSSL encrypted as PKCS#8 (PBES2,
// AES-256-CBC, PBKDF2-HMAC-SHA256; config/testdata) with its password and
// the key itself.
func encryptedTestKey(t testing.TB) (keyPEM, password string, key crypto.Signer) {
	t.Helper()
	dir := filepath.Join("..", "config", "testdata")
	enc, err := os.ReadFile(filepath.Join(dir, "enc-default.pem"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile(filepath.Join(dir, "plain.pem"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(plain)
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return string(enc), "s3cret pass", k.(crypto.Signer)
}

// TestKafkaMutualTLS (9d) runs Kafka with TLS that requires and verifies
// client certificates (ssl.client.auth=required). Handlers without a client
// certificate, or with one from another CA, fail their drain with a one-line
// reason that the status page shows too, and mirror nothing; an expired
// certificate or a malformed key is a setting problem naming the setting in
// every invocation and in the status. A handler with the right certificate
// and its key, encrypted PKCS#8 with a password, mirrors everything. No key,
// password or part of a key appears in any output of any of them.
func TestKafkaMutualTLS(t *testing.T) {
	serverCA, clientCA, otherCA := testpki.NewCA(t, "broker CA"), testpki.NewCA(t, "client CA"), testpki.NewCA(t, "another CA")
	encKey, password, key := encryptedTestKey(t)
	good := clientCA.ClientValid(t, "mirror", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), key)
	e := newEnv(t, envConfig{
		KafkaOpts:    []kfake.Opt{kfake.TLS(testpki.BrokerTLS(serverCA.Server(t), clientCA))},
		ProducerOpts: []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{good.TLS}, MinVersion: tls.VersionTLS12})},
	})
	f := newFigures(t, "9d", "Kafka mutual TLS: no, foreign or expired client certificate refused in one line; the right one (encrypted key) mirrors; no key in any output")
	ctx := context.Background()
	p := e.newProducer(producerConfig{})
	p.produce(ctx, 1000)

	foreign := otherCA.Client(t, "mirror")
	expired := clientCA.ClientValid(t, "mirror", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), nil)
	garbageKey := "-----BEGIN PRIVATE KEY-----\n" + randomHex(t, 24) + "\n-----END PRIVATE KEY-----\n"
	secrets := map[string]string{
		"client key (encrypted)":       encKey,
		"client key password":          password,
		"client key of another CA":     string(foreign.KeyPEM),
		"expired certificate's key":    string(expired.KeyPEM),
		"malformed key":                garbageKey,
		"client key (plain, for scan)": string(good.KeyPEM),
	}
	tlsOn := func(extra map[string]string) map[string]string {
		m := map[string]string{config.KafkaTLS: "true", config.KafkaTLSCAPEM: string(serverCA.PEM)}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	certErr := regexp.MustCompile(`tls: (certificate required|unknown certificate authority|bad certificate)`)
	var handlers []*handler
	for _, c := range []struct {
		name     string
		settings map[string]string
	}{
		{"no-certificate", tlsOn(nil)},
		{"another-CA", tlsOn(map[string]string{config.KafkaTLSCertPEM: string(foreign.CertPEM), config.KafkaTLSKeyPEM: string(foreign.KeyPEM)})},
	} {
		h := e.startHandler(c.name, c.settings)
		handlers = append(handlers, h)
		res, err := h.timer(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Join(reportLines(res), "\n")
		line := firstLine(lines, "error: ")
		if res.Succeeded() || !certErr.MatchString(line) || !strings.Contains(line, "refused this client's TLS certificate") {
			t.Errorf("%s: succeeded=%t; want a failed drain with a line saying the broker refused the certificate:\n%s", c.name, res.Succeeded(), lines)
		}
		if _, st, err := h.status(ctx, ""); err != nil || !certErr.MatchString(st.LagError) || strings.Contains(st.LagError, "\n") {
			t.Errorf("%s: status lag_error %q (%v), want the one-line certificate error", c.name, st.LagError, err)
		}
		t.Logf("%s: %s", c.name, line)
	}
	if n := e.emu.Stats().EventsStored; n != 0 {
		t.Errorf("%d events mirrored without an accepted client certificate", n)
	}
	if snap, _ := e.offsets(); committedAny(snap) {
		t.Errorf("offsets committed without an accepted client certificate")
	}

	for _, c := range []struct {
		name, setting, says string
		settings            map[string]string
	}{
		{"expired", config.KafkaTLSCertPEM, "expired", tlsOn(map[string]string{config.KafkaTLSCertPEM: string(expired.CertPEM), config.KafkaTLSKeyPEM: string(expired.KeyPEM)})},
		{"malformed-key", config.KafkaTLSKeyPEM, "not a valid private key", tlsOn(map[string]string{config.KafkaTLSCertPEM: string(good.CertPEM), config.KafkaTLSKeyPEM: garbageKey})},
		{"wrong-password", config.KafkaTLSKeyPassword, "does not decrypt", tlsOn(map[string]string{config.KafkaTLSCertPEM: string(good.CertPEM), config.KafkaTLSKeyPEM: encKey, config.KafkaTLSKeyPassword: "wrong " + password})},
		{"key-without-certificate", config.KafkaTLSCertPEM, "missing", tlsOn(map[string]string{config.KafkaTLSKeyPEM: encKey, config.KafkaTLSKeyPassword: password})},
	} {
		h := e.startHandler(c.name, c.settings)
		handlers = append(handlers, h)
		res, err := h.invokeTimer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Join(reportLines(res), "\n")
		want := c.setting + ": "
		if res.Succeeded() || !strings.Contains(firstLine(lines, want), c.says) {
			t.Errorf("%s: succeeded=%t; want a line %q…%q:\n%s", c.name, res.Succeeded(), want, c.says, lines)
		}
		code, st, err := h.status(ctx, "")
		found := false
		for _, pr := range st.Problems {
			found = found || (pr.Setting == c.setting && strings.Contains(pr.Message, c.says))
		}
		if err != nil || code != http.StatusServiceUnavailable || !found {
			t.Errorf("%s: status %d %v, problems %v; want %s", c.name, code, err, st.Problems, c.setting)
		}
		t.Logf("%s: %s", c.name, firstLine(lines, want))
	}

	h := e.startHandler("right-certificate", tlsOn(map[string]string{
		config.KafkaTLSCertPEM: string(good.CertPEM), config.KafkaTLSKeyPEM: encKey, config.KafkaTLSKeyPassword: password,
	}))
	handlers = append(handlers, h)
	h.settle(ctx)
	if code, st, err := h.status(ctx, ""); err != nil || code != http.StatusOK || !strings.Contains(st.Config[config.KafkaTLSCertPEM], "CN=mirror") || st.Config[config.KafkaTLSKeyPEM] != "(set, redacted)" {
		t.Errorf("status %d %v: certificate shown as %q, key as %q", code, err, st.Config[config.KafkaTLSCertPEM], st.Config[config.KafkaTLSKeyPEM])
	}
	p.stop()
	h.settle(ctx)

	for _, hh := range handlers {
		if err := hh.host.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	// The scan finds one line of a key on its own.
	if lines := strings.Split(string(good.KeyPEM), "\n"); len(leaks("x "+lines[2]+" x", secrets)) == 0 {
		t.Fatal("the secret scan misses a line of a key")
	}
	var searched int
	for _, hh := range handlers {
		out := hh.everything()
		searched += len(out)
		if found := leaks(out, secrets); len(found) > 0 {
			t.Errorf("handler %s: key material in its output or answers: %v", hh.name, found)
		}
	}
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	e.assert(f, v)
	f.note("no certificate and another CA's: drain failed with the broker's TLS alert, nothing mirrored or committed; expired, malformed key, wrong password, key without certificate: one-line setting problem; the right certificate with an encrypted key mirrored all; %d secrets searched in %d bytes of %d handlers: none found", len(secrets), searched, len(handlers))
}
