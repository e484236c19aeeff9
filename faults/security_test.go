package faults

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/internal/testpki"
	"github.com/ehmirror/ehmirror/mirror"
)

// Scenario 9: security. Secrets from the environment never appear in what
// the handler writes or answers; the HTTP functions need function keys;
// Kafka TLS verifies certificates unless told not to; the Terraform module
// grants the function app only what it needs.

// randomHex returns n random bytes in hex.
func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// secretForms returns the ways a secret could be written out: as is, JSON-
// and Go-quoted (escaped characters), URL-encoded, for a connection string
// its SharedAccessKey on its own, and for a PEM key each line of its body.
func secretForms(secret string) []string {
	forms := []string{secret}
	if b, err := json.Marshal(secret); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	q := strconv.Quote(secret)
	forms = append(forms, q[1:len(q)-1], url.QueryEscape(secret))
	// A PEM private key: each line of its base64 body on its own, so that
	// part of a key counts too.
	if strings.Contains(secret, "PRIVATE KEY-----") {
		for _, line := range strings.Split(secret, "\n") {
			if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") && !strings.Contains(line, ":") {
				forms = append(forms, line)
			}
		}
	}
	for _, part := range strings.Split(secret, ";") {
		if k, v, ok := strings.Cut(part, "="); ok && strings.EqualFold(k, "SharedAccessKey") {
			forms = append(forms, secretForms(v)...)
		}
	}
	return forms
}

// leaks returns the secrets (by name) found in text in any of their forms.
func leaks(text string, secrets map[string]string) []string {
	var out []string
	for name, s := range secrets {
		for _, form := range secretForms(s) {
			if len(form) >= 6 && strings.Contains(text, form) {
				out = append(out, fmt.Sprintf("%s (as %.8q…)", name, form))
				break
			}
		}
	}
	return out
}

