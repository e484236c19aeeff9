package kafka

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/mirror"
)

// BenchmarkFetch reads 3 partitions of 1 KiB records concurrently, one
// goroutine per partition, with the default 1 MiB maxBytes. Run with
//
//	go test -run x -bench Fetch -benchtime 5x ./kafka/
func BenchmarkFetch(b *testing.B) {
	const perPartition = 33_334
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	p := newProducer(b, addrs)
	for part := int32(0); part < 3; part++ {
		produceN(b, p, "bench", part, perPartition)
	}
	s := newTestSource(b, addrs, "g-bench")
	ctx := context.Background()
	b.SetBytes(3 * perPartition * 1024)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for part := int32(0); part < 3; part++ {
			wg.Go(func() {
				tp := mirror.TopicPartition{Topic: "bench", Partition: part}
				next := int64(0)
				for next < perPartition {
					f, err := s.Fetch(ctx, tp, next, 0)
					if err != nil {
						b.Error(err)
						return
					}
					next = f.Next
				}
			})
		}
		wg.Wait()
	}
	recs := float64(3 * perPartition * b.N)
	b.ReportMetric(recs/time.Since(start).Seconds(), "rec/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/recs, "cpu-µs/rec")
}

// cpuTime is the process's user+system CPU time (client and kfake).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
