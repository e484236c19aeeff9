package mirror

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMurmur2MatchesKafka(t *testing.T) {
	// Vectors from Kafka's UtilsTest.testMurmur2.
	for key, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := murmur2([]byte(key)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestPartitioner(t *testing.T) {
	keyed := &Record{Partition: 7, Key: []byte("partition-key-xyz")}
	keyless := &Record{Partition: 7}
	hash := &partitioner{strategy: PartitionByHash, n: 32}
	if got := hash.index(keyed); got != 12 { // the reference's worked example: hash -24908 -> 12
		t.Errorf("hash placement = %d, want 12", got)
	}
	if got := hash.index(keyless); got != 7 {
		t.Errorf("keyless records keep their Kafka partition mod N: got %d", got)
	}
	murmur := &partitioner{strategy: PartitionByKafkaMurmur2, n: 4}
	if got, want := murmur.index(&Record{Key: []byte("21")}), int(toPositive(-973932308)%4); got != want {
		t.Errorf("murmur2 placement = %d, want %d", got, want)
	}
	preserve := &partitioner{strategy: PartitionPreserve, n: 4}
	if got := preserve.index(keyed); got != 3 {
		t.Errorf("preserve 7 mod 4 = %d", got)
	}
	rr := &partitioner{strategy: PartitionRoundRobin, n: 3}
	seen := map[int]bool{}
	for range 3 {
		seen[rr.index(keyed)] = true
	}
	if len(seen) != 3 {
		t.Errorf("round-robin used %d partitions of 3", len(seen))
	}
}

func TestRoutes(t *testing.T) {
	routes, err := ParseRoutes(`^prod\.(.*)$=>mirror-$1; legacy\..*=>legacy-all`)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRouter(routes)
	for topic, want := range map[string]string{
		"prod.test1":  "mirror-test1",
		"legacy.a":    "legacy-all",
		"legacy.b":    "legacy-all",
		"other.topic": "other.topic",
		"xlegacy.a":   "xlegacy.a",
	} {
		if got := r.Hub(topic); got != want {
			t.Errorf("Hub(%q) = %q, want %q", topic, got, want)
		}
	}
	for _, bad := range []string{"noarrow", "(=>x", "a=>", "=>b"} {
		if _, err := ParseRoutes(bad); err == nil {
			t.Errorf("ParseRoutes(%q) accepted", bad)
		}
	}
}

func TestTopicFilter(t *testing.T) {
	f, err := CompileTopicFilter(`prod\..*`, `prod\.secret.*`)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{
		"prod.test1": true, "prod.secret1": false, "dev.test1": false, "__consumer_offsets": false, "xprod.test1": false,
	} {
		if f.Match(topic) != want {
			t.Errorf("Match(%q) = %v", topic, !want)
		}
	}
	all, _ := CompileTopicFilter("", "")
	if !all.Match("anything") || all.Match("__transaction_state") {
		t.Error("empty filter must match every non-internal topic")
	}
}

func TestEventForMapsEverything(t *testing.T) {
	ts := time.UnixMilli(1700000000123)
	r := &Record{Topic: "prod.test1", Partition: 3, Offset: 42, Key: []byte{0, 1, 2}, Value: nil, Timestamp: ts.UnixMilli(),
		Headers: []Header{{"h", []byte("1")}, {"h", []byte("2")}, {"bin", []byte{0xff, 0}}, {"h", nil}}}
	ev := EventFor(r)
	if ev.MessageID != "prod.test1/3/42" {
		t.Errorf("message id %q", ev.MessageID)
	}
	p := ev.Properties
	if p[PropTopic] != "prod.test1" || p[PropPartition] != int64(3) || p[PropOffset] != int64(42) || !p[PropTimestamp].(time.Time).Equal(ts) {
		t.Errorf("provenance wrong: %v", p)
	}
	if !bytes.Equal(p[PropKey].([]byte), []byte{0, 1, 2}) || p[PropTombstone] != true {
		t.Errorf("key/tombstone wrong: %v", p)
	}
	if string(p["kafka.header.h"].([]byte)) != "1" || string(p["kafka.header.h#1"].([]byte)) != "2" || p["kafka.header.h#2"].([]byte) != nil {
		t.Errorf("repeated headers wrong: %v", p)
	}
	back, err := RecordFromEvent(ev.Body, p)
	if err != nil {
		t.Fatal(err)
	}
	// Headers come back in their Kafka order.
	if back.Topic != r.Topic || back.Offset != r.Offset || back.Value != nil || len(back.Headers) != 4 ||
		string(back.Headers[0].Value) != "1" || string(back.Headers[1].Value) != "2" || back.Headers[2].Key != "bin" || back.Headers[3].Value != nil {
		t.Errorf("round trip wrong: %+v", back)
	}
}

func TestTrackerCommitsOnlyAcknowledgedPrefix(t *testing.T) {
	ps := newPartitionState(TopicPartition{"t", 0}, "t", NoOffset)
	ps.begin(10, 20)
	for o := int64(10); o < 15; o++ {
		ps.add(&Record{Offset: o, Value: []byte{byte(o)}})
	}
	ps.confirm(ps.readMark())
	point := ps.commitPoint
	if got := point(); got != 10 {
		t.Fatalf("nothing acked: commit point %d, want 10", got)
	}
	ack := func(offsets ...int64) { ps.ack(batchedAt(ps, offsets...), time.Now()) }
	ack(11, 12)
	if got := point(); got != 10 {
		t.Fatalf("10 unacked: commit point %d, want 10", got)
	}
	ack(10)
	if got := point(); got != 13 {
		t.Fatalf("10..12 acked: commit point %d, want 13", got)
	}
	ps.skip(13)
	ack(14)
	ps.advance(17) // the fetch skipped control records up to 17
	if got := point(); got != 15 {
		t.Fatalf("all done, identity confirmed up to 15: commit point %d, want 15", got)
	}
	ps.confirm(ps.readMark())
	if got := point(); got != 17 {
		t.Fatalf("all done: commit point %d, want 17", got)
	}
	ps.add(&Record{Offset: 17})
	ps.fail(errTest)
	if got := point(); got != 17 {
		t.Fatalf("failed record: commit point %d, want 17", got)
	}
}

var errTest = bytes.ErrTooLarge

func TestCommitMetadataRoundTrip(t *testing.T) {
	m := commitMeta{TopicID: "0123456789abcdef0123456789abcdef"}
	s, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if s != "ehmirror/2 tid=0123456789abcdef0123456789abcdef" {
		t.Errorf("encoded %q", s)
	}
	if got, ok := parseCommitMeta(s); !ok || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, ok, m)
	}
	// A later version with more fields still yields the topic id.
	if got, ok := parseCommitMeta("ehmirror/3 seq=17 tid=ab x=y"); !ok || got.TopicID != "ab" {
		t.Errorf("forward compatible: %+v %v", got, ok)
	}
	// Version 1 (fingerprints) is understood as carrying no id.
	if got, ok := parseCommitMeta("ehmirror/1 last=199 ts=1 size=1 crc=00000000"); !ok || got.TopicID != "" {
		t.Errorf("version 1: %+v %v", got, ok)
	}
	for _, foreign := range []string{"", "some other client", "ehmirror/x"} {
		if _, ok := parseCommitMeta(foreign); ok {
			t.Errorf("parsed foreign metadata %q", foreign)
		}
	}
	if _, err := (commitMeta{TopicID: strings.Repeat("a", maxCommitMetadata)}).encode(); err == nil {
		t.Error("oversized metadata encoded")
	}
}

