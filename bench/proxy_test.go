package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// TestFrameCounterCountsAcrossChunks: a frame's size and body may arrive
// split anywhere; every frame is counted once.
func TestFrameCounterCountsAcrossChunks(t *testing.T) {
	var stream []byte
	for _, size := range []int{0, 5, 70000, 1, 3} {
		stream = binary.BigEndian.AppendUint32(stream, uint32(size))
		stream = append(stream, bytes.Repeat([]byte{0xff}, size)...)
	}
	for _, chunk := range []int{1, 3, 7, 4096, len(stream)} {
		var n atomic.Int64
		f := frameCounter{n: &n}
		for b := stream; len(b) > 0; {
			k := min(chunk, len(b))
			f.add(b[:k])
			b = b[k:]
		}
		if n.Load() != 5 {
			t.Errorf("chunks of %d bytes: %d frames, want 5", chunk, n.Load())
		}
	}
}

// TestProxyCountsKafkaRequestsAndConnections: a proxy in front of kfake's
// broker counts the connections of a real client and the requests it
// sends (the handshake's few, then one per Metadata request).
func TestProxyCountsKafkaRequestsAndConnections(t *testing.T) {
	var proxies []*Proxy
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.ListenFn(proxiedListen(&proxies)))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	defer func() {
		for _, p := range proxies {
			_ = p.Close()
		}
	}()
	if len(proxies) != 1 {
		t.Fatalf("%d proxies, want 1", len(proxies))
	}
	p := proxies[0]
	p.CountKafkaRequests()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	before := p.Stats()
	const n = 25
	for range n {
		req := kmsg.NewPtrMetadataRequest()
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	after := p.Stats()
	if got := after.Requests - before.Requests; got < n || got > n+3 {
		t.Errorf("%d requests counted for %d Metadata requests", got, n)
	}
	if after.Accepted < 1 || after.Open < 1 || after.Open > after.Accepted {
		t.Errorf("connections: %+v", after)
	}
	cl.Close()
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Open != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if open := p.Stats().Open; open != 0 {
		t.Errorf("%d connections open after the client closed", open)
	}
}
