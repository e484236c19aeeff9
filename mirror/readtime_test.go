package mirror_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// readTimeDrain produces n records on each partition of prod.test1 (in one
// Kafka batch per partition, or one batch per record when single) and
// drains that topic once with opts.
func readTimeDrain(t *testing.T, e *env, n int, single bool, opts mirror.Options) *mirror.Report {
	t.Helper()
	const topic = "prod.test1"
	var recs []*kgo.Record
	for i := range n {
		for p := range int32(4) {
			r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "v%d-%d", p, i)}
			if single {
				e.produce(r)
			} else {
				recs = append(recs, r)
			}
		}
	}
	e.produce(recs...)
	opts.Topics = mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test1$`)}
	rep := e.drain(e.newMirror(opts), mirror.Limits{MaxDuration: time.Minute})
	if rep.Failed() || rep.Records != int64(4*n) {
		t.Fatalf("drain: %s", strings.Join(rep.Lines(), "\n"))
	}
	rt := rep.ReadTime
	if rt.Total <= 0 || rt.Kafka+rt.InFlight+rt.Senders > rt.Total {
		t.Fatalf("read time %+v: waits beyond the readers' time", rt)
	}
	if !strings.Contains(rep.Summary(), rt.String()) {
		t.Errorf("the summary does not say where the readers waited: %s", rep.Summary())
	}
	t.Log(rt)
	return rep
}

// A Kafka 30 ms away whose every fetch returns one record: the readers wait
// for Kafka most of their time, and the drain says so.
func TestReadTimeNamesAFarKafka(t *testing.T) {
	e := newEnv(t)
	slowFetches(e, 30*time.Millisecond)
	rt := readTimeDrain(t, e, 40, true, mirror.Options{FetchBytes: 1}).ReadTime
	if rt.Kafka < rt.Total/2 || rt.InFlight > rt.Total/10 {
		t.Errorf("%s: want most of it waiting for Kafka", rt)
	}
}

// An in-flight bound of about one event and acknowledgements that take
// 20 ms: the readers wait for the bound most of their time, and the drain
// says so.
func TestReadTimeNamesAFullInFlightBound(t *testing.T) {
	e := newEnv(t)
	e.emu.Faults().DelayDispositions(20 * time.Millisecond)
	rt := readTimeDrain(t, e, 40, false, mirror.Options{InFlightBytes: 1 << 10}).ReadTime
	if rt.InFlight < rt.Total/2 || rt.Kafka > rt.Total/4 {
		t.Errorf("%s: want most of it waiting for the in-flight bound", rt)
	}
}

// Event Hubs taking 100 ms to store each batch, with room in the bound and
// 10,000 records a partition (several of a sender's queues): the senders'
// queues fill and the readers wait for them most of their time, and the
// drain says so.
func TestReadTimeNamesSlowSenders(t *testing.T) {
	e := newEnv(t)
	e.emu.Faults().DelayIngest(100 * time.Millisecond)
	rt := readTimeDrain(t, e, 10000, false, mirror.Options{}).ReadTime
	if rt.Senders < rt.Total/2 || rt.InFlight > rt.Total/10 {
		t.Errorf("%s: want most of it waiting for the senders", rt)
	}
}

// A drain with deduplication that follows an unclean end also reads the
// hubs' tails back: its read time is still its readers' own (at most the
// drain's length per partition), the waits add up within it, and the
// summary says where they were.
func TestReadTimeAfterAnUncleanEndWithDeduplication(t *testing.T) {
	e := newEnv(t)
	gate := newCommitGate(e)
	const topic = "prod.test1"
	e.produceKeyed(topic, 4, 50, "a")
	opts := mirror.Options{Deduplicate: true, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test1$`)}}
	gate.cut()
	if rep := e.drain(e.newMirror(opts), mirror.Limits{}); rep.Records != 200 {
		t.Fatalf("first drain sent %d records, want 200: %v", rep.Records, rep.Lines())
	}
	gate.open()
	e.produceKeyed(topic, 4, 50, "b")
	rep := e.drain(e.newMirror(opts), mirror.Limits{MaxDuration: time.Minute})
	if rep.Failed() || rep.Records != 200 || alreadyMirrored(rep) != 200 {
		t.Fatalf("second drain: %d records sent, %d found in the hubs, want 200 and 200: %s", rep.Records, alreadyMirrored(rep), strings.Join(rep.Lines(), "\n"))
	}
	rt := rep.ReadTime
	if rt.Total <= 0 || rt.Kafka+rt.InFlight+rt.Senders > rt.Total || rt.Total > time.Duration(len(rep.Partitions))*rep.Duration {
		t.Fatalf("read time %+v over a drain of %s: waits beyond the readers' time", rt, rep.Duration)
	}
	if !strings.Contains(rep.Summary(), rt.String()) {
		t.Errorf("the summary does not say where the readers waited: %s", rep.Summary())
	}
	exactlyOnce(t, e, topic, map[string]int64{topic: 100})
}
