package kafka

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// silentBroker accepts connections and never answers.
func silentBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return ln.Addr().String()
}

// closedPort is an address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// Each bootstrap broker is checked on its own and a broker that does not
// answer is named with why: refused, no answer (a silent broker), dns.
func TestProbeBrokersNamesEachBroker(t *testing.T) {
	c := newCluster(t)
	good := c.ListenAddrs()[0]
	silent, refused, unknown := silentBroker(t), closedPort(t), "no-such-broker.invalid:9092"
	src := newTestSource(t, []string{good, silent, refused, unknown}, "probe", func(o *Options) { o.DialTimeout = 2 * time.Second })
	start := time.Now()
	got := src.ProbeBrokers(context.Background())
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the probe took %s", took)
	}
	want := []struct {
		name, cause string
	}{{good, ""}, {silent, "no answer"}, {refused, "refused"}, {unknown, "dns"}}
	if len(got) != len(want) {
		t.Fatalf("%d results: %+v", len(got), got)
	}
	for i, w := range want {
		e := got[i]
		if e.Name != w.name || e.OK != (w.cause == "") || e.Cause != w.cause {
			t.Errorf("broker %s: %+v, want cause %q", w.name, e, w.cause)
		}
		if !e.OK && (e.Error == "" || strings.Contains(e.String(), "\n")) {
			t.Errorf("broker %s: no one-line reason: %q", w.name, e.String())
		}
	}
}
