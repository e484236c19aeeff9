package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// NoOffset marks a partition for which the consumer group has committed nothing.
const NoOffset int64 = -1

// ErrOffsetOutOfRange is returned (wrapped) by [Source.Fetch] when the requested
// offset is below the partition's log start or above its end.
var ErrOffsetOutOfRange = errors.New("offset out of range")

// TopicPartition names one partition of one Kafka topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic/partition".
func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Header is one Kafka record header. Kafka allows repeated keys; order matters.
type Header struct {
	Key   string
	Value []byte
}

// Record is one Kafka record as read from a partition.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	// Key is nil when the record has no key.
	Key []byte
	// Value is nil for a tombstone (a record with a null value).
	Value   []byte
	Headers []Header
	// Timestamp is the record's Kafka timestamp, in milliseconds since the
	// Unix epoch, as Kafka keeps it (negative: none). An integer rather
	// than a time.Time: a drain holds hundreds of thousands of records,
	// and a time.Time takes 24 bytes, among them a pointer for the
	// collector to scan.
	Timestamp int64
}

// Time returns the record's timestamp as a time.Time.
func (r *Record) Time() time.Time { return time.UnixMilli(r.Timestamp) }

// TopicPartition returns the record's partition.
func (r *Record) TopicPartition() TopicPartition {
	return TopicPartition{Topic: r.Topic, Partition: r.Partition}
}

// Topic describes one Kafka topic.
type Topic struct {
	Name       string
	Partitions int
	// ID is the topic's id (KIP-516, Kafka 2.8+), which changes when a
	// topic is deleted and created again under the same name; "" when the
	// broker does not report topic ids.
	ID string
}

// Watermarks are a partition's log start offset (the first offset still stored)
// and end offset (the offset the next produced record will get, or under
// read-committed isolation the last stable offset).
type Watermarks struct {
	Start int64
	End   int64
}

// Fetched is the result of one [Source.Fetch].
type Fetched struct {
	// Records are in offset order; possibly empty.
	Records []Record
	// Next is the offset to fetch next: one past the last record, or further
	// when the fetch skipped control records or aborted transactions.
	Next int64
	// Watermarks as reported by the broker with this fetch.
	Watermarks Watermarks
}

// TopicDescriber is implemented by a Source that can list the named topics
// alone, as Topics lists them all (topics that do not exist are left out):
// a drain checks its topics' identity every CommitInterval (positions.go),
// and listing the whole cluster for it would cost in proportion to the
// cluster rather than to what is mirrored. Sources without it are asked for
// every topic.
type TopicDescriber interface {
	DescribeTopics(ctx context.Context, names []string) ([]Topic, error)
}

// Source reads a Kafka cluster on behalf of one consumer group.
// Implementations must be safe for concurrent use.
type Source interface {
	// Topics lists every topic of the cluster with its partition count. It
	// must reflect topics created or deleted moments ago (no stale cache).
	Topics(ctx context.Context) ([]Topic, error)

	// Claim joins the consumer group subscribed to topics and returns the
	// partitions this member owns until the group rebalances.
	Claim(ctx context.Context, topics []string) (Claim, error)

	// Fetch reads records of one partition from offset on, at most about
	// maxBytes. It returns an error wrapping ErrOffsetOutOfRange when offset
	// is outside the log.
	Fetch(ctx context.Context, tp TopicPartition, offset int64, maxBytes int) (Fetched, error)

	// Watermarks returns the log start and end offsets of partitions.
	Watermarks(ctx context.Context, tps []TopicPartition) (map[TopicPartition]Watermarks, error)

	// Committed returns the group's committed offsets; NoOffset where none.
	Committed(ctx context.Context, tps []TopicPartition) (map[TopicPartition]int64, error)
}

// CommitOffset is an offset to commit with the metadata stored beside it.
type CommitOffset struct {
	Offset   int64
	Metadata string
}

// Claim is a consumer-group membership: the partitions one member owns for
// one generation of the group. Kafka fences commits from a stale generation,
// so two drains in two processes never regress each other's offsets.
type Claim interface {
	// Assigned returns the owned partitions with their committed offsets
	// (NoOffset where the group has committed nothing).
	Assigned() map[TopicPartition]int64

	// Lost is closed when the group rebalanced and this claim ended.
	Lost() <-chan struct{}

	// AssignedMetadata returns the metadata stored with the committed
	// offsets of the owned partitions ("" where none).
	AssignedMetadata() map[TopicPartition]string

	// Commit stores, for owned partitions, the offset of the next record to
	// read. It fails when the claim was lost.
	Commit(ctx context.Context, offsets map[TopicPartition]int64) error

	// CommitWithMetadata is Commit with a metadata string stored beside
	// each offset (Kafka keeps it with the commit).
	//
	// Commits of one claim take effect in call order: an earlier commit,
	// even one whose caller gave up, never lands after a later one.
	CommitWithMetadata(ctx context.Context, offsets map[TopicPartition]CommitOffset) error

	// Release leaves the group. It is safe to call more than once.
	Release(ctx context.Context) error
}
