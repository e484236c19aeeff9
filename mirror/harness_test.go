package mirror_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// seedTopics are the seed's topics; each has a hub of the same name.
var seedTopics = []string{"prod.test1", "prod.test2", "prod.test3", "prod.test4", "prod.test5"}

// env is a real Kafka (kfake) and a real Event Hubs emulator, with the
// project's adapters in front of them: nothing is mocked.
type env struct {
	t       testing.TB
	cluster *kfake.Cluster
	emu     *emulator.Server
	client  *kgo.Client // test producer
	group   string
	// fetchDelay, when set before newMirror, puts a distantSource with
	// this delay in front of the mirror's Kafka source (slowFetches).
	fetchDelay time.Duration
}

// newEnv starts kfake with the seed topics (4 partitions) and the emulator
// with a hub per topic (4 partitions), plus any extra hubs.
func newEnv(t testing.TB, extraHubs ...emulator.HubConfig) *env {
	t.Helper()
	return newEnvWith(t, nil, extraHubs...)
}

// newEnvWith is newEnv with extra kfake options.
func newEnvWith(t testing.TB, kopts []kfake.Opt, extraHubs ...emulator.HubConfig) *env {
	t.Helper()
	hubs := extraHubs
	for _, name := range seedTopics {
		hubs = append(hubs, emulator.HubConfig{Name: name, PartitionCount: 4})
	}
	return newBareEnv(t, append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(4, seedTopics...)}, kopts...), hubs)
}

// newBareEnv starts kfake with kopts alone and the emulator with hubs
// alone; the test producer has popts besides manual partitioning and no
// linger.
func newBareEnv(t testing.TB, kopts []kfake.Opt, hubs []emulator.HubConfig, popts ...kgo.Opt) *env {
	t.Helper()
	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(cluster.Close)
	ctx := context.Background()
	emu, err := emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Hubs: hubs})
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)}, popts...)...)
	if err != nil {
		t.Fatalf("kgo: %v", err)
	}
	t.Cleanup(client.Close)
	return &env{t: t, cluster: cluster, emu: emu, client: client, group: "mirror-" + t.Name()}
}

func testLogger() *slog.Logger {
	if os.Getenv("MIRROR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newMirror returns a mirror with its own Kafka source (a group member of
// its own) and Event Hubs sink.
func (e *env) newMirror(opts mirror.Options) *mirror.Mirror {
	e.t.Helper()
	return e.newMirrorWith(opts, nil, nil)
}

// newMirrorWith is newMirror with the sink passed through wrapSink and, when
// wrapControl is set, the mirror's Control made from the source by it (nil:
// each unchanged).
func (e *env) newMirrorWith(opts mirror.Options, wrapSink func(*eventhubs.Sink) mirror.Sink, wrapControl func(*kafka.Source) mirror.Control) *mirror.Mirror {
	e.t.Helper()
	src := e.newSource()
	sink := e.newSink()
	var s mirror.Sink = sink
	if wrapSink != nil {
		s = wrapSink(sink)
	}
	if wrapControl != nil {
		opts.Control = wrapControl(src)
	}
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	if opts.CommitInterval == 0 {
		opts.CommitInterval = 100 * time.Millisecond
	}
	var source mirror.Source = src
	if e.fetchDelay > 0 {
		source = &distantSource{Source: src, delay: e.fetchDelay}
	}
	m, err := mirror.New(source, s, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// produce writes records synchronously.
func (e *env) produce(recs ...*kgo.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

// drain runs one drain and fails the test if it could not start.
func (e *env) drain(m *mirror.Mirror, lim mirror.Limits) *mirror.Report {
	e.t.Helper()
	if lim.MaxDuration == 0 {
		lim.MaxDuration = 30 * time.Second
	}
	rep, err := m.Drain(context.Background(), "test", lim)
	if err != nil {
		e.t.Fatalf("drain: %v", err)
	}
	return rep
}

// mirrored returns the records stored in hub, rebuilt from their events, per
// Event Hubs partition in sequence order.
func (e *env) mirrored(hub string, partitions int) [][]mirror.Record {
	e.t.Helper()
	out := make([][]mirror.Record, partitions)
	for p := range partitions {
		for _, ev := range e.emu.Events(hub, p) {
			r, err := mirror.RecordFromEvent(ev.Body, ev.Properties)
			if err != nil {
				e.t.Fatalf("hub %s partition %d seq %d: %v", hub, p, ev.SequenceNumber, err)
			}
			out[p] = append(out[p], r)
		}
	}
	return out
}

// provenance identifies a record.
type provenance struct {
	topic     string
	partition int32
	offset    int64
}

func (p provenance) String() string { return fmt.Sprintf("%s/%d/%d", p.topic, p.partition, p.offset) }

// tally counts each mirrored record of hub by provenance.
func (e *env) tally(hub string, partitions int) map[provenance]int {
	counts := map[provenance]int{}
	for _, recs := range e.mirrored(hub, partitions) {
		for _, r := range recs {
			counts[provenance{r.Topic, r.Partition, r.Offset}]++
		}
	}
	return counts
}

// committed returns the group's committed offsets for topic's partitions.
func (e *env) committed(m *mirror.Mirror, topic string) map[int32]int64 {
	e.t.Helper()
	lag, err := m.Lag(context.Background(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range lag.Partitions {
		if p.Topic == topic {
			out[p.Partition] = p.Committed
		}
	}
	return out
}

func sortedKeys[V any](m map[provenance]V) []provenance {
	keys := make([]provenance, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// newSink returns an Event Hubs sink on the emulator.
func (e *env) newSink() *eventhubs.Sink {
	e.t.Helper()
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: e.emu.ConnectionString(), Logger: testLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sink.Close(context.Background()) })
	return sink
}

// newSource returns a Kafka source in the test's group.
func (e *env) newSource() *kafka.Source {
	e.t.Helper()
	src, err := kafka.NewSource(kafka.Options{Brokers: e.cluster.ListenAddrs(), Group: e.group, Logger: testLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = src.Close() })
	return src
}

// committedMetadata returns the metadata of the group's commit on topic/p.
func (e *env) committedMetadata(src *kafka.Source, topic string, p int32) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := src.Claim(ctx, []string{topic})
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = c.Release(ctx) }()
	return c.AssignedMetadata()[mirror.TopicPartition{Topic: topic, Partition: p}]
}

// commitAs commits offset with meta on topic/p as a member of the group.
func (e *env) commitAs(src *kafka.Source, topic string, p int32, offset int64, meta string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := src.Claim(ctx, []string{topic})
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = c.Release(ctx) }()
	if err := c.CommitWithMetadata(ctx, map[mirror.TopicPartition]mirror.CommitOffset{{Topic: topic, Partition: p}: {Offset: offset, Metadata: meta}}); err != nil {
		e.t.Fatal(err)
	}
}

// produceFresh produces with a new client (one that has no cached topic ids,
// for a topic just recreated).
func (e *env) produceFresh(recs ...*kgo.Record) {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}
