package verify_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/partitionkey"
	"github.com/ehmirror/ehmirror/scripts/produce/randmsg"
	"github.com/ehmirror/ehmirror/verify"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

const (
	testPartitions = 4
	testRecords    = 400
)

// fixture is a Kafka cluster holding randmsg's messages and an emulator whose
// hubs each scenario fills with a (possibly broken) copy of them.
type fixture struct {
	cluster kafkaconn.Config
	emu     *emulator.Server
	topics  []string
	records []mirror.Record // in (topic, partition, offset) order
}

func newFixture(t *testing.T, ctx context.Context, scenarios []string) *fixture {
	t.Helper()
	topics := randmsg.TopicNames("v", 2)
	kc, err := kfake.NewCluster(kfake.SeedTopics(testPartitions, topics...))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(kc.Close)
	f := &fixture{cluster: kafkaconn.Config{Brokers: kc.ListenAddrs()}, topics: topics}
	if _, err := randmsg.Produce(ctx, f.cluster, randmsg.Options{TopicBase: "v", Topics: 2, Count: testRecords, Keys: 7, KeyEvery: 2, Headers: true, HeaderEvery: 3, Seed: 42}); err != nil {
		t.Fatalf("producing: %v", err)
	}
	f.records = readAll(t, ctx, f.cluster, topics)
	if len(f.records) != testRecords {
		t.Fatalf("read back %d records, want %d", len(f.records), testRecords)
	}

	var hubs []emulator.HubConfig
	for _, s := range scenarios {
		for _, topic := range topics {
			hubs = append(hubs, emulator.HubConfig{Name: hubName(s, topic), PartitionCount: testPartitions})
		}
	}
	f.emu, err = emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Hubs: hubs})
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() { f.emu.Close() })
	return f
}

// hubName is the hub of topic prod.vN in a scenario: SCENARIO-vN.
func hubName(scenario, topic string) string {
	return scenario + "-" + strings.TrimPrefix(topic, "prod.")
}

func routes(t *testing.T, scenario string) []mirror.Route {
	t.Helper()
	r, err := mirror.ParseRoutes(`prod\.(v\d+)=>` + scenario + `-$1`)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readAll reads every record of topics with kafka-go, as mirror records.
func readAll(t *testing.T, ctx context.Context, cluster kafkaconn.Config, topics []string) []mirror.Record {
	t.Helper()
	client := &kafkago.Client{Addr: kafkago.TCP(cluster.Brokers...)}
	var out []mirror.Record
	for _, topic := range topics {
		for p := range testPartitions {
			res, err := client.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: {kafkago.LastOffsetOf(p)}}})
			if err != nil {
				t.Fatalf("list offsets: %v", err)
			}
			end := res.Topics[topic][0].LastOffset
			if end == 0 {
				continue
			}
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: cluster.Brokers, Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatalf("reading %s/%d: %v", topic, p, err)
				}
				rec := mirror.Record{Topic: topic, Partition: int32(p), Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Time.UnixMilli()}
				for _, h := range m.Headers {
					rec.Headers = append(rec.Headers, mirror.Header{Key: h.Key, Value: h.Value})
				}
				out = append(out, rec)
				if m.Offset == end-1 {
					break
				}
			}
			r.Close()
		}
	}
	return out
}

// placed is an event and the hub partition the mirror would send it to.
type placed struct {
	rec       mirror.Record
	event     mirror.Event
	partition int
}

// copyOf is what a correct mirror writes: every record as its event, keyed
// records on the service's hash partition, keyless ones on partition mod N,
// in Kafka order.
func (f *fixture) copyOf() []placed {
	var out []placed
	for _, r := range f.records {
		p := int(r.Partition) % testPartitions
		if r.Key != nil {
			p = partitionkey.Partition(string(r.Key), testPartitions)
		}
		out = append(out, placed{rec: r, event: mirror.EventFor(&r), partition: p})
	}
	return out
}