// TestHoldSkipsPartitionsReleasedAfterTheClaim: drains of one process share
// a group generation, so a drain must not take a partition another drain
// released after this drain read its committed offsets (it would start
// below the other's final commit and commit lower): it is busy for this
// drain and taken by the next.
func TestHoldSkipsPartitionsReleasedAfterTheClaim(t *testing.T) {
	m := &Mirror{held: map[TopicPartition]string{}, releasedAt: map[TopicPartition]uint64{}}
	p0, p1, p2 := TopicPartition{"t", 0}, TopicPartition{"t", 1}, TopicPartition{"t", 2}
	markA := m.holdMark()
	if got, busy := m.hold("a", []TopicPartition{p0, p1}, markA); len(got) != 2 || len(busy) != 0 {
		t.Fatalf("a: got %v busy %v", got, busy)
	}
	markB := m.holdMark() // b reads its committed offsets while a holds p0, p1
	m.release([]TopicPartition{p0, p1})
	got, busy := m.hold("b", []TopicPartition{p0, p1, p2}, markB)
	if len(got) != 1 || got[0] != p2 || len(busy) != 2 {
		t.Fatalf("b: got %v busy %v, want p2 and p0, p1 busy", got, busy)
	}
	m.release(got)
	if got, busy := m.hold("c", []TopicPartition{p0, p1, p2}, m.holdMark()); len(got) != 3 || len(busy) != 0 {
		t.Fatalf("next drain: got %v busy %v, want all", got, busy)
	}
}

