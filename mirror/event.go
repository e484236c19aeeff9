package mirror

import "strconv"

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
	headerProperties(r.Headers, props)
	return Event{
		Body:       r.Value,
		Properties: props,
		MessageID:  MessageID(r.Topic, r.Partition, r.Offset),
	}
}

// MessageID is the event message id of a record: "topic/partition/offset".
func MessageID(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}
