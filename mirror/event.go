package mirror

import (
	"strconv"
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
	return Event{
		Body:       r.Value,
		Properties: props,
		MessageID:  MessageID(r.Topic, r.Partition, r.Offset),
	}
}

// fillProperties sets r's application properties in props; topic is r.Topic,
// possibly already boxed (see eventBuilder). With held nil the values are
// boxed; otherwise they are copied into held and props point at them.
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
	if len(r.Headers) > 0 {
		headerProperties(r.Headers, props)
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

// eventBuilder builds the events of one sender, one at a time, into one
// reused event, properties map and message id buffer: a [Batch] keeps
// nothing of the event it is given (see Batch.Add). The properties point
// at the record's values held in the builder (see [Event]) instead of
// boxing them, which allocated three times per record (the offset, the
// timestamp and a key's slice header): the message id is the only
// per-record allocation left. Not safe for concurrent use.
type eventBuilder struct {
	ev   Event
	id   []byte
	held heldValues
	// topic and boxed are the last topic seen and its value boxed once.
	topic string
	boxed any
}

// heldValues are the property values of the event an eventBuilder built
// last.
type heldValues struct {
	partition, offset int64
	timestamp         time.Time
	key               []byte
}

// build returns r's event, valid until the next call.
func (b *eventBuilder) build(r *Record) *Event {
	if b.ev.Properties == nil {
		b.ev.Properties = make(map[string]any, 8)
	}
	clear(b.ev.Properties)
	if b.boxed == nil || r.Topic != b.topic {
		b.topic, b.boxed = r.Topic, r.Topic
	}
	fillProperties(b.ev.Properties, r, b.boxed, &b.held)
	b.id = appendMessageID(b.id[:0], r.Topic, r.Partition, r.Offset)
	b.ev.Body = r.Value
	b.ev.MessageID = string(b.id)
	return &b.ev
}
