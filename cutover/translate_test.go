package cutover

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/ehmirror/ehmirror/cutover/filter"
	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/partitionkey"
)

// layoutRecord is a Kafka record of the simulated source.
type layoutRecord struct {
	tp     mirror.TopicPartition
	offset int64
	key    []byte
}

// simulate places the records of several topics (keyed and keyless, two
// of them into one hub) into hub partitions the way each partitioning
// strategy does, with duplicates (re-sent ranges) when dedup is off and
// with the first events of some partitions removed by retention.
func simulate(t *testing.T, mode mirror.Partitioning, dedup bool, rng *rand.Rand) (hubs map[string][][]Event, records []layoutRecord) {
	t.Helper()
	topics := []struct {
		name       string
		partitions int
		keyed      bool
		hub        string
	}{
		{"orders", 3, true, "shared"},
		{"audit", 2, false, "shared"},
		{"clicks", 4, true, "clicks"},
	}
	const hubPartitions = 4
	next := map[mirror.TopicPartition]int64{}
	for range 600 {
		tt := topics[rng.IntN(len(topics))]
		tp := mirror.TopicPartition{Topic: tt.name, Partition: int32(rng.IntN(tt.partitions))}
		r := layoutRecord{tp: tp, offset: next[tp]}
		next[tp]++
		if tt.keyed && rng.IntN(5) > 0 {
			r.key = []byte("k" + strconv.Itoa(rng.IntN(20)))
		}
		records = append(records, r)
	}
	hubOf := map[string]string{}
	for _, tt := range topics {
		hubOf[tt.name] = tt.hub
	}
	hubs = map[string][][]Event{"shared": make([][]Event, hubPartitions), "clicks": make([][]Event, hubPartitions)}
	var rr int
	place := func(r layoutRecord) int {
		switch {
		case mode == mirror.PartitionRoundRobin:
			rr++
			return rr % hubPartitions
		case r.key != nil && mode == mirror.PartitionByHash:
			return partitionkey.Partition(string(r.key), hubPartitions)
		case r.key != nil && mode == mirror.PartitionByKafkaMurmur2:
			h := fnv.New32a() // a key hash other than the service's; placement is what matters
			h.Write(r.key)
			return int(h.Sum32() % hubPartitions)
		}
		return int(r.tp.Partition) % hubPartitions
	}
	put := func(r layoutRecord, p int) {
		ps := hubs[hubOf[r.tp.Topic]]
		seq := int64(len(ps[p]))
		ps[p] = append(ps[p], Event{Sequence: seq, Offset: strconv.FormatInt(seq*100+7, 10), HasProvenance: true, Record: r.tp, RecordOffset: r.offset})
	}
	for i := 0; i < len(records); {
		n := min(1+rng.IntN(8), len(records)-i)
		batch := records[i : i+n]
		for _, r := range batch {
			put(r, place(r))
		}
		if !dedup && rng.IntN(6) == 0 {
			// a batch whose acknowledgement was lost is sent again
			for _, r := range batch {
				put(r, place(r))
			}
		}
		if rng.IntN(10) == 0 {
			// a foreign event, written by someone else
			ps := hubs["shared"]
			p := rng.IntN(hubPartitions)
			ps[p] = append(ps[p], Event{Sequence: int64(len(ps[p])), Offset: "x"})
		}
		i += n
	}
	// retention removed the first events of one partition per hub
	for _, ps := range hubs {
		ps[1] = ps[1][min(5, len(ps[1])):]
	}
	return hubs, records
}

func TestTranslationEveryPartitioningMode(t *testing.T) {
	for _, mode := range []mirror.Partitioning{mirror.PartitionByHash, mirror.PartitionByKafkaMurmur2, mirror.PartitionPreserve, mirror.PartitionRoundRobin} {
		for _, dedup := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/dedup=%v", mode, dedup), func(t *testing.T) {
				var redelivered int64
				for seed := range uint64(20) {
					redelivered += checkTranslation(t, mode, dedup, seed)
				}
				if redelivered == 0 {
					t.Fatal("no layout delivers an event again: the redelivery counts and the filter were not exercised")
				}
			})
		}
	}
}

