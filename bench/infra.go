package bench

import (
	"context"
	"crypto/tls"
	"strconv"
	"strings"

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
	opts     infraOptions
	kproxies []*Proxy // delay proxies in front of the brokers, when asked
	eproxy   *Proxy   // delay (and TLS) proxy in front of the emulator, when asked
	producer *kgo.Client
	gen      *gen
	loaded   int64 // records per partition loaded so far
}

// amqpsPort is the AMQP-over-TLS port the Event Hubs SDK dials.
const amqpsPort = "5671"

// infraOptions add network conditions to a case's infrastructure.
type infraOptions struct {
	// Proxies put a delay Proxy in front of every broker (which
	// advertises it) and of the emulator.
	Proxies bool
	// TLS makes kfake and the emulator (its amqps listener, behind the
	// proxy on port 5671) serve TLS.
	TLS *benchPKI
	// PartitionBytes overrides emulatorPartitionBytes.
	PartitionBytes int64
	// Quota is the emulator's ingress quota (default none).
	Quota emulator.Quota
}

// startInfra starts kfake with the benchmark's topics and the emulator with
// their hubs.
func startInfra(ctx context.Context, shape Shape) (*infra, error) {
	return startInfraWith(ctx, shape, infraOptions{})
}

// kfakeSegmentBytes is kfake's log.segment.bytes in the benchmarks. kfake
// keeps a copy of every segment in an in-memory file whose buffer doubles
// as it grows; with the default 100 MiB segments its single request loop
// copies (and, during a collection of this process's multi-GB heap,
// assists the collector for) buffers of up to 128 MiB at a time, stalling
// every fetch and produce for seconds. A real broker appends to a file.
const kfakeSegmentBytes = 4 << 20

// startInfraWith is startInfra with network conditions.
func startInfraWith(ctx context.Context, shape Shape, opts infraOptions) (*infra, error) {
	partBytes := int64(emulatorPartitionBytes)
	if opts.PartitionBytes > 0 {
		partBytes = opts.PartitionBytes
	}
	topics := make([]string, NumTopics)
	hubs := make([]emulator.HubConfig, NumTopics)
	for ti := range topics {
		topics[ti] = TopicName(ti)
		hubs[ti] = emulator.HubConfig{Name: topics[ti], PartitionCount: NumPartitions, MaxPartitionBytes: partBytes}
	}
	in := &infra{opts: opts, gen: newGen(shape)}
	kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(NumPartitions, topics...), kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(kfakeSegmentBytes)})}
	if opts.Proxies {
		kopts = append(kopts, kfake.ListenFn(proxiedListen(&in.kproxies)))
	}
	kgoTLS := []kgo.Opt(nil)
	if opts.TLS != nil {
		kopts = append(kopts, kfake.TLS(opts.TLS.server))
		pool, err := opts.TLS.pool()
		if err != nil {
			return nil, err
		}
		kgoTLS = append(kgoTLS, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		in.closeProxies()
		return nil, fmt.Errorf("starting kfake: %w", err)
	}
	in.cluster = cluster
	ecfg := emulator.Config{Listen: "127.0.0.1:0", Hubs: hubs, Quota: opts.Quota}
	if opts.TLS != nil {
		ecfg.TLSListen, ecfg.TLSCertificate = "127.0.0.1:0", &opts.TLS.server.Certificates[0]
	}
	emu, err := emulator.Start(ctx, ecfg)
	if err != nil {
		cluster.Close()
		in.closeProxies()
		return nil, fmt.Errorf("starting the emulator: %w", err)
	}
	in.emu = emu
	if opts.Proxies || opts.TLS != nil {
		listen, target := "127.0.0.1:0", emu.Addr()
		if opts.TLS != nil {
			// The emulator's amqps listener terminates TLS; the proxy in
			// front passes it through. The SDK sends the endpoint's
			// host:port as the TLS server name, which no certificate
			// matches; without a port it dials 5671, as Azure does, and
			// verifies "localhost".
			listen, target = "127.0.0.1:"+amqpsPort, emu.TLSAddr()
		}
		if in.eproxy, err = StartProxyOn(listen, target, nil); err != nil {
			in.close()
			return nil, fmt.Errorf("starting the emulator's proxy on %s: %w", listen, err)
		}
	}
	producer, err := kgo.NewClient(append(kgoTLS,
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(200_000),
		kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(kgo.LeaderAck()),
	)...)
	if err != nil {
		in.close()
		return nil, fmt.Errorf("starting the kgo producer: %w", err)
	}
	in.producer = producer
	return in, nil
}

// close stops the producer, the proxies, the emulator and kfake, freeing
// the backlog.
func (in *infra) close() {
	if in.producer != nil {
		in.producer.Close()
	}
	in.closeProxies()
	if in.emu != nil {
		_ = in.emu.Close()
	}
	if in.cluster != nil {
		in.cluster.Close()
	}
}

func (in *infra) closeProxies() {
	for _, p := range in.kproxies {
		_ = p.Close()
	}
	if in.eproxy != nil {
		_ = in.eproxy.Close()
	}
}

// setDelays sets the one-way delays the proxies add: kafka in front of the
// brokers, eh in front of the emulator.
func (in *infra) setDelays(kafka, eh time.Duration) {
	for _, p := range in.kproxies {
		p.SetDelay(kafka)
	}
	if in.eproxy != nil {
		in.eproxy.SetDelay(eh)
	}
}

// connectionString is the Event Hubs connection string clients use: the
// emulator's, or its proxy's (without UseDevelopmentEmulator, so the SDK
// speaks TLS, when the proxy terminates TLS).
func (in *infra) connectionString() string {
	cs := in.emu.ConnectionString()
	if in.eproxy == nil {
		return cs
	}
	if in.opts.TLS != nil {
		cs = strings.Replace(cs, in.emu.Addr(), "localhost", 1)
		return strings.Replace(cs, ";UseDevelopmentEmulator=true", "", 1)
	}
	return strings.Replace(cs, in.emu.Addr(), in.eproxy.Addr(), 1)
}

// childSpec is the base spec of a child measuring against this infra.
func (in *infra) childSpec(shape Shape) ChildSpec {
	spec := ChildSpec{Shape: shape, Brokers: in.brokers(), ConnectionString: in.connectionString(), Timeout: 30 * time.Minute}
	if in.opts.TLS != nil {
		spec.CAFile = in.opts.TLS.caFile
	}
	return spec
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
				in.producer.Produce(ctx, in.gen.kafkaRecord(ti, p, off, time.UnixMilli(in.gen.timestamp(off))), done)
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
