// Package filter drops, on the consumer side, the events that a Kafka
// consumer group had already processed before it was cut over to Event
// Hubs, so the cut-over is exactly-once for consumers that use it.
//
// A cut-over (POST /api/cutover, scripts/cutover) answers with watermarks:
// per Kafka partition the group's committed offset. Every event the mirror
// writes carries its record's provenance in application properties
// (kafka.topic, kafka.partition, kafka.offset); an event whose partition has
// a watermark and whose offset is below it was processed by the group:
//
//	f, err := filter.Parse(watermarksJSON) // the "watermarks" of the answer
//	...
//	if f.Processed(event.Properties) {
//		continue // the Kafka consumers handled it already
//	}
//
// The package needs no SDK: it reads the properties map that every Go SDK
// event (azeventhubs.ReceivedEventData.Properties) carries.
package filter

import (
	"encoding/json"
	"fmt"
)

// The application properties that carry an event's Kafka provenance.
const (
	PropTopic     = "kafka.topic"
	PropPartition = "kafka.partition"
	PropOffset    = "kafka.offset"
)

// Watermark is one Kafka partition's committed offset at the cut-over.
type Watermark struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

type key struct {
	topic     string
	partition int32
}

// Filter tells events processed before the cut-over from the others. It
// is read-only after New and safe for concurrent use.
type Filter struct {
	marks map[key]int64
}

// New returns a filter for the watermarks of one cut-over.
func New(ws []Watermark) (*Filter, error) {
	f := &Filter{marks: make(map[key]int64, len(ws))}
	for i, w := range ws {
		if w.Topic == "" || w.Partition < 0 || w.Offset < 0 {
			return nil, fmt.Errorf("filter: watermark %d: want a topic, a partition >= 0 and an offset >= 0, got %q/%d at %d", i, w.Topic, w.Partition, w.Offset)
		}
		f.marks[key{w.Topic, w.Partition}] = w.Offset
	}
	return f, nil
}

// Parse reads watermarks as the cut-over answers them: a JSON array of
// {"topic", "partition", "offset"} objects (other fields are ignored).
func Parse(data []byte) (*Filter, error) {
	var ws []Watermark
	if err := json.Unmarshal(data, &ws); err != nil {
		return nil, fmt.Errorf("filter: watermarks: %w", err)
	}
	return New(ws)
}

// Processed reports whether the event with these application properties
// carries a record the consumer group had processed before the cut-over
// (drop it). Events without provenance, or from partitions without a
// watermark, are never processed.
func (f *Filter) Processed(props map[string]any) bool {
	topic, ok := props[PropTopic].(string)
	if !ok {
		return false
	}
	p, ok := number(props[PropPartition])
	if !ok {
		return false
	}
	o, ok := number(props[PropOffset])
	if !ok {
		return false
	}
	w, ok := f.marks[key{topic, int32(p)}]
	return ok && o < w
}

// number accepts the integer types an AMQP long may be decoded into.
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case uint64:
		return int64(n), true
	case uint32:
		return int64(n), true
	}
	return 0, false
}
