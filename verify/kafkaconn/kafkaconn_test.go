package kafkaconn_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"

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
