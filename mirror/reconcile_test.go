package mirror

import (
	"context"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestCommitMetaFloors: hub, floors and the clean mark round-trip; a
// malformed seq field yields no floors (no reconciliation, never a guess);
// too many hub partitions exceed Kafka's 4,096 bytes.
func TestCommitMetaFloors(t *testing.T) {
	m := commitMeta{TopicID: "ab", Hub: "orders", Floors: map[string]int64{"0": 17, "1": -1, "10": 123456789}}
	s, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	if s != "ehmirror/2 tid=ab hub=orders seq=0:17,1:-1,10:123456789" {
		t.Errorf("encoded %q", s)
	}
	if got, ok := parseCommitMeta(s); !ok || !reflect.DeepEqual(got, m) {
		t.Errorf("round trip %+v", got)
	}
	c := commitMeta{TopicID: "ab", Hub: "orders", Clean: true}
	s, _ = c.encode()
	if got, ok := parseCommitMeta(s); !ok || !got.Clean || got.Floors != nil {
		t.Errorf("clean: %q -> %+v", s, got)
	}
	for _, bad := range []string{"seq=0:x", "seq=0", "seq=:5", "seq=0:1,", "seq=0:-2"} {
		if got, _ := parseCommitMeta("ehmirror/2 tid=ab " + bad); got.Floors != nil || got.Clean {
			t.Errorf("%s: floors %v", bad, got.Floors)
		}
	}
	// Written before deduplication was on: neither clean nor floors.
	if got, _ := parseCommitMeta("ehmirror/2 tid=ab"); got.Clean || got.Floors != nil {
		t.Errorf("old metadata: %+v", got)
	}
	many := commitMeta{TopicID: strings.Repeat("a", 32), Hub: "orders", Floors: map[string]int64{}}
	for i := range 300 {
		many.Floors[strconv.Itoa(i)] = 1 << 40
	}
	if _, err := many.encode(); err == nil {
		t.Error("300 floors fit into 4096 bytes?")
	}
	if _, err := (commitMeta{Hub: "a b"}).encode(); err == nil {
		t.Error("hub with a space accepted")
	}
}

// TestSawOnlyExactProvenance: an event stands for a record only with the
// record's topic, partition, offset (at or above the start), message id and
// hub, and then only when its content matches the record's.
func TestSawOnlyExactProvenance(t *testing.T) {
	ps := newPartitionState(TopicPartition{Topic: "t", Partition: 2}, "hub", 10)
	ps.begin(10, 100)
	other := newPartitionState(TopicPartition{Topic: "u", Partition: 2}, "hub", 10)
	other.begin(10, 100)
	dd := &dedup{parts: map[*partitionState]*dedupPart{ps: {presentMax: -1, from: 10}, other: {presentMax: -1, from: 10}}}
	byTP := map[TopicPartition]*partitionState{ps.tp: ps}
	rec := func(off int64, v string) *Record {
		return &Record{Topic: "t", Partition: 2, Offset: off, Key: []byte("k"), Value: []byte(v), Timestamp: 1700000000123}
	}
	stored := func(r *Record) StoredEvent {
		ev := EventFor(r)
		return StoredEvent{Body: ev.Body, Properties: ev.Properties, MessageID: ev.MessageID}
	}
	saw := func(hub string, ev StoredEvent) {
		if rb, ok := readBackOf(ev); ok {
			dd.saw(byTP, hub, rb)
		}
	}
	saw("hub", stored(rec(12, "a")))   // the record
	saw("other", stored(rec(13, "a"))) // another hub
	saw("hub", stored(rec(9, "a")))    // below the start
	ev := stored(rec(14, "a"))         // wrong message id
	ev.MessageID = "t/2/15"
	saw("hub", ev)
	u := &Record{Topic: "u", Partition: 2, Offset: 15, Value: []byte("a")} // a topic not reconciled
	saw("hub", stored(u))
	saw("hub", stored(rec(16, "forged"))) // other content

	for off, want := range map[int64]bool{12: true, 13: false, 9: false, 14: false, 16: false, 17: false} {
		if got := dd.already(ps, rec(off, "a")); got != want {
			t.Errorf("offset %d: already %v, want %v", off, got, want)
		}
	}
	if dd.already(other, &Record{Topic: "u", Partition: 2, Offset: 15, Value: []byte("a")}) {
		t.Error("a topic that was not reconciled was skipped")
	}
	if dd.parts[ps].found != 1 {
		t.Errorf("found %d", dd.parts[ps].found)
	}
}

// TestTooManyHubPartitionsDropsFloors: floors of 400 hub partitions do not
// fit into Kafka's commit metadata; the commit goes on without them (the
// partition is at-least-once after an unclean end) and the report says so.
func TestTooManyHubPartitionsDropsFloors(t *testing.T) {
	ids := make([]string, 400)
	floors := make(map[string]int64, 400)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
		floors[ids[i]] = 1 << 40
	}
	ps := newPartitionState(TopicPartition{Topic: "t", Partition: 0}, "h", 0)
	ps.begin(0, 10)
	d := &drain{
		m:      &Mirror{opts: Options{Partitioning: PartitionByHash}},
		hubs:   map[string]Hub{"h": {Name: "h", PartitionIDs: ids}},
		dd:     &dedup{floors: map[string]map[string]int64{"h": floors}, parts: map[*partitionState]*dedupPart{ps: {presentMax: -1}}},
		logger: slog.New(slog.DiscardHandler),
		ids:    map[string]string{"t": "ab"},
		rep:    &Report{},
	}
	meta, clean, err := d.commitMetaFor(context.Background(), ps, 5)
	if err != nil || clean || strings.Contains(meta, "seq=") || !strings.Contains(meta, "hub=h") {
		t.Fatalf("meta %q clean %v err %v", meta, clean, err)
	}
	d.dedupReport(d.rep)
	if !strings.Contains(d.rep.Deduplication, "too many event hub partitions") {
		t.Fatalf("report: %q", d.rep.Deduplication)
	}
	// preserve needs one floor only: it fits.
	d.m.opts.Partitioning = PartitionPreserve
	if meta, _, _ := d.commitMetaFor(context.Background(), ps, 5); !strings.Contains(meta, "seq=0:") {
		t.Fatalf("preserve: %q", meta)
	}
}
