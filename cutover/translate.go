// Package cutover moves a Kafka consumer group's position to Event Hubs:
// from the group's committed offsets and the Kafka provenance that the
// mirror writes on every event (kafka.topic, kafka.partition, kafka.offset),
// it computes for each Event Hubs partition the checkpoint from which a
// consumer misses nothing the group has not processed, how many events at or
// after it the group had already processed (delivered again), and the
// per-Kafka-partition watermarks that let a consumer drop exactly those.
//
// The translation is independent of the partitioning strategy and of
// deduplication: it looks at what each hub partition holds, in order, and
// not at where the mirror meant to put a record. It knows no SDK; adapters
// read the group (kafka), the partitions (eventhubs) and write the
// checkpoints (checkpointstore).
package cutover

import (
	"fmt"
	"sort"

	"github.com/ehmirror/ehmirror/mirror"
)

// StartOfStream is the Event Hubs offset that precedes a partition's first
// event: a checkpoint naming it (with sequence number -1) makes every
// SDK's processor start at the earliest event still retained, exactly like
// the SDKs' own "earliest" start position (x-opt-offset > '-1').
const StartOfStream = "-1"

// Event is one stored event as the translation needs it: its position in
// its hub partition and the Kafka record it carries, if any.
type Event struct {
	// Sequence is the event's sequence number, Offset its Event Hubs
	// offset (opaque string).
	Sequence int64
	Offset   string
	// HasProvenance is false for an event without kafka.topic,
	// kafka.partition and kafka.offset (written by someone else).
	HasProvenance bool
	Record        mirror.TopicPartition
	RecordOffset  int64
}

// ProvenanceOf reads the Kafka provenance from an event's application
// properties; ok is false when a property is missing or has a wrong type.
func ProvenanceOf(props map[string]any) (tp mirror.TopicPartition, offset int64, ok bool) {
	topic, ok := props[mirror.PropTopic].(string)
	if !ok {
		return tp, 0, false
	}
	p, ok := asInt64(props[mirror.PropPartition])
	if !ok {
		return tp, 0, false
	}
	o, ok := asInt64(props[mirror.PropOffset])
	if !ok {
		return tp, 0, false
	}
	return mirror.TopicPartition{Topic: topic, Partition: int32(p)}, o, true
}

func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}

// Checkpoint is what an Event Hubs processor reads to resume a partition:
// the last event processed (exclusive start). Sequence -1 with Offset
// StartOfStream means "from the first event".
type Checkpoint struct {
	Sequence int64  `json:"sequence_number"`
	Offset   string `json:"offset"`
}

// Watermark is a Kafka partition's committed offset for the group: events
// of that partition with a lower offset were processed by the group.
// Committed is false when the group committed nothing for the partition
// (then Offset is 0 and nothing of it counts as processed).
type Watermark struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Committed bool   `json:"committed"`
}

// PartitionPlan is the cut-over of one hub partition.
type PartitionPlan struct {
	Hub         string `json:"hub"`
	PartitionID string `json:"partition_id"`
	// Start is the sequence number of the first event a consumer gets:
	// the lowest one carrying a record at or past the group's watermark,
	// or one past the last event when there is none.
	Start int64 `json:"start"`
	// Checkpoint names the event before Start (StartOfStream when Start
	// is the first event scanned or the partition is empty).
	Checkpoint Checkpoint `json:"checkpoint"`
	// Last is the last sequence number scanned (-1: empty partition).
	Last int64 `json:"last"`
	// Delivered counts the events at or after Start; Redelivered those
	// of them the group had processed (the filter drops them); Foreign
	// those carrying no record of the group's partitions.
	Delivered   int64 `json:"delivered"`
	Redelivered int64 `json:"redelivered"`
	Foreign     int64 `json:"foreign"`
	// Stored is the most advanced checkpoint already in the store (nil
	// when there is none or the store was not read).
	Stored *Checkpoint `json:"stored,omitempty"`
}

// Scan computes one hub partition's plan from its events, fed in sequence
// order from the first retained event to the last. Create it with
// NewScan; it keeps O(1) state per partition.
type Scan struct {
	watermarks map[mirror.TopicPartition]int64
	plan       PartitionPlan
	found      bool
	prev       Checkpoint
	err        error
}

// NewScan starts the scan of one hub partition against the group's
// watermarks (committed offset per Kafka partition; a partition missing
// from the map is not the group's).
func NewScan(hub, partitionID string, watermarks map[mirror.TopicPartition]int64) *Scan {
	return &Scan{
		watermarks: watermarks,
		plan:       PartitionPlan{Hub: hub, PartitionID: partitionID, Last: -1},
		prev:       Checkpoint{Sequence: -1, Offset: StartOfStream},
	}
}

// Add feeds the next event. Events must come in increasing sequence order;
// a violation makes Plan fail.
func (s *Scan) Add(ev Event) {
	if s.err != nil {
		return
	}
	if ev.Sequence <= s.plan.Last {
		s.err = fmt.Errorf("cutover: %s partition %s: sequence number %d after %d", s.plan.Hub, s.plan.PartitionID, ev.Sequence, s.plan.Last)
		return
	}
	s.plan.Last = ev.Sequence
	w, ours := s.watermarks[ev.Record]
	ours = ours && ev.HasProvenance
	if !s.found {
		if !ours || ev.RecordOffset < w {
			s.prev = Checkpoint{Sequence: ev.Sequence, Offset: ev.Offset}
			return
		}
		s.found = true
		s.plan.Start = ev.Sequence
	}
	s.plan.Delivered++
	switch {
	case !ours:
		s.plan.Foreign++
	case ev.RecordOffset < w:
		s.plan.Redelivered++
	}
}

// Plan returns the partition's plan after the last event was added.
func (s *Scan) Plan() (PartitionPlan, error) {
	if s.err != nil {
		return PartitionPlan{}, s.err
	}
	p := s.plan
	if !s.found {
		p.Start = p.Last + 1
		if p.Last < 0 {
			p.Start = 0
		}
	}
	p.Checkpoint = s.prev
	return p, nil
}

// WatermarksOf turns the group's committed offsets into watermarks, in
// topic and partition order; mirror.NoOffset becomes offset 0, not
// committed.
func WatermarksOf(committed map[mirror.TopicPartition]int64) []Watermark {
	out := make([]Watermark, 0, len(committed))
	for tp, o := range committed {
		w := Watermark{Topic: tp.Topic, Partition: tp.Partition, Offset: o, Committed: o >= 0}
		if o < 0 {
			w.Offset = 0
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// watermarkMap is the lookup form of watermarks.
func watermarkMap(ws []Watermark) map[mirror.TopicPartition]int64 {
	m := make(map[mirror.TopicPartition]int64, len(ws))
	for _, w := range ws {
		m[mirror.TopicPartition{Topic: w.Topic, Partition: w.Partition}] = w.Offset
	}
	return m
}