// publish sends the events to the scenario's hubs with the SDK's producer,
// each partition's events in the given order.
func (f *fixture) publish(t *testing.T, ctx context.Context, scenario string, events []placed) {
	t.Helper()
	for _, topic := range f.topics {
		hub := hubName(scenario, topic)
		pc, err := azeventhubs.NewProducerClientFromConnectionString(f.emu.ConnectionString(), hub, nil)
		if err != nil {
			t.Fatalf("producer: %v", err)
		}
		for p := range testPartitions {
			pid := fmt.Sprint(p)
			batch, err := pc.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &pid})
			if err != nil {
				t.Fatalf("batch: %v", err)
			}
			for _, e := range events {
				if e.rec.Topic != topic || e.partition != p {
					continue
				}
				id := e.event.MessageID
				if err := batch.AddEventData(&azeventhubs.EventData{Body: e.event.Body, Properties: e.event.Properties, MessageID: &id}, nil); err != nil {
					t.Fatalf("add: %v", err)
				}
			}
			if batch.NumEvents() > 0 {
				if err := pc.SendEventDataBatch(ctx, batch, nil); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
		}
		pc.Close(ctx)
	}
}

func (f *fixture) verify(t *testing.T, ctx context.Context, scenario string, mod func(*verify.Config)) *verify.Report {
	t.Helper()
	cfg := verify.Config{
		Kafka:       f.cluster,
		EventHubs:   verify.EventHubs{ConnectionString: f.emu.ConnectionString()},
		Routes:      routes(t, scenario),
		IdleTimeout: 10 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	rep, err := verify.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("verify %s: %v", scenario, err)
	}
	var b strings.Builder
	rep.WriteTable(&b)
	rep.WriteFindings(&b)
	t.Logf("%s:\n%s%s", scenario, b.String(), rep.Verdict())
	return rep
}

// sameKeyPair returns the indexes of two events of the same Kafka partition
// and key on the same hub partition, with no event of that key between them.
func sameKeyPair(t *testing.T, events []placed) (int, int) {
	t.Helper()
	type group struct {
		tp  mirror.TopicPartition
		key string
		hp  int
	}
	last := map[group]int{}
	for i, e := range events {
		if e.rec.Key == nil {
			continue
		}
		g := group{e.rec.TopicPartition(), string(e.rec.Key), e.partition}
		if j, ok := last[g]; ok {
			return j, i
		}
		last[g] = i
	}
	t.Fatal("no two events share a key")
	return 0, 0
}

