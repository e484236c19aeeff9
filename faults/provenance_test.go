package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/partitionkey"
)

// producerConfig shapes the records a scenario produces. Every value is
// unique (Tag/sequence), so each record can be told apart even across topic
// incarnations; two records in three have one of Keys keys, one in five
// carries headers (one of them repeated).
type producerConfig struct {
	Topics    []string      // default: the environment's topics
	Tag       string        // value prefix; default "r"
	Batch     int           // records per tick; default 10
	Every     time.Duration // tick; default 10 ms
	Keys      int           // distinct keys; default 16
	ValueSize int           // value bytes; default 64
	// Shape, when set, may change a record before it is produced.
	Shape func(seq int64, r *kgo.Record)
}

func (c producerConfig) withDefaults(e *env) producerConfig {
	if len(c.Topics) == 0 {
		c.Topics = e.cfg.Topics
	}
	if c.Tag == "" {
		c.Tag = "r"
	}
	if c.Batch <= 0 {
		c.Batch = 10
	}
	if c.Every <= 0 {
		c.Every = 10 * time.Millisecond
	}
	if c.Keys <= 0 {
		c.Keys = 16
	}
	if c.ValueSize <= 0 {
		c.ValueSize = 64
	}
	return c
}

// producer writes records continuously, like the applications in front of
// the mirror, through franz-go (idempotent, acks=all) until stopped.
type producer struct {
	e      *env
	cfg    producerConfig
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	// gate is held while a batch is produced; pause holds it.
	gate sync.Mutex

	seq   atomic.Int64
	acked atomic.Int64
	errs  atomic.Int64
}

// pause waits for the batch being produced and stops producing until
// resume.
func (p *producer) pause() { p.gate.Lock() }

// resume undoes pause.
func (p *producer) resume() { p.gate.Unlock() }

// newProducer returns a producer that has not started.
func (e *env) newProducer(cfg producerConfig) *producer {
	e.t.Helper()
	p := &producer{e: e, cfg: cfg.withDefaults(e), done: make(chan struct{})}
	p.client = e.producerClient()
	return p
}

// reconnect replaces the producer's client; call it while paused. A
// recreated topic needs it: franz-go keeps the deleted topic's id.
func (p *producer) reconnect() { p.client = p.e.producerClient() }

// producerClient returns a franz-go producing client, closed with the test.
func (e *env) producerClient() *kgo.Client {
	e.t.Helper()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(e.brokers()...),
		kgo.ProducerLinger(time.Millisecond),
		kgo.ProducerBatchMaxBytes(4 << 20),
		kgo.MaxBufferedRecords(10_000),
		kgo.WithLogger(nil),
	}, e.cfg.ProducerOpts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		e.t.Fatalf("producer: %v", err)
	}
	e.t.Cleanup(client.Close)
	return client
}

// startProducer starts producing continuously.
func (e *env) startProducer(cfg producerConfig) *producer {
	p := e.newProducer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go p.run(ctx)
	e.t.Cleanup(p.stop)
	return p
}

func (p *producer) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.gate.Lock()
		p.produce(ctx, p.cfg.Batch)
		p.gate.Unlock()
	}
}

// produce writes n records synchronously (it blocks while Kafka is down).
func (p *producer) produce(ctx context.Context, n int) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = p.record(p.seq.Add(1) - 1)
	}
	for _, r := range p.client.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			p.errs.Add(1)
			continue
		}
		p.acked.Add(1)
	}
}

func (p *producer) record(seq int64) *kgo.Record {
	c := p.cfg
	value := fmt.Appendf(nil, "%s/%08d/", c.Tag, seq)
	if pad := c.ValueSize - len(value); pad > 0 {
		value = append(value, bytes.Repeat([]byte{'x'}, pad)...)
	}
	r := &kgo.Record{Topic: c.Topics[int(seq)%len(c.Topics)], Value: value}
	if seq%3 != 0 {
		r.Key = fmt.Appendf(nil, "key-%02d", (seq*7)%int64(c.Keys))
	}
	if seq%5 == 0 {
		r.Headers = []kgo.RecordHeader{{Key: "seq", Value: fmt.Append(nil, seq)}, {Key: "dup", Value: []byte("a")}, {Key: "dup", Value: []byte{}}}
	}
	if c.Shape != nil {
		c.Shape(seq, r)
	}
	return r
}

// stop stops a started producer and waits for it; safe to call twice.
func (p *producer) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
}

