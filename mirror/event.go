package mirror

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Application property names that carry a Kafka record's provenance and
// metadata on its event. Together, PropTopic, PropPartition and PropOffset
// identify a record, so any consumer can drop duplicates.
//
//	property            AMQP type   content
//	kafka.topic         string      source topic
//	kafka.partition     long        source partition
//	kafka.offset        long        source offset
//	kafka.timestamp     timestamp   record timestamp (milliseconds)
//	kafka.key           binary      record key; absent when the key is null
//	kafka.tombstone     boolean     true when the value is null (the body is empty)
//	kafka.header.NAME   binary      header NAME, byte for byte
//	kafka.header.NAME#N binary      the (N+1)th header with the same NAME, N >= 1
//	kafka.header-order  string      header order, when there are two or more names
//
// NAME is the header name with '%', '#' and bytes outside valid UTF-8
// escaped as %XX; see headers.go for the exact rules.
const (
	PropTopic        = "kafka.topic"
	PropPartition    = "kafka.partition"
	PropOffset       = "kafka.offset"
	PropTimestamp    = "kafka.timestamp"
	PropKey          = "kafka.key"
	PropTombstone    = "kafka.tombstone"
	PropHeaderPrefix = "kafka.header."
	PropHeaderOrder  = "kafka.header-order"
)

// EventFor maps a record to its event: the body is the value and the
// application properties carry key, provenance, timestamp and headers.
func EventFor(r *Record) Event {
	props := make(map[string]any, 5+len(r.Headers))
	fillProperties(props, r, r.Topic, nil)
	if len(r.Headers) > 0 {
		headerProperties(r.Headers, props)
	}
	return Event{
		Body:       r.Value,
		Properties: props,
		MessageID:  MessageID(r.Topic, r.Partition, r.Offset),
	}
}

// fillProperties sets r's application properties but its headers' in
// props; topic is r.Topic, possibly already boxed (see EventBuilder). With
// held nil the values are boxed; otherwise they are copied into held and
// props point at them.
func fillProperties(props map[string]any, r *Record, topic any, held *heldValues) {
	props[PropTopic] = topic
	if held == nil {
		props[PropPartition] = int64(r.Partition)
		props[PropOffset] = r.Offset
		props[PropTimestamp] = r.Time()
		if r.Key != nil {
			props[PropKey] = r.Key
		}
	} else {
		held.partition, held.offset, held.timestamp, held.key = int64(r.Partition), r.Offset, r.Time(), r.Key
		props[PropPartition] = &held.partition
		props[PropOffset] = &held.offset
		props[PropTimestamp] = &held.timestamp
		if r.Key != nil {
			props[PropKey] = &held.key
		}
	}
	if r.Value == nil {
		props[PropTombstone] = true
	}
}

// MessageID is the event message id of a record: "topic/partition/offset".
func MessageID(topic string, partition int32, offset int64) string {
	return string(appendMessageID(nil, topic, partition, offset))
}

// appendMessageID appends the message id of a record (see [MessageID]) to
// dst.
func appendMessageID(dst []byte, topic string, partition int32, offset int64) []byte {
	dst = append(append(dst, topic...), '/')
	dst = append(strconv.AppendInt(dst, int64(partition), 10), '/')
	return strconv.AppendInt(dst, offset, 10)
}

// EventBuilder builds the events a sender adds to its batches, as
// [EventFor] maps records, one at a time, into one reused event and
// properties map: a [Batch] keeps nothing of the event it is given (see
// Batch.Add) but, for the Event Hubs sink, the message id of a batch's
// first event. The properties point at the record's values held in the
// builder (see [Event]) instead of boxing them, which allocated three
// times per record (the offset, the timestamp and a key's slice header),
// header property names are worked out once per sequence of header names
// (see headerShape), and message ids are cut from shared allocations (see
// messageID): building an event allocates nothing per record. The zero
// value is ready to use; it is not safe for concurrent use.
type EventBuilder struct {
	ev Event
	// id is the message id being formatted; ids is the allocation ids
	// are cut from.
	id   []byte
	ids  *strings.Builder
	held heldValues
	// topic and boxed are the last topic seen and its value boxed once.
	topic string
	boxed any
	// shapes are the header shapes seen last, at most maxHeaderShapes;
	// nextShape is the one a new shape replaces.
	shapes    []*headerShape
	nextShape int
}