// FuzzCommitMeta: metadata read back from Kafka is foreign input; parsing
// never panics, and what encode writes parses back to the same value.
func FuzzCommitMeta(f *testing.F) {
	for _, s := range []string{"", "ehmirror/2", "ehmirror/2 tid=0123456789abcdef0123456789abcdef", "ehmirror/1 last=1 ts=2 size=3 crc=0", "ehmirror/9 tid=a seq=1", "ehmirror/ ", "ehmirror/-1 tid=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := parseCommitMeta(s)
		if !ok {
			return
		}
		enc, err := m.encode()
		if err != nil {
			return // an id with a space or '=' cannot come from parse
		}
		if back, ok := parseCommitMeta(enc); !ok || !reflect.DeepEqual(back, m) {
			t.Fatalf("%q -> %+v -> %q -> %+v", s, m, enc, back)
		}
	})
}

// A sender acknowledges the records of one partition in a batch together:
// with hash partitioning they are every few offsets (the others went to
// other hub partitions), and only they are marked, counted and summed.
func TestTrackerAcknowledgesARunOfSparseOffsets(t *testing.T) {
	ps := newPartitionState(TopicPartition{"t", 0}, "t", NoOffset)
	ps.begin(10, 30)
	for o := int64(10); o < 20; o++ {
		ps.add(&Record{Offset: o, Value: make([]byte, o)})
	}
	ps.confirm(ps.readMark())
	at := time.Now()
	ps.ack(batchedAt(ps, 11, 13, 16), at)
	if got := ps.commitPoint(); got != 10 {
		t.Fatalf("10 unacknowledged: commit point %d, want 10", got)
	}
	ps.ack(batchedAt(ps, 10, 12, 14, 15), at)
	if got := ps.commitPoint(); got != 17 {
		t.Fatalf("10..16 acknowledged: commit point %d, want 17", got)
	}
	ps.ack(batchedAt(ps, 17, 18, 19), at)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.records != 10 || ps.bytes != 145 || ps.first != 10 || ps.last != 19 || !ps.lastAck.Equal(at) {
		t.Errorf("records %d, bytes %d, first %d, last %d, last ack %v; want 10, 145, 10, 19, %v", ps.records, ps.bytes, ps.first, ps.last, ps.lastAck, at)
	}
}

// A tracked record keeps its offset, however large, apart from its flags;
// a skipped one is done but not acknowledged, and only acknowledged ones
// are carried to the next drain of the process.
func TestTrackerKeepsLargeOffsetsAndTheirFlagsApart(t *testing.T) {
	const base = int64(1) << 61 // far beyond any real offset, below the flags
	ps := newPartitionState(TopicPartition{"t", 0}, "t", base)
	ps.begin(base, base+4)
	for o := base; o < base+4; o++ {
		ps.add(&Record{Offset: o})
	}
	ps.confirm(ps.readMark())
	at := func(o int64) []batched { return []batched{{ps: ps, offset: o}} }
	ps.ack(at(base+1), time.Now())
	ps.skip(base)
	if got := ps.commitPoint(); got != base+2 {
		t.Fatalf("commit point %d, want %d", got, base+2)
	}
	ps.mu.Lock()
	r := ps.pending[ps.head]
	ps.mu.Unlock()
	if r.offset() != base+2 || r.done() || r.acked() {
		t.Errorf("first pending record: offset %d, done %v, acknowledged %v; want %d, false, false", r.offset(), r.done(), r.acked(), base+2)
	}
	ps.ack(at(base+3), time.Now())
	if _, above := ps.ackedAboveCommit(); len(above) != 1 {
		t.Errorf("acknowledged above the commit: %v, want only offset %d", above, base+3)
	} else if _, ok := above[base+3]; !ok {
		t.Errorf("acknowledged above the commit: %v, want offset %d", above, base+3)
	}
}

