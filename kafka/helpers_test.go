package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// testTopics are seeded in every test cluster, 3 partitions each.
var testTopics = []string{"prod.test1", "prod.test2"}

// newCluster starts an in-process kfake cluster with testTopics seeded.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, testTopics...)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testLogger logs to stderr when KAFKA_TEST_LOG=1, else discards.
func testLogger() *slog.Logger {
	if os.Getenv("KAFKA_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newTestSource creates a Source on c with the package defaults (which are
// the settings the timings in the report were measured with).
func newTestSource(t testing.TB, addrs []string, group string, mod ...func(*Options)) *Source {
	t.Helper()
	o := Options{Brokers: addrs, Group: group, Logger: testLogger()}
	for _, f := range mod {
		f(&o)
	}
	s, err := NewSource(o)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newProducer returns a kgo client that produces to explicit partitions.
func newProducer(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceN writes n records with random (incompressible) 1 KiB values to
// topic/partition.
func produceN(t testing.TB, cl *kgo.Client, topic string, partition int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rnd := rand.New(rand.NewPCG(uint64(n), uint64(partition)))
	const chunk = 1000
	for done := 0; done < n; done += chunk {
		k := min(chunk, n-done)
		rs := make([]*kgo.Record, k)
		for i := range rs {
			val := make([]byte, 1024)
			for j := 0; j < len(val); j += 8 {
				binary.LittleEndian.PutUint64(val[j:], rnd.Uint64())
			}
			rs[i] = &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "k%d", done+i), Value: val}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// allPartitions lists topic/0..n-1 for each topic.
func allPartitions(n int32, topics ...string) []mirror.TopicPartition {
	var out []mirror.TopicPartition
	for _, tp := range topics {
		for p := int32(0); p < n; p++ {
			out = append(out, mirror.TopicPartition{Topic: tp, Partition: p})
		}
	}
	return out
}

func sortedTPs(m map[mirror.TopicPartition]int64) []mirror.TopicPartition {
	out := make([]mirror.TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// waitLost waits up to d for c.Lost and returns how long it took.
func waitLost(t testing.TB, c mirror.Claim, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-c.Lost():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("claim not lost after %v", d)
		return 0
	}
}

// settleGoroutines waits until the goroutine count drops to at most max.
func settleGoroutines(max int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := runtime.NumGoroutine()
		if n <= max || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}