// TestSecretsAndKeys (9a) runs the handler against Kafka with SASL/PLAIN
// and the emulator with its own shared access key, both secrets holding
// characters that JSON and log quoting escape, and exercises every path
// that writes: timer drains, a catch-up, the status page, malformed
// payloads and bodies, a setting problem, a wrong Kafka password, a wrong
// Event Hubs key (their errors) and a TLS client key (encrypted, with its
// password) that does not match its certificate. No secret, current or wrong, appears
// in any captured stdout, stderr, invocation response, HTTP body or drain
// report. The HTTP functions answer 401 without a valid function key and
// do nothing; the admin API wants the master key.
func TestSecretsAndKeys(t *testing.T) {
	const user = "mirror"
	password := `kafka-"pa<ss>&w\ord/` + randomHex(t, 6)
	key := base64.StdEncoding.EncodeToString([]byte("eh-key+" + randomHex(t, 12)))
	e := newEnv(t, envConfig{
		KafkaOpts:    []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", user, password)},
		ProducerOpts: []kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism())},
		EmulatorKey:  key,
	})
	f := newFigures(t, "9a", "secrets never in output (SASL password, Event Hubs key, wrong ones too); function keys required")
	ctx := context.Background()
	secrets := map[string]string{
		"Kafka SASL password":          password,
		"Event Hubs key":               key,
		"Event Hubs connection string": e.eventHubsConnection(),
	}
	saslSettings := map[string]string{config.KafkaSASLMechanism: "plain", config.KafkaSASLUsername: user, config.KafkaSASLPassword: password}
	h := e.startHandler("a", saslSettings)
	p := e.startProducer(producerConfig{})

	// Function keys.
	stored := e.emu.Stats().EventsStored
	for _, c := range []struct {
		method, path, body string
		header             string
		want               int
	}{
		{http.MethodGet, "/api/status", "", "", http.StatusUnauthorized},
		{http.MethodGet, "/api/status?code=wrong-" + randomHex(t, 8), "", "", http.StatusUnauthorized},
		{http.MethodPost, "/api/catchup", `{"max_duration":"5s"}`, "", http.StatusUnauthorized},
		{http.MethodPost, "/api/catchup?code=" + url.QueryEscape(h.host.Keys().Master[:10]), "", "", http.StatusUnauthorized},
		{http.MethodGet, "/admin/host/status?code=" + h.key, "", "", http.StatusUnauthorized},
		{http.MethodGet, "/api/status", "", h.key, http.StatusOK},
		{http.MethodGet, "/admin/host/status?code=" + h.host.Keys().Master, "", "", http.StatusOK},
	} {
		req, err := http.NewRequestWithContext(ctx, c.method, h.front.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.header != "" {
			req.Header.Set("x-functions-key", c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s (header key %t): %d, want %d", c.method, strings.Split(c.path, "?")[0], c.header != "", resp.StatusCode, c.want)
		}
	}
	app, err := functions.LoadApp(appDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range app.Functions {
		if fn.IsHTTP() && !strings.EqualFold(fn.Trigger().AuthLevel, "function") {
			t.Errorf("function %s has authLevel %q, want function", fn.Name, fn.Trigger().AuthLevel)
		}
	}
	if _, st, err := h.status(ctx, ""); err != nil || len(st.CatchUps) != 0 {
		t.Errorf("a catch-up without a key started a run: %+v %v", st.CatchUps, err)
	}
	if e.emu.Stats().EventsStored != stored {
		t.Errorf("requests without a key mirrored records")
	}

	// Every path that writes, with the secrets in the environment.
	for range 3 {
		if res, err := h.timer(ctx, false); err != nil || !res.Succeeded() {
			t.Fatalf("timer: %v %v\n%s", err, errOf(res), strings.Join(reportLines(res), "\n"))
		}
	}
	code, cu, err := h.startCatchUp(ctx, `{"max_duration":"20s"}`)
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("catch-up: %d %+v %v", code, cu, err)
	}
	if _, err := h.waitCatchUp(ctx, cu.ID); err != nil {
		t.Fatal(err)
	}
	if code, st, err := h.status(ctx, ""); err != nil || code != http.StatusOK || st.Config[config.KafkaSASLPassword] != "(set, redacted)" {
		t.Errorf("status: %d %v, password shown as %q", code, err, st.Config[config.KafkaSASLPassword])
	}
	for _, body := range []string{`{"topics":"("}`, `not json`} {
		if code, _, _ := h.startCatchUp(ctx, body); code != http.StatusBadRequest {
			t.Errorf("catch-up body %q: %d", body, code)
		}
	}
	if res, _ := h.host.Invoke(ctx, timerFunction, []byte(`{"Data":{"timer":7}}`)); res == nil || res.Status != http.StatusBadRequest {
		t.Errorf("malformed payload: %+v", res)
	}
	p.stop()
	h.settle(ctx)

	// Wrong secrets are secrets too: their errors must not echo them.
	wrongPassword := `wrong-"pa<ss>&` + randomHex(t, 6)
	wrongKey := base64.StdEncoding.EncodeToString([]byte("wrong-key/" + randomHex(t, 12)))
	wrongConn := strings.Replace(e.eventHubsConnection(), "SharedAccessKey="+key, "SharedAccessKey="+wrongKey, 1)
	secrets["wrong Kafka SASL password"] = wrongPassword
	secrets["wrong Event Hubs key"] = wrongKey
	badKafka := e.startHandler("wrong-password", map[string]string{config.KafkaSASLMechanism: "plain", config.KafkaSASLUsername: user, config.KafkaSASLPassword: wrongPassword})
	badEH := e.startHandler("wrong-key", map[string]string{config.KafkaSASLMechanism: "plain", config.KafkaSASLUsername: user, config.KafkaSASLPassword: password, config.EventHubsConnection: wrongConn})
	problem := e.startHandler("problem", map[string]string{config.KafkaSASLMechanism: "plain", config.KafkaSASLUsername: user, config.KafkaSASLPassword: password, config.MirrorPartitioning: "random"})
	// A client certificate key (encrypted, with its password) that does
	// not match the certificate: a setting problem whose line must not
	// show the key.
	clientKey, clientKeyPassword, _ := encryptedTestKey(t)
	secrets["Kafka TLS client key"] = clientKey
	secrets["Kafka TLS client key password"] = clientKeyPassword
	badCert := e.startHandler("client-key", map[string]string{config.KafkaSASLMechanism: "plain", config.KafkaSASLUsername: user, config.KafkaSASLPassword: password,
		config.KafkaTLS: "true", config.KafkaTLSCertPEM: string(testpki.NewCA(t, "CA").Client(t, "mirror").CertPEM), config.KafkaTLSKeyPEM: clientKey, config.KafkaTLSKeyPassword: clientKeyPassword})
	for _, c := range []struct {
		h    *handler
		says string
	}{{badKafka, "SASL"}, {badEH, "nauthorized"}, {problem, config.MirrorPartitioning}, {badCert, config.KafkaTLSKeyPEM + ": does not match"}} {
		res, err := c.h.invokeTimer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Join(reportLines(res), "\n")
		if res.Succeeded() || !strings.Contains(lines, c.says) {
			t.Errorf("handler %s: succeeded=%t, report does not mention %q:\n%s", c.h.name, res.Succeeded(), c.says, lines)
		}
		if _, _, err := c.h.status(ctx, ""); err != nil {
			t.Errorf("handler %s: status: %v", c.h.name, err)
		}
	}

	// Stopped, every line each process wrote has been read.
	for _, hh := range []*handler{h, badKafka, badEH, problem, badCert} {
		if err := hh.host.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	for _, hh := range []*handler{h, badKafka, badEH, problem, badCert} {
		if found := leaks(hh.everything(), secrets); len(found) > 0 {
			t.Errorf("handler %s: secrets in its output or answers: %v", hh.name, found)
		}
	}
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	e.assert(f, v)
	var searched int
	for _, hh := range []*handler{h, badKafka, badEH, problem, badCert} {
		searched += len(hh.everything())
	}
	f.note("%d secrets searched in %d bytes of output, answers and reports of 5 handler processes: none found; 5 requests without a valid key refused with 401", len(secrets), searched)
}

// selfSigned returns a self-signed certificate for 127.0.0.1 and its PEM.
func selfSigned(t testing.TB, cn string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return cert, certPEM
}

// TestKafkaTLSVerified (9b) runs Kafka with TLS and a self-signed
// certificate. A handler with KAFKA_TLS=true and no CA must refuse the
// broker (the drain fails and reports the certificate error; nothing is
// mirrored), and so must one given another CA; with the broker's CA in
// KAFKA_TLS_CA_PEM it mirrors, and with KAFKA_TLS_INSECURE_SKIP_VERIFY=true
// (explicitly disabled verification) too.
func TestKafkaTLSVerified(t *testing.T) {
	cert, caPEM := selfSigned(t, "kfake broker")
	_, otherPEM := selfSigned(t, "another CA")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	e := newEnv(t, envConfig{
		KafkaOpts:    []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})},
		ProducerOpts: []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})},
	})
	f := newFigures(t, "9b", "Kafka TLS with a self-signed certificate: refused without its CA, mirrored with it or with verification disabled")
	ctx := context.Background()
	p := e.newProducer(producerConfig{})
	p.produce(ctx, 1000)

	certErr := regexp.MustCompile(`x509|certificate`)
	for _, c := range []struct {
		name     string
		settings map[string]string
	}{
		{"no CA", map[string]string{config.KafkaTLS: "true"}},
		{"another CA", map[string]string{config.KafkaTLS: "true", config.KafkaTLSCAPEM: string(otherPEM)}},
	} {
		h := e.startHandler(strings.ReplaceAll(c.name, " ", "-"), c.settings)
		res, err := h.timer(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Join(reportLines(res), "\n")
		if res.Succeeded() || !certErr.MatchString(lines) {
			t.Errorf("%s: succeeded=%t; want a failed drain reporting the certificate error:\n%s", c.name, res.Succeeded(), lines)
		}
		if _, st, err := h.status(ctx, ""); err != nil || !certErr.MatchString(st.LagError) {
			t.Errorf("%s: status lag_error %q (%v), want the certificate error", c.name, st.LagError, err)
		}
		if n := e.emu.Stats().EventsStored; n != 0 {
			t.Errorf("%s: %d events mirrored through an unverified connection", c.name, n)
		}
		t.Logf("%s: %s", c.name, firstLine(lines, "error: "))
	}
	if snap, _ := e.offsets(); committedAny(snap) {
		t.Errorf("offsets committed through an unverified connection")
	}

	withCA := e.startHandler("ca", map[string]string{config.KafkaTLS: "true", config.KafkaTLSCAPEM: string(caPEM)})
	withCA.settle(ctx)
	mirroredWithCA := e.emu.Stats().EventsStored
	p.produce(ctx, 1000)
	skip := e.startHandler("skip-verify", map[string]string{config.KafkaTLS: "true", config.KafkaTLSSkipVerify: "true"})
	skip.settle(ctx)
	if mirroredWithCA < 1000 || e.emu.Stats().EventsStored < mirroredWithCA+1000 {
		t.Errorf("mirrored %d with the CA, %d in all; want 1000 and 2000", mirroredWithCA, e.emu.Stats().EventsStored)
	}

	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	e.assert(f, v)
	f.note("no CA and a wrong CA: drain failed with the x509 error, nothing read or committed; the broker's CA: %d records mirrored; verification disabled: the rest", mirroredWithCA)
}

// firstLine returns the first line of text containing s.
func firstLine(text, s string) string { return findLine(strings.Split(text, "\n"), s) }

// committedAny reports whether any partition has a committed offset.
func committedAny(snap map[mirror.TopicPartition]partitionOffsets) bool {
	for _, o := range snap {
		if o.committed >= 0 {
			return true
		}
	}
	return false
}