// batchedAt returns the batched events of ps's records at offsets, each
// record's value as many bytes long as its offset.
func batchedAt(ps *partitionState, offsets ...int64) []batched {
	evs := make([]batched, len(offsets))
	for i, o := range offsets {
		evs[i] = batched{ps: ps, offset: o, size: o}
	}
	return evs
}

// The sender's EventBuilder makes the event EventFor makes, with the
// offset, partition, timestamp and key as pointers to values it holds (see
// Event.Properties), for records of every shape, one after the other.
func TestEventBuilderMatchesEventFor(t *testing.T) {
	recs := []Record{
		{Topic: "prod.test1", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("v"), Timestamp: 1.7e12},
		{Topic: "prod.test1", Partition: 300, Offset: 1 << 40, Value: nil, Timestamp: -1},
		{Topic: "prod.test2", Partition: 0, Offset: 7, Key: []byte{}, Value: []byte{}, Timestamp: 0,
			Headers: []Header{{"h", []byte("1")}, {"h", nil}, {"b", []byte{0xff}}}},
	}
	var b EventBuilder
	for i := range recs {
		want := EventFor(&recs[i])
		got := b.Build(&recs[i])
		if got.MessageID != want.MessageID || !bytes.Equal(got.Body, want.Body) || (got.Body == nil) != (want.Body == nil) {
			t.Errorf("record %d: message id %q, body %q; want %q, %q", i, got.MessageID, got.Body, want.MessageID, want.Body)
		}
		if values := PropertyValues(got.Properties); !reflect.DeepEqual(values, want.Properties) {
			t.Errorf("record %d: properties %v, want %v", i, values, want.Properties)
		}
	}
	// Building the event of a keyed record allocates nothing per record:
	// message ids are cut from allocations of messageIDBytes (two
	// allocations for hundreds of ids). AllocsPerRun rounds its average
	// down, so 0 means fewer than one allocation per build.
	const builds = 10_000
	if n := testing.AllocsPerRun(builds, func() { b.Build(&recs[0]) }); n > 0 {
		t.Errorf("building the event of a keyed record allocates %.0f times, want less than once per record", n)
	}
	// Nor does one with headers whose names the builder has seen in that
	// order: their property names and order are worked out once.
	if n := testing.AllocsPerRun(builds, func() { b.Build(&recs[2]) }); n > 0 {
		t.Errorf("building the event of a record with headers allocates %.0f times, want less than once per record", n)
	}
}

// The message ids an EventBuilder returns stay as they were, whatever it
// builds next: the Event Hubs sink keeps a batch's first.
func TestEventBuilderMessageIDsStay(t *testing.T) {
	var b EventBuilder
	topic := strings.Repeat("t", messageIDBytes) // an id longer than an allocation
	var ids []string
	var want []string
	for i := range 3 * messageIDBytes / 20 {
		r := Record{Topic: "orders", Partition: int32(i % 7), Offset: int64(i) << 20}
		if i%100 == 50 {
			r.Topic = topic
		}
		ids = append(ids, b.Build(&r).MessageID)
		want = append(want, MessageID(r.Topic, r.Partition, r.Offset))
	}
	for i := range ids {
		if ids[i] != want[i] {
			t.Fatalf("message id %d is %.40q after later builds, want %.40q", i, ids[i], want[i])
		}
	}
}

// Header shapes beyond the builder's bound replace the kept ones, and a
// record whose names match a kept shape only in part gets its own: every
// event still has the properties EventFor gives it.
func TestEventBuilderHeaderShapes(t *testing.T) {
	var recs []Record
	for i := range 3 * maxHeaderShapes {
		hs := []Header{{fmt.Sprintf("n%d", i%(maxHeaderShapes+3)), []byte{byte(i)}}, {"trace", []byte("t")}}
		if i%4 == 0 {
			hs = append(hs, Header{"trace", nil})
		}
		if i%5 == 0 {
			hs = hs[:1]
		}
		recs = append(recs, Record{Topic: "t", Partition: 1, Offset: int64(i), Value: []byte("v"), Headers: hs})
	}
	var b EventBuilder
	for round := range 2 {
		for i := range recs {
			want := EventFor(&recs[i]).Properties
			if got := PropertyValues(b.Build(&recs[i]).Properties); !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, record %d: properties %v, want %v", round, i, got, want)
			}
		}
	}
	if len(b.shapes) > maxHeaderShapes {
		t.Errorf("the builder keeps %d header shapes, want at most %d", len(b.shapes), maxHeaderShapes)
	}
}
