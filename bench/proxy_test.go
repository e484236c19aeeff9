package bench

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// The proxy adds its one-way delay in each direction (so a round trip
// takes twice it) without capping throughput.
func TestProxyDelaysWithoutCappingThroughput(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	p, err := StartProxy(ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	oneWay := 25 * time.Millisecond
	p.SetDelay(oneWay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Round trip of a small message.
	buf := make([]byte, 4)
	t0 := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
	if rtt := time.Since(t0); rtt < 2*oneWay || rtt > 2*oneWay+40*time.Millisecond {
		t.Errorf("round trip %s, want about %s", rtt, 2*oneWay)
	}

	// 32 MiB each way: at a 50 ms round trip a window-limited path (64 KiB
	// per round trip) would need 25 s.
	data := bytes.Repeat([]byte("0123456789abcdef"), 2<<20)
	t0 = time.Now()
	errc := make(chan error, 1)
	go func() { _, err := c.Write(data); errc <- err }()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data corrupted through the proxy")
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("32 MiB took %s through a 50 ms round trip: throughput is capped", d)
	}
}