// kafkaRecord is one record as Kafka holds it, with the topic incarnation
// (Epoch) it belongs to.
type kafkaRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
	Time      time.Time
	Epoch     int
}

func (r kafkaRecord) tp() mirror.TopicPartition {
	return mirror.TopicPartition{Topic: r.Topic, Partition: r.Partition}
}

func (r kafkaRecord) String() string {
	return fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
}

// readKafka reads back every record the broker holds for topics, from each
// partition's log start to its high watermark, with an independent
// franz-go client: the ground truth the mirror is checked against.
func (e *env) readKafka(ctx context.Context, topics []string, epoch int) ([]kafkaRecord, error) {
	type bounds struct{ start, end int64 }
	want := map[mirror.TopicPartition]bounds{}
	if !e.withKafka(func(c *kfake.Cluster) {
		for _, topic := range topics {
			for _, pi := range c.PartitionInfos(topic) {
				want[mirror.TopicPartition{Topic: topic, Partition: pi.Partition}] = bounds{pi.LogStartOffset, pi.HighWatermark}
			}
		}
	}) {
		return nil, fmt.Errorf("kafka is down")
	}
	offsets := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for tp, b := range want {
		if b.end <= b.start {
			continue
		}
		if offsets[tp.Topic] == nil {
			offsets[tp.Topic] = map[int32]kgo.Offset{}
		}
		offsets[tp.Topic][tp.Partition] = kgo.NewOffset().At(b.start)
		remaining++
	}
	if remaining == 0 {
		return nil, nil
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(e.brokers()...), kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(100 * time.Millisecond), kgo.WithLogger(nil)}, e.cfg.ProducerOpts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("reader: %w", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	next := map[mirror.TopicPartition]int64{}
	var out []kafkaRecord
	for remaining > 0 {
		fs := client.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading Kafka back: %w (%d partitions unfinished)", ctx.Err(), remaining)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) { ferr = fmt.Errorf("%s/%d: %w", topic, p, err) })
		if ferr != nil {
			return nil, fmt.Errorf("reading Kafka back: %w", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			tp := mirror.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			b := want[tp]
			if r.Offset >= b.end || r.Offset < next[tp] {
				return
			}
			out = append(out, kafkaRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: r.Headers, Time: r.Timestamp, Epoch: epoch})
			next[tp] = r.Offset + 1
			if next[tp] >= b.end {
				remaining--
			}
		})
	}
	return out, nil
}

// identity tells records apart: provenance plus the (unique) value, which
// separates incarnations of a recreated topic.
type identity struct {
	topic     string
	partition int32
	offset    int64
	value     string
}

func idOf(topic string, partition int32, offset int64, value []byte) identity {
	return identity{topic, partition, offset, string(value)}
}

// orderGroup is a sequence whose order the mirror keeps within one Event
// Hubs partition: the records of one Kafka partition (one topic
// incarnation) with one key, or without a key.
type orderGroup struct {
	hub       string
	ehPart    int
	topic     string
	partition int32
	epoch     int
	keyed     bool
	key       string
}

// expectation is what a scenario expects to find in Event Hubs.
type expectation struct {
	// Records are Kafka's records (every incarnation).
	Records []kafkaRecord
	// Explain returns why a record may be absent from Event Hubs (a
	// reported gap, a skipped or held oversized record, ...), or "" when
	// its absence is a loss.
	Explain func(kafkaRecord) string
	// Routes are the mirror's routes; default: hub named like the topic.
	Routes []mirror.Route
	// Unrouted lists topics whose events must not appear anywhere.
	Unrouted []string
}

// verdict is what the provenance check found.
type verdict struct {
	Produced   int64
	Mirrored   int64
	Lost       int64
	Explained  int64
	Duplicates int64
	// MaxCopies is the most copies of one record.
	MaxCopies int
	// Unexpected counts events that match no Kafka record; Mismatched
	// counts events whose key, headers, timestamp or partition differ from
	// the record's.
	Unexpected      int64
	Mismatched      int64
	OrderViolations int64
	ExplainedBy     map[string]int64
	DuplicatesByTP  map[mirror.TopicPartition]int64
	Examples        []string
}

func (v *verdict) example(format string, args ...any) {
	if len(v.Examples) < 20 {
		v.Examples = append(v.Examples, fmt.Sprintf(format, args...))
	}
}