// checkTranslation checks one simulated layout and returns how many
// events are delivered again.
func checkTranslation(t *testing.T, mode mirror.Partitioning, dedup bool, seed uint64) (total int64) {
	rng := rand.New(rand.NewPCG(seed, 26))
	hubs, records := simulate(t, mode, dedup, rng)
	// The group consumes orders and audit (not clicks) and committed a
	// random point of each partition; one partition has no commit.
	ends := map[mirror.TopicPartition]int64{}
	for _, r := range records {
		ends[r.tp] = max(ends[r.tp], r.offset+1)
	}
	committed := map[mirror.TopicPartition]int64{}
	for tp, end := range ends {
		if tp.Topic == "clicks" {
			continue
		}
		committed[tp] = rng.Int64N(end + 1)
	}
	committed[mirror.TopicPartition{Topic: "audit", Partition: 1}] = mirror.NoOffset
	ws := WatermarksOf(committed)
	marks := watermarkMap(ws)
	var fws []filter.Watermark
	for _, w := range ws {
		fws = append(fws, filter.Watermark{Topic: w.Topic, Partition: w.Partition, Offset: w.Offset})
	}
	f, err := filter.New(fws)
	if err != nil {
		t.Fatal(err)
	}
	for _, hub := range []string{"shared"} {
		for id, events := range hubs[hub] {
			s := NewScan(hub, strconv.Itoa(id), marks)
			for _, ev := range events {
				s.Add(ev)
			}
			p, err := s.Plan()
			if err != nil {
				t.Fatal(err)
			}
			// What a processor delivers from this checkpoint: the events
			// after it (all retained ones from StartOfStream).
			var delivered []Event
			for _, ev := range events {
				if p.Checkpoint.Offset == StartOfStream || ev.Sequence > p.Checkpoint.Sequence {
					delivered = append(delivered, ev)
				}
			}
			if p.Checkpoint.Offset != StartOfStream {
				if i := indexOf(events, p.Checkpoint.Sequence); i < 0 || events[i].Offset != p.Checkpoint.Offset {
					t.Fatalf("seed %d partition %d: checkpoint %+v names no stored event", seed, id, p.Checkpoint)
				}
			}
			// 0 missing: every retained event of an unprocessed record is delivered.
			seen := map[int64]bool{}
			for _, ev := range delivered {
				seen[ev.Sequence] = true
			}
			for _, ev := range events {
				if w, ok := marks[ev.Record]; ok && ev.HasProvenance && ev.RecordOffset >= w && !seen[ev.Sequence] {
					t.Fatalf("seed %d partition %d: %s@%d (sequence %d) not delivered from checkpoint %+v", seed, id, ev.Record, ev.RecordOffset, ev.Sequence, p.Checkpoint)
				}
			}
			// Exact counts, and the start is the earliest possible.
			var redelivered, foreign int64
			for _, ev := range delivered {
				w, ours := marks[ev.Record]
				switch {
				case !ours || !ev.HasProvenance:
					foreign++
				case ev.RecordOffset < w:
					redelivered++
					if !f.Processed(props(ev)) {
						t.Fatalf("seed %d: the filter keeps processed %s@%d", seed, ev.Record, ev.RecordOffset)
					}
				default:
					if f.Processed(props(ev)) {
						t.Fatalf("seed %d: the filter drops unprocessed %s@%d", seed, ev.Record, ev.RecordOffset)
					}
				}
			}
			if len(delivered) > 0 {
				first := delivered[0]
				if w, ok := marks[first.Record]; !ok || !first.HasProvenance || first.RecordOffset < w {
					t.Fatalf("seed %d partition %d: the first delivered event (sequence %d) is not an unprocessed record: the checkpoint could be later", seed, id, first.Sequence)
				}
			}
			if p.Delivered != int64(len(delivered)) || p.Redelivered != redelivered || p.Foreign != foreign {
				t.Fatalf("seed %d partition %d: plan counts delivered %d redelivered %d foreign %d, want %d %d %d",
					seed, id, p.Delivered, p.Redelivered, p.Foreign, len(delivered), redelivered, foreign)
			}
			total += redelivered
		}
	}
	return total
}

func indexOf(events []Event, seq int64) int {
	for i, ev := range events {
		if ev.Sequence == seq {
			return i
		}
	}
	return -1
}

func props(ev Event) map[string]any {
	return map[string]any{mirror.PropTopic: ev.Record.Topic, mirror.PropPartition: int64(ev.Record.Partition), mirror.PropOffset: ev.RecordOffset}
}

func TestScanEdges(t *testing.T) {
	marks := map[mirror.TopicPartition]int64{{Topic: "a", Partition: 0}: 3}
	ev := func(seq, o int64) Event {
		return Event{Sequence: seq, Offset: "o" + strconv.FormatInt(seq, 10), HasProvenance: true, Record: mirror.TopicPartition{Topic: "a"}, RecordOffset: o}
	}
	cases := []struct {
		name   string
		events []Event
		want   PartitionPlan
	}{
		{"empty partition", nil, PartitionPlan{Start: 0, Last: -1, Checkpoint: Checkpoint{-1, StartOfStream}}},
		{"all processed", []Event{ev(0, 0), ev(1, 1), ev(2, 2)}, PartitionPlan{Start: 3, Last: 2, Checkpoint: Checkpoint{2, "o2"}}},
		{"none processed", []Event{ev(10, 3), ev(11, 4)}, PartitionPlan{Start: 10, Last: 11, Checkpoint: Checkpoint{-1, StartOfStream}, Delivered: 2}},
		{"middle, a duplicate after", []Event{ev(0, 1), ev(1, 2), ev(2, 3), ev(3, 2), ev(4, 4)}, PartitionPlan{Start: 2, Last: 4, Checkpoint: Checkpoint{1, "o1"}, Delivered: 3, Redelivered: 1}},
	}
	for _, c := range cases {
		s := NewScan("h", "0", marks)
		for _, e := range c.events {
			s.Add(e)
		}
		got, err := s.Plan()
		if err != nil {
			t.Fatal(err)
		}
		c.want.Hub, c.want.PartitionID = "h", "0"
		if got != c.want {
			t.Errorf("%s: plan %+v, want %+v", c.name, got, c.want)
		}
	}
	s := NewScan("h", "0", marks)
	s.Add(ev(5, 0))
	s.Add(ev(5, 1))
	if _, err := s.Plan(); err == nil {
		t.Error("a repeated sequence number was accepted")
	}
}

func TestProvenanceOf(t *testing.T) {
	tp, o, ok := ProvenanceOf(map[string]any{mirror.PropTopic: "t", mirror.PropPartition: int64(2), mirror.PropOffset: int64(9)})
	if !ok || tp != (mirror.TopicPartition{Topic: "t", Partition: 2}) || o != 9 {
		t.Fatalf("ProvenanceOf = %v %d %v", tp, o, ok)
	}
	if _, _, ok := ProvenanceOf(map[string]any{mirror.PropTopic: "t", mirror.PropOffset: int64(9)}); ok {
		t.Fatal("an event without kafka.partition has provenance")
	}
}
