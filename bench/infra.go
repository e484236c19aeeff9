package bench

import (
	"context"

	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/emulator"
)

// emulatorPartitionBytes caps what the emulator keeps per hub partition, so
// that its memory stays bounded however much a case sends.
const emulatorPartitionBytes = 8 << 20

// infra is one case's Kafka cluster and Event Hubs emulator, in this process.
type infra struct {
	cluster  *kfake.Cluster
	emu      *emulator.Server
	producer *kgo.Client
	gen      *gen
	loaded   int64 // records per partition loaded so far
}

// startInfra starts kfake with the benchmark's topics and the emulator with
// their hubs.
func startInfra(ctx context.Context, shape Shape) (*infra, error) {
	topics := make([]string, NumTopics)
	hubs := make([]emulator.HubConfig, NumTopics)
	for ti := range topics {
		topics[ti] = TopicName(ti)
		hubs[ti] = emulator.HubConfig{Name: topics[ti], PartitionCount: NumPartitions, MaxPartitionBytes: emulatorPartitionBytes}
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(NumPartitions, topics...))
	if err != nil {
		return nil, fmt.Errorf("starting kfake: %w", err)
	}
	emu, err := emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Hubs: hubs})
	if err != nil {
		cluster.Close()
		return nil, fmt.Errorf("starting the emulator: %w", err)
	}
	producer, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(200_000),
		kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(kgo.LeaderAck()),
	)
	if err != nil {
		_ = emu.Close()
		cluster.Close()
		return nil, fmt.Errorf("starting the kgo producer: %w", err)
	}
	return &infra{cluster: cluster, emu: emu, producer: producer, gen: newGen(shape)}, nil
}

// close stops the producer, the emulator and kfake, freeing the backlog.
func (in *infra) close() {
	in.producer.Close()
	_ = in.emu.Close()
	in.cluster.Close()
}

// brokers are kfake's addresses.
func (in *infra) brokers() []string { return in.cluster.ListenAddrs() }

// loadTo produces records until every partition holds perPartition records
// (offsets 0..perPartition-1).
func (in *infra) loadTo(ctx context.Context, perPartition int64) error {
	from := in.loaded
	if perPartition <= from {
		return nil
	}
	var failed atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	// Interleave partitions so every partition's batches fill evenly.
	for off := from; off < perPartition; off++ {
		for ti := range NumTopics {
			for p := range NumPartitions {
				r := &kgo.Record{
					Topic:     in.gen.topics[ti],
					Partition: int32(p),
					Key:       in.gen.key(ti, p, off),
					Value:     in.gen.value(ti, p, off),
				}
				r.Timestamp = time.UnixMilli(in.gen.timestamp(off))
				in.producer.Produce(ctx, r, done)
			}
		}
		if errp := failed.Load(); errp != nil {
			break
		}
	}
	if err := in.producer.Flush(ctx); err != nil {
		return fmt.Errorf("flushing the loader: %w", err)
	}
	if errp := failed.Load(); errp != nil {
		return fmt.Errorf("loading records: %w", *errp)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("loading records: %w", err)
	}
	in.loaded = perPartition
	return nil
}

// emulatorEvents is how many events the emulator stored since it started.
func (in *infra) emulatorEvents() int64 { return in.emu.Stats().EventsStored }