// TestVerifierCatchesBrokenCopies seeds the emulator, through the SDK, with
// a correct copy of the Kafka topics and with copies that lose a record,
// duplicate one, swap two events of one key, or alter a body, a key or the
// order of a repeated header, and checks that the verifier passes the first
// and catches each of the others, naming the record.
func TestVerifierCatchesBrokenCopies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scenarios := []string{"correct", "missing", "duplicate", "reorder", "body", "key", "headers", "headerorder", "headerprops"}
	f := newFixture(t, ctx, scenarios)

	good := f.copyOf()
	victim := good[len(good)/2]
	at := fmt.Sprintf("%s/%d", victim.rec.TopicPartition(), victim.rec.Offset)

	f.publish(t, ctx, "correct", good)
	f.publish(t, ctx, "missing", slices.Delete(slices.Clone(good), len(good)/2, len(good)/2+1))
	f.publish(t, ctx, "duplicate", slices.Insert(slices.Clone(good), len(good)/2+1, victim))
	reordered := slices.Clone(good)
	i, j := sameKeyPair(t, reordered)
	reordered[i], reordered[j] = reordered[j], reordered[i]
	f.publish(t, ctx, "reorder", reordered)
	altered := slices.Clone(good)
	changed := victim
	changed.event.Body = []byte("This is not message number 1")
	altered[len(good)/2] = changed
	f.publish(t, ctx, "body", altered)
	// The key and header scenarios alter a record that has both.
	k := slices.IndexFunc(good, func(p placed) bool { return p.rec.Key != nil && len(p.rec.Headers) > 0 })
	if k < 0 {
		t.Fatal("no record has a key and headers")
	}
	withKeyAndHeaders := fmt.Sprintf("%s/%d", good[k].rec.TopicPartition(), good[k].rec.Offset)
	rekeyed := slices.Clone(good)
	rekeyed[k].event.Properties = maps.Clone(good[k].event.Properties)
	rekeyed[k].event.Properties[mirror.PropKey] = []byte("key-other")
	f.publish(t, ctx, "key", rekeyed)
	swapped := slices.Clone(good)
	props := maps.Clone(good[k].event.Properties)
	first, second := mirror.PropHeaderPrefix+"trace", mirror.PropHeaderPrefix+"trace#1"
	props[first], props[second] = props[second], props[first]
	swapped[k].event.Properties = props
	f.publish(t, ctx, "headers", swapped)
	// Different header names in another order, and header properties that
	// do not follow the mapping (a header the order does not list).
	reordHdr := slices.Clone(good)
	props = maps.Clone(good[k].event.Properties)
	order, _ := props[mirror.PropHeaderOrder].(string)
	names := strings.Split(order, "#")
	if len(names) < 2 || names[0] == names[1] {
		t.Fatalf("record %s: header order %q, want two different first names", withKeyAndHeaders, order)
	}
	names[0], names[1] = names[1], names[0]
	props[mirror.PropHeaderOrder] = strings.Join(names, "#")
	reordHdr[k].event.Properties = props
	f.publish(t, ctx, "headerorder", reordHdr)
	extraHdr := slices.Clone(good)
	props = maps.Clone(good[k].event.Properties)
	props[mirror.PropHeaderPrefix+"unlisted"] = []byte("x")
	extraHdr[k].event.Properties = props
	f.publish(t, ctx, "headerprops", extraHdr)

	t.Run("correct copy passes", func(t *testing.T) {
		rep := f.verify(t, ctx, "correct", func(c *verify.Config) { c.FailOnDuplicates = true })
		tot := rep.Total()
		if !rep.OK() || tot.KafkaRecords != testRecords || tot.Events != testRecords || tot.Missing+tot.Duplicates+tot.Mismatches()+tot.OrderViolations != 0 {
			t.Fatalf("want a clean pass over %d records, got %+v: %s", testRecords, tot, rep.Verdict())
		}
		if len(rep.Topics) != 2 || rep.Topics[0].Hub != "correct-v1" {
			t.Fatalf("topics %+v: want prod.v1 routed to correct-v1", rep.Topics)
		}
	})
	t.Run("missing record fails", func(t *testing.T) {
		rep := f.verify(t, ctx, "missing", nil)
		if tot := rep.Total(); rep.OK() || tot.Missing != 1 || tot.Events != testRecords-1 {
			t.Fatalf("want 1 missing and a failure, got %+v", tot)
		}
		if !findingMentions(rep, "missing: "+victim.rec.TopicPartition().String()+" offsets "+fmt.Sprint(victim.rec.Offset)) {
			t.Fatalf("findings %q do not name %s", rep.Findings, at)
		}
	})
	t.Run("missing record after the committed offset is pending", func(t *testing.T) {
		commit(t, ctx, f.cluster, "mirror-under-test", victim.rec.TopicPartition(), victim.rec.Offset)
		rep := f.verify(t, ctx, "missing", func(c *verify.Config) { c.Group = "mirror-under-test" })
		tot := rep.Total()
		if !rep.OK() || tot.Missing != 0 || tot.Pending != 1 {
			t.Fatalf("want 1 pending and a pass, got %+v: %s", tot, rep.Verdict())
		}
		rep = f.verify(t, ctx, "missing", func(c *verify.Config) { c.Group = "mirror-under-test"; c.FailOnPending = true })
		if rep.OK() {
			t.Fatal("want a failure with FailOnPending")
		}
	})
	t.Run("duplicated event is reported and fails on demand", func(t *testing.T) {
		rep := f.verify(t, ctx, "duplicate", nil)
		tot := rep.Total()
		if !rep.OK() || tot.Duplicates != 1 || tot.Events != testRecords+1 || tot.OrderViolations != 0 {
			t.Fatalf("want 1 duplicate that passes by default, got %+v: %s", tot, rep.Verdict())
		}
		if !findingMentions(rep, "duplicate: "+at+" seen 2 times") {
			t.Fatalf("findings %q do not name %s", rep.Findings, at)
		}
		rep = f.verify(t, ctx, "duplicate", func(c *verify.Config) { c.FailOnDuplicates = true })
		if rep.OK() {
			t.Fatal("want a failure with FailOnDuplicates")
		}
	})
	t.Run("reordered same-key pair fails", func(t *testing.T) {
		rep := f.verify(t, ctx, "reorder", nil)
		tot := rep.Total()
		if rep.OK() || tot.OrderViolations != 1 || tot.Missing != 0 || tot.Duplicates != 0 {
			t.Fatalf("want 1 order violation, got %+v", tot)
		}
		want := fmt.Sprintf("out of order: %s/%d", good[i].rec.TopicPartition(), good[i].rec.Offset)
		if !findingMentions(rep, want) {
			t.Fatalf("findings %q do not contain %q", rep.Findings, want)
		}
		// Round-robin promises no order: the same copy passes.
		if rep := f.verify(t, ctx, "reorder", func(c *verify.Config) { c.Partitioning = mirror.PartitionRoundRobin }); !rep.OK() {
			t.Fatalf("round-robin: %s", rep.Verdict())
		}
	})
	t.Run("body mismatch fails", func(t *testing.T) {
		rep := f.verify(t, ctx, "body", nil)
		tot := rep.Total()
		if rep.OK() || tot.BodyMismatches != 1 || tot.KeyMismatches != 0 || tot.HeaderMismatches != 0 || tot.Missing != 0 {
			t.Fatalf("want 1 body mismatch, got %+v", tot)
		}
		if !findingMentions(rep, "body mismatch: "+at) {
			t.Fatalf("findings %q do not name %s", rep.Findings, at)
		}
	})
	t.Run("key mismatch fails", func(t *testing.T) {
		rep := f.verify(t, ctx, "key", nil)
		tot := rep.Total()
		if rep.OK() || tot.KeyMismatches != 1 || tot.BodyMismatches != 0 || tot.HeaderMismatches != 0 {
			t.Fatalf("want 1 key mismatch, got %+v", tot)
		}
		if !findingMentions(rep, "key mismatch: "+withKeyAndHeaders) {
			t.Fatalf("findings %q do not name %s", rep.Findings, withKeyAndHeaders)
		}
	})
	t.Run("repeated headers out of order fail", func(t *testing.T) {
		rep := f.verify(t, ctx, "headers", nil)
		tot := rep.Total()
		if rep.OK() || tot.HeaderMismatches != 1 || tot.BodyMismatches != 0 || tot.KeyMismatches != 0 {
			t.Fatalf("want 1 header mismatch, got %+v", tot)
		}
		if !findingMentions(rep, "header mismatch: "+withKeyAndHeaders) {
			t.Fatalf("findings %q do not name %s", rep.Findings, withKeyAndHeaders)
		}
	})
	t.Run("headers of different names out of order fail", func(t *testing.T) {
		for _, scenario := range []string{"headerorder", "headerprops"} {
			rep := f.verify(t, ctx, scenario, nil)
			tot := rep.Total()
			if rep.OK() || tot.HeaderMismatches != 1 || tot.BodyMismatches != 0 || tot.KeyMismatches != 0 || tot.Missing != 0 {
				t.Fatalf("%s: want 1 header mismatch, got %+v", scenario, tot)
			}
			if !findingMentions(rep, "header mismatch: "+withKeyAndHeaders) {
				t.Fatalf("%s: findings %q do not name %s", scenario, rep.Findings, withKeyAndHeaders)
			}
		}
	})
	t.Run("missing hub fails", func(t *testing.T) {
		rep := f.verify(t, ctx, "nosuchhub", nil)
		if tot := rep.Total(); rep.OK() || tot.Missing != testRecords || rep.Hubs[0].Error == "" {
			t.Fatalf("want every record missing and a hub error, got %+v %+v", tot, rep.Hubs)
		}
	})
}

func findingMentions(rep *verify.Report, s string) bool {
	return slices.ContainsFunc(rep.Findings, func(f string) bool { return strings.Contains(f, s) })
}

// commit stores offset as group's committed offset of tp, as a simple
// consumer (no member) would.
func commit(t *testing.T, ctx context.Context, cluster kafkaconn.Config, group string, tp mirror.TopicPartition, offset int64) {
	t.Helper()
	client := &kafkago.Client{Addr: kafkago.TCP(cluster.Brokers...)}
	res, err := client.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{
		GroupID: group, GenerationID: -1,
		Topics: map[string][]kafkago.OffsetCommit{tp.Topic: {{Partition: int(tp.Partition), Offset: offset}}},
	})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	for _, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				t.Fatalf("commit: %v", p.Error)
			}
		}
	}
}
