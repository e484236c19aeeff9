// Package mirror is the domain of the Kafka to Event Hubs mirror: which topics
// are mirrored, where each record goes, and how a bounded drain copies records
// from a Kafka consumer group into Event Hubs without ever committing an offset
// that Event Hubs has not acknowledged.
//
// The package knows no SDK. Kafka is reached through a [Source] and Event Hubs
// through a [Sink]; the packages kafka and eventhubs adapt the real clients.
package mirror
