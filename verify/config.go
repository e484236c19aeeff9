// Package verify compares a Kafka cluster's topics with the event hubs they
// are mirrored into, using the provenance properties the mirror puts on each
// event (kafka.topic, kafka.partition, kafka.offset; see mirror.EventFor).
//
// It reads every record of the selected topics straight from their
// partitions (kafka-go, no consumer group) and every event of the hubs they
// route to (azeventhubs ConsumerClient, from the earliest event up to the
// last sequence number each partition reported when the read began), then
// reports per topic: records, events, missing offsets, duplicates, body, key
// and header mismatches, order violations per key, and the mirror's lag.
//
// Records are kept as 64-bit digests, about 40 bytes each, so a run over
// tens of millions of records fits in memory.
package verify

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// Defaults applied to zero fields of [Config].
const (
	DefaultTopics        = `prod\..*`
	DefaultGroup         = "ehmirror"
	DefaultConsumerGroup = "$Default"
	DefaultIdleTimeout   = 30 * time.Second
	DefaultMaxRecords    = 50_000_000
	DefaultParallelism   = 8
)

// EventHubs says how to reach the namespace: a namespace-level connection
// string, or a namespace host and a Microsoft Entra ID credential.
type EventHubs struct {
	ConnectionString string
	// Namespace is the host, e.g. myns.servicebus.windows.net.
	Namespace  string
	Credential azcore.TokenCredential
	// ConsumerGroup to read with; default $Default.
	ConsumerGroup string
}

// String describes the access without the connection string.
func (e EventHubs) String() string {
	if e.ConnectionString != "" {
		return "connection string (redacted)"
	}
	return "namespace " + e.Namespace + " (Microsoft Entra ID)"
}

// GoString is like String so %#v does not print the connection string.
func (e EventHubs) GoString() string { return e.String() }

// Config configures a verification.
type Config struct {
	Kafka     kafkaconn.Config
	EventHubs EventHubs
	// Topics selects the Kafka topics; default DefaultTopics (the mirror's
	// default KAFKA_TOPICS_INCLUDE). Internal topics are never selected.
	Topics mirror.TopicFilter
	// Routes are the mirror's MIRROR_ROUTES; default: hub = topic name.
	Routes []mirror.Route
	// Partitioning is the mirror's MIRROR_PARTITIONING; it decides which
	// order is checked. hash and kafka-murmur2: per Kafka partition and key
	// within each Event Hubs partition (keyless records form one group);
	// preserve: per Kafka partition; round-robin: none.
	Partitioning mirror.Partitioning
	// Group is the mirror's consumer group (KAFKA_GROUP). An absent record
	// at or after the group's committed offset is pending (the mirror has
	// not claimed it yet), not missing. Empty: every absent record is
	// missing and the lag is not reported.
	Group string
	// FailOnDuplicates makes duplicates a failure; by default they are
	// reported only, since delivery is at-least-once.
	FailOnDuplicates bool
	// FailOnPending makes pending records (lag) a failure.
	FailOnPending bool
	// IdleTimeout bounds how long a partition may deliver nothing before
	// the read gives up on it; default 30 s.
	IdleTimeout time.Duration
	// MaxRecords refuses topics holding more records than this (memory);
	// default 50 million.
	MaxRecords int64
	// Parallelism bounds the partitions read at once; default 8.
	Parallelism int
	// Progress, when set, is called as records and events are read.
	Progress func(Progress)
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
}

// Progress is how far a verification is.
type Progress struct {
	// Phase is "kafka" or "eventhubs".
	Phase string
	Done  int64
	Total int64
}

func (c Config) withDefaults() (Config, error) {
	if err := c.Kafka.Validate(); err != nil {
		return c, fmt.Errorf("kafka: %w", err)
	}
	e := c.EventHubs
	switch {
	case e.ConnectionString != "" && e.Namespace != "":
		return c, errors.New("event hubs: set a connection string or a namespace, not both")
	case e.ConnectionString == "" && e.Namespace == "":
		return c, errors.New("event hubs: no connection string and no namespace")
	case e.Namespace != "" && e.Credential == nil:
		return c, errors.New("event hubs: a namespace needs a credential")
	}
	if c.EventHubs.ConsumerGroup == "" {
		c.EventHubs.ConsumerGroup = DefaultConsumerGroup
	}
	if c.Topics.Include == nil && c.Topics.Exclude == nil {
		f, err := mirror.CompileTopicFilter(DefaultTopics, "")
		if err != nil {
			return c, err
		}
		c.Topics = f
	}
	p, err := mirror.ParsePartitioning(string(c.Partitioning))
	if err != nil {
		return c, err
	}
	c.Partitioning = p
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	if c.Parallelism <= 0 {
		c.Parallelism = DefaultParallelism
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
