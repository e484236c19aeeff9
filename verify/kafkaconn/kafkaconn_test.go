package kafkaconn_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ehmirror/ehmirror/internal/testpki"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

func parse(t *testing.T, env map[string]string, args ...string) (kafkaconn.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	getenv := func(k string) string { return env[k] }
	f := kafkaconn.RegisterFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Config(getenv)
}

// TestFlags checks the broker list, SASL with the password from the
// environment only, and that the password never shows in String or %#v.
func TestFlags(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil || len(c.Brokers) != 1 || c.Brokers[0] != kafkaconn.DefaultBrokers {
		t.Fatalf("defaults: %v %v", c, err)
	}
	c, err = parse(t, map[string]string{kafkaconn.BrokersEnv: "k1:9092,k2:9092"})
	if err != nil || len(c.Brokers) != 2 || c.Brokers[0] != "k1:9092" {
		t.Fatalf("brokers from $KAFKA_BROKERS: %v %v", c, err)
	}
	env := map[string]string{kafkaconn.PasswordEnv: "hunter2-secret"}
	c, err = parse(t, env, "-brokers", "a:9093, b:9093", "-tls", "-sasl", "SCRAM-SHA-512", "-user", "me")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Brokers) != 2 || c.Brokers[1] != "b:9093" || !c.TLS || c.SASL != "scram-sha-512" || c.Password != "hunter2-secret" {
		t.Fatalf("parsed %+v", c)
	}
	for _, s := range []string{c.String(), fmt.Sprintf("%#v", c), fmt.Sprintf("%v", c)} {
		if strings.Contains(s, "hunter2") {
			t.Fatalf("password printed: %s", s)
		}
	}
	if _, err := c.Transport(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dialer(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-brokers", "nohost"}, nil, "not host:port"},
		{[]string{"-sasl", "plain", "-user", "me"}, nil, "KAFKA_SASL_PASSWORD"},
		{[]string{"-sasl", "plain"}, env, "needs -user"},
		{[]string{"-sasl", "gssapi", "-user", "me"}, env, "want plain"},
		{[]string{"-ca-file", "x.pem"}, nil, "-tls is not"},
	} {
		if _, err := parse(t, tc.env, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestClientCertificateFlags: -cert-file and -key-file (with an encrypted
// key's password from $KAFKA_TLS_KEY_PASSWORD) are read and checked the way
// the mirror checks its settings, and the errors name the flag, never the
// key or the password.
func TestClientCertificateFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := testpki.NewCA(t, "client CA")
	good := ca.Client(t, "mirror")
	certFile, keyFile := write("cert.pem", good.CertPEM), write("key.pem", good.KeyPEM)
	encFile := filepath.Join("..", "..", "config", "testdata", "enc-default.pem")
	c, err := parse(t, nil, "-tls", "-cert-file", certFile, "-key-file", keyFile)
	if err != nil || c.CertFile != certFile || c.KeyFile != keyFile {
		t.Fatalf("parsed %v %v", c, err)
	}
	if _, err := c.Transport(); err != nil {
		t.Fatal(err)
	}
	if _, err := parse(t, map[string]string{kafkaconn.KeyPasswordEnv: "s3cret pass"}, "-tls", "-cert-file", certFile, "-key-file", encFile); err == nil || !strings.Contains(err.Error(), "-key-file: does not match") {
		t.Errorf("encrypted key of another certificate: %v", err)
	}
	if c, err := parse(t, map[string]string{kafkaconn.KeyPasswordEnv: "wrong-pw-xyz"}, "-tls", "-cert-file", certFile, "-key-file", encFile); err == nil || !strings.HasPrefix(err.Error(), "$KAFKA_TLS_KEY_PASSWORD: does not decrypt") || strings.Contains(err.Error(), "wrong-pw") || c.KeyPassword != "wrong-pw-xyz" {
		t.Errorf("wrong password: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-cert-file", certFile, "-key-file", keyFile}, "-tls is not"},
		{[]string{"-tls", "-cert-file", certFile}, "-key-file: missing"},
		{[]string{"-tls", "-key-file", keyFile}, "-cert-file: missing"},
		{[]string{"-tls", "-cert-file", keyFile, "-key-file", keyFile}, "-cert-file: holds a private key"},
		{[]string{"-tls", "-cert-file", certFile, "-key-file", filepath.Join(dir, "nope.pem")}, "-key-file: open"},
		{[]string{"-tls", "-cert-file", certFile, "-key-file", encFile}, "$KAFKA_TLS_KEY_PASSWORD: missing"},
		{[]string{"-tls", "-cert-file", certFile, "-key-file", write("other.pem", ca.Client(t, "x").KeyPEM)}, "-key-file: does not match"},
	} {
		_, err := parse(t, nil, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "PRIVATE") {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