// heldValues are the property values of the event an EventBuilder built
// last.
type heldValues struct {
	partition, offset int64
	timestamp         time.Time
	key               []byte
	headers           [][]byte
}

// headerShape is what the properties of a sequence of header names are:
// records of a topic usually carry the same names in the same order, so
// their property names and order are worked out once, not per record.
type headerShape struct {
	keys  []string // the header names, in order
	names []string // their property names
	order any      // PropHeaderOrder's value, boxed once; nil when left out
}

// maxHeaderShapes bounds the header shapes an EventBuilder keeps.
const maxHeaderShapes = 8

// Build returns r's event, valid until the next call: hand it to
// [Batch.Add] and keep nothing of it.
func (b *EventBuilder) Build(r *Record) *Event {
	if b.ev.Properties == nil {
		b.ev.Properties = make(map[string]any, 8)
	}
	clear(b.ev.Properties)
	if b.boxed == nil || r.Topic != b.topic {
		b.topic, b.boxed = r.Topic, r.Topic
	}
	fillProperties(b.ev.Properties, r, b.boxed, &b.held)
	if len(r.Headers) > 0 {
		b.headerProperties(r.Headers)
	}
	b.ev.Body = r.Value
	b.ev.MessageID = b.messageID(r)
	return &b.ev
}

// messageIDBytes is the size of the allocations an EventBuilder cuts
// message ids from: one per about 150 ids of 100 B records instead of one
// per id.
const messageIDBytes = 4 << 10

// messageID returns r's message id, cut from b's current allocation of
// message ids. An id's bytes are never written again, so it stays valid
// however long it is kept, and keeps its allocation alive.
func (b *EventBuilder) messageID(r *Record) string {
	b.id = appendMessageID(b.id[:0], r.Topic, r.Partition, r.Offset)
	if b.ids == nil || b.ids.Cap()-b.ids.Len() < len(b.id) {
		b.ids = new(strings.Builder)
		b.ids.Grow(max(messageIDBytes, len(b.id)))
	}
	start := b.ids.Len()
	b.ids.Write(b.id)
	return b.ids.String()[start:]
}

// headerProperties sets the properties of headers hs in the event, each
// pointing at its value held in b.
func (b *EventBuilder) headerProperties(hs []Header) {
	shape := b.shape(hs)
	b.held.headers = slices.Grow(b.held.headers[:0], len(hs))[:len(hs)]
	for i, h := range hs {
		b.held.headers[i] = h.Value
		b.ev.Properties[shape.names[i]] = &b.held.headers[i]
	}
	if shape.order != nil {
		b.ev.Properties[PropHeaderOrder] = shape.order
	}
}

// shape returns the shape of hs' names, from the kept shapes when it is
// one of them.
func (b *EventBuilder) shape(hs []Header) *headerShape {
	for _, s := range b.shapes {
		if s.matches(hs) {
			return s
		}
	}
	s := &headerShape{keys: make([]string, len(hs))}
	for i, h := range hs {
		s.keys[i] = h.Key
	}
	var order string
	s.names, order = headerPropertyNames(hs)
	if order != "" {
		s.order = order
	}
	if len(b.shapes) < maxHeaderShapes {
		b.shapes = append(b.shapes, s)
	} else {
		b.shapes[b.nextShape] = s
		b.nextShape = (b.nextShape + 1) % maxHeaderShapes
	}
	return s
}

// matches reports whether hs carry s's names in s's order.
func (s *headerShape) matches(hs []Header) bool {
	return slices.EqualFunc(hs, s.keys, func(h Header, key string) bool { return h.Key == key })
}