// verify reads every event of every hub and checks the provenance
// properties against exp:
//
//   - every Kafka record is in Event Hubs at least once, or its absence is
//     explained (Lost counts the rest);
//   - every event is a Kafka record, byte for byte (body, key, headers,
//     timestamp), in the Event Hubs partition its key selects;
//   - duplicates are counted (copies beyond the first);
//   - order: within each Event Hubs partition, for each Kafka partition and
//     key (keyless records form one group per Kafka partition), the events
//     left after dropping every copy of a record already seen (first
//     occurrence kept) have strictly increasing Kafka offsets.
func (e *env) verify(exp expectation) verdict {
	e.t.Helper()
	v := verdict{ExplainedBy: map[string]int64{}, DuplicatesByTP: map[mirror.TopicPartition]int64{}}
	router := mirror.NewRouter(exp.Routes)
	type state struct {
		rec    *kafkaRecord
		copies int
	}
	byID := make(map[identity]*state, len(exp.Records))
	for i := range exp.Records {
		r := &exp.Records[i]
		id := idOf(r.Topic, r.Partition, r.Offset, r.Value)
		if _, dup := byID[id]; dup {
			e.t.Fatalf("Kafka holds %s twice with the same value: the test's values are not unique", r)
		}
		byID[id] = &state{rec: r}
	}
	v.Produced = int64(len(exp.Records))

	hubs := make([]string, 0, len(e.hubs))
	for h := range e.hubs {
		hubs = append(hubs, h)
	}
	sort.Strings(hubs)
	for _, hub := range hubs {
		n := e.hubs[hub]
		for part := range n {
			last := map[orderGroup]int64{}
			for _, ev := range e.emu.Events(hub, part) {
				r, err := mirror.RecordFromEvent(ev.Body, ev.Properties)
				if err != nil {
					v.Unexpected++
					v.example("event %s/%d/%d is not a mirrored record: %v", hub, part, ev.SequenceNumber, err)
					continue
				}
				st := byID[idOf(r.Topic, r.Partition, r.Offset, r.Value)]
				if st == nil {
					v.Unexpected++
					v.example("event %s/%d/%d names %s/%d/%d with a value Kafka does not hold there (%.40q)", hub, part, ev.SequenceNumber, r.Topic, r.Partition, r.Offset, r.Value)
					continue
				}
				k := st.rec
				st.copies++
				if st.copies > 1 {
					v.example("copy %d of %s at %s/%d sequence %d", st.copies, k, hub, part, ev.SequenceNumber)
					v.Duplicates++
					v.DuplicatesByTP[k.tp()]++
					v.MaxCopies = max(v.MaxCopies, st.copies)
					continue // order is judged on first occurrences
				}
				if why := mismatch(k, r, hub, part, n, router); why != "" {
					v.Mismatched++
					v.example("event %s/%d/%d (%s): %s", hub, part, ev.SequenceNumber, k, why)
				}
				g := orderGroup{hub: hub, ehPart: part, topic: k.Topic, partition: k.Partition, epoch: k.Epoch, keyed: k.Key != nil, key: string(k.Key)}
				if prev, ok := last[g]; ok && k.Offset < prev {
					v.OrderViolations++
					v.example("order: %s (key %q) first appears in %s/%d at sequence %d, after offset %d", k, k.Key, hub, part, ev.SequenceNumber, prev)
					continue
				}
				last[g] = k.Offset
			}
		}
	}
	v.MaxCopies = max(v.MaxCopies, 1)
	for i := range exp.Records {
		r := &exp.Records[i]
		st := byID[idOf(r.Topic, r.Partition, r.Offset, r.Value)]
		if st.copies > 0 {
			v.Mirrored++
			continue
		}
		if exp.Explain != nil {
			if why := exp.Explain(*r); why != "" {
				v.Explained++
				v.ExplainedBy[why]++
				continue
			}
		}
		v.Lost++
		v.example("lost: %s (epoch %d, key %q, value %.30q) is in Kafka but not in Event Hubs", r, r.Epoch, r.Key, r.Value)
	}
	return v
}

