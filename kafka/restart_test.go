package kafka

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/mirror"
)

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBrokerRestart restarts kfake on the same port with its data dir:
// calls fail fast while it is down and work again once it is back.
func TestBrokerRestart(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	dir := t.TempDir()
	opts := []kfake.Opt{kfake.Ports(port), kfake.DataDir(dir)}
	c1 := newCluster(t, opts...)
	addrs := c1.ListenAddrs()
	s := newTestSource(t, addrs, "g-restart")
	ctx := ctxT(t, 35*time.Second)
	tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 0}
	produceN(t, newProducer(t, addrs), tp.Topic, tp.Partition, 10)

	held, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Commit(ctx, map[mirror.TopicPartition]int64{tp: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(ctx, tp, 0, 0); err != nil { // warm the connections
		t.Fatal(err)
	}

	down := time.Now()
	c1.Close()
	t.Logf("held claim lost %v after the broker went down", waitLost(t, held, 5*time.Second))

	calls := map[string]func(context.Context) error{
		"Topics": func(ctx context.Context) error { _, err := s.Topics(ctx); return err },
		"Fetch":  func(ctx context.Context) error { _, err := s.Fetch(ctx, tp, 0, 0); return err },
		"Watermarks": func(ctx context.Context) error {
			_, err := s.Watermarks(ctx, []mirror.TopicPartition{tp})
			return err
		},
		"Committed": func(ctx context.Context) error {
			_, err := s.Committed(ctx, []mirror.TopicPartition{tp})
			return err
		},
		"Claim": func(ctx context.Context) error {
			cl, err := s.Claim(ctx, testTopics)
			if err == nil {
				_ = cl.Release(ctx)
			}
			return err
		},
	}
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		err := call(cctx)
		cancel()
		d := time.Since(start)
		if err == nil {
			t.Fatalf("%s succeeded with the broker down", name)
		}
		if d > 2*time.Second {
			t.Errorf("%s took %v to fail with the broker down", name, d)
		}
		t.Logf("down: %s failed in %v: %v", name, d.Round(time.Microsecond), err)
	}
	if err := held.Release(ctx); err != nil {
		t.Logf("release of the claim lost in the outage: %v", err)
	}

	c2, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, testTopics...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	up := time.Now()
	t.Logf("broker was down %v", up.Sub(down).Round(time.Millisecond))

	for _, name := range []string{"Topics", "Fetch", "Watermarks", "Committed", "Claim"} {
		start := time.Now()
		var err error
		for attempt := 0; ; attempt++ {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = calls[name](cctx)
			cancel()
			if err == nil || time.Since(start) > 12*time.Second {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s still failing after the restart: %v", name, err)
		}
		t.Logf("up: %s succeeded %v after the restart", name, time.Since(up).Round(time.Millisecond))
	}
	f, err := s.Fetch(ctx, tp, 0, 0)
	if err != nil || len(f.Records) != 10 {
		t.Fatalf("data after restart: %v, %d records", err, len(f.Records))
	}
	got, err := s.Committed(ctx, []mirror.TopicPartition{tp})
	if err != nil || got[tp] != 7 {
		t.Fatalf("committed after restart: %v %v", got, err)
	}
}

// TestNoGoroutineLeak: after claims, rebalances, releases and Close, the
// adapter's goroutines are gone (kfake's own are stopped with the cluster).
func TestNoGoroutineLeak(t *testing.T) {
	// Not parallel: it counts goroutines process-wide.
	before := runtime.NumGoroutine()
	func() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, testTopics...))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		addrs := c.ListenAddrs()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		mk := func() *Source {
			s, err := NewSource(Options{Brokers: addrs, Group: "g-leak", Logger: testLogger()})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		s1, s2 := mk(), mk()
		c1, err := s1.Claim(ctx, testTopics)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s1.Fetch(ctx, mirror.TopicPartition{Topic: "prod.test1"}, 0, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s1.Topics(ctx); err != nil {
			t.Fatal(err)
		}
		c2, err := s2.Claim(ctx, testTopics) // c1 is lost, s1's member rejoins and parks a generation
		if err != nil {
			t.Fatal(err)
		}
		<-c1.Lost()
		// Neither re-claim nor release c1: Close must clean up the parked
		// generation and the heartbeating member.
		_ = c2.Release(ctx)
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	if n := settleGoroutines(before+2, 5*time.Second); n > before+2 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
