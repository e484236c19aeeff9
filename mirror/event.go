package mirror

import (
	"strconv"
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
const (
	PropTopic        = "kafka.topic"
	PropPartition    = "kafka.partition"
	PropOffset       = "kafka.offset"
	PropTimestamp    = "kafka.timestamp"
	PropKey          = "kafka.key"
	PropTombstone    = "kafka.tombstone"
	PropHeaderPrefix = "kafka.header."
)

// EventFor maps a record to its event: the body is the value and the
// application properties carry key, provenance, timestamp and headers.
func EventFor(r *Record) Event {
	props := make(map[string]any, 5+len(r.Headers))
	props[PropTopic] = r.Topic
	props[PropPartition] = int64(r.Partition)
	props[PropOffset] = r.Offset
	props[PropTimestamp] = r.Time
	if r.Key != nil {
		props[PropKey] = r.Key
	}
	if r.Value == nil {
		props[PropTombstone] = true
	}
	for i, h := range r.Headers {
		props[HeaderProperty(r.Headers[:i], h.Key)] = h.Value
	}
	return Event{
		Body:       r.Value,
		Properties: props,
		MessageID:  MessageID(r.Topic, r.Partition, r.Offset),
	}
}

// HeaderProperty names the property of header key given the headers before it.
func HeaderProperty(before []Header, key string) string {
	n := 0
	for _, h := range before {
		if h.Key == key {
			n++
		}
	}
	if n == 0 {
		return PropHeaderPrefix + key
	}
	return PropHeaderPrefix + key + "#" + strconv.Itoa(n)
}

// MessageID is the event message id of a record: "topic/partition/offset".
func MessageID(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}