// mismatch compares an event's record with Kafka's and checks its hub and
// Event Hubs partition (hash partitioning: the service's hash of the key;
// keyless records: Kafka partition mod N).
func mismatch(k *kafkaRecord, got mirror.Record, hub string, part, n int, router *mirror.Router) string {
	var why []string
	if want := router.Hub(k.Topic); !strings.EqualFold(want, hub) {
		why = append(why, "in hub "+hub+", routed to "+want)
	}
	if !bytes.Equal(k.Key, got.Key) || (k.Key == nil) != (got.Key == nil) {
		why = append(why, fmt.Sprintf("key %q, want %q", got.Key, k.Key))
	}
	if got.Timestamp != k.Time.UnixMilli() {
		why = append(why, fmt.Sprintf("timestamp %v, want %v", got.Time(), k.Time))
	}
	if !sameHeaders(k.Headers, got.Headers) {
		why = append(why, fmt.Sprintf("headers %v, want %v", got.Headers, k.Headers))
	}
	want := int(k.Partition) % n
	if k.Key != nil {
		want = partitionkey.Partition(string(k.Key), n)
	}
	if part != want {
		why = append(why, fmt.Sprintf("in partition %d, want %d", part, want))
	}
	return strings.Join(why, "; ")
}

// sameHeaders compares headers as RecordFromEvent returns them: names,
// values and order as in Kafka.
func sameHeaders(want []kgo.RecordHeader, got []mirror.Header) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i].Key != got[i].Key || !bytes.Equal(want[i].Value, got[i].Value) {
			return false
		}
	}
	return true
}

// figures collects a scenario's figures and writes its row when the test
// ends (with its pass or fail status).
type figures struct {
	row Row
	mu  sync.Mutex
}

// newFigures starts the row of a scenario; it is written to
// EHMIRROR_FAULTS_REPORT when the test ends.
func newFigures(t testing.TB, scenario, name string) *figures {
	f := &figures{row: Row{Scenario: scenario, Name: name, Test: t.Name()}}
	start := time.Now()
	rec := NewRecorder(os.Getenv(ReportEnv))
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.row.Time, f.row.Duration, f.row.Passed = time.Now().UTC(), time.Since(start), !t.Failed()
		if err := rec.Record(f.row); err != nil {
			t.Errorf("writing figures: %v", err)
		}
		t.Logf("figures: %+v", f.row)
	})
	return f
}

func (f *figures) note(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := fmt.Sprintf(format, args...)
	if f.row.Notes != "" {
		f.row.Notes += "; "
	}
	f.row.Notes += n
}

// assert checks a verdict against the scenario's duplicate bound and the
// monitor's regressions, and fills the row.
func (e *env) assert(f *figures, v verdict) {
	e.t.Helper()
	bound, faulted := e.ledger.bound()
	samples, regressions := e.mon.result()
	f.mu.Lock()
	f.row.Produced, f.row.Mirrored, f.row.Lost, f.row.Explained = v.Produced, v.Mirrored, v.Lost, v.Explained
	f.row.Duplicates, f.row.DuplicateBound, f.row.OrderViolations = v.Duplicates, bound, v.OrderViolations
	f.row.OffsetRegressions, f.row.OffsetSamples = int64(len(regressions)), samples
	f.row.Faults, f.row.Drains = int(e.injected.Load()), int(e.drains.Load())
	f.mu.Unlock()
	if len(v.ExplainedBy) > 0 {
		f.note("not mirrored, as reported: %v", v.ExplainedBy)
	}
	e.t.Logf("produced %d, mirrored %d, lost %d, explained %d %v, duplicates %d (bound %d over %d faulted drains, max copies %d), order violations %d, unexpected %d, mismatched %d, offset samples %d, regressions %d",
		v.Produced, v.Mirrored, v.Lost, v.Explained, v.ExplainedBy, v.Duplicates, bound, faulted, v.MaxCopies, v.OrderViolations, v.Unexpected, v.Mismatched, samples, len(regressions))
	for _, ex := range v.Examples {
		e.t.Log(ex)
	}
	if v.Produced == 0 {
		e.t.Error("nothing was produced")
	}
	if v.Lost != 0 {
		e.t.Errorf("%d records lost", v.Lost)
		e.diagnose()
	}
	if v.Duplicates > bound {
		e.t.Errorf("%d duplicates exceed the bound %d (records in flight during %d faulted drains)", v.Duplicates, bound, faulted)
	}
	if v.OrderViolations != 0 {
		e.t.Errorf("%d per-key order violations", v.OrderViolations)
	}
	if v.Unexpected != 0 || v.Mismatched != 0 {
		e.t.Errorf("%d unexpected and %d mismatched events", v.Unexpected, v.Mismatched)
	}
	for i, r := range regressions {
		if i == 10 {
			e.t.Errorf("... %d regressions in all", len(regressions))
			break
		}
		e.t.Errorf("committed offset regressed: %s", r)
	}
	if samples < 10 {
		e.t.Errorf("only %d committed-offset samples", samples)
	}
}
