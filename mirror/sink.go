package mirror

import (
	"context"
	"errors"
	"time"
)

// Errors a [Sink] wraps so that the engine can tell what to do. Any other
// error from Send is treated as transient and retried within the drain's
// deadline.
var (
	// ErrHubNotFound: the event hub (or partition) does not exist. Fatal for
	// the topics routed to it.
	ErrHubNotFound = errors.New("event hub not found")
	// ErrUnauthorized: the credentials were refused. Fatal.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrEventTooLarge: one event exceeds the hub's maximum message size.
	ErrEventTooLarge = errors.New("event larger than the maximum message size")
	// ErrBatchFull: the event does not fit into this batch; send it and start
	// another.
	ErrBatchFull = errors.New("batch full")
	// ErrThrottled: Event Hubs answered server-busy. Retried with backoff.
	ErrThrottled = errors.New("throttled by Event Hubs")
)

// Hub describes one event hub.
type Hub struct {
	Name         string
	PartitionIDs []string
}

// Event is what one Kafka record becomes in Event Hubs.
type Event struct {
	// Body is the record value.
	Body []byte
	// Properties are the AMQP application properties: strings, []byte,
	// int64, bool and time.Time values only, or, in the events the
	// engine hands to [Batch.Add], pointers to []byte, int64 and
	// time.Time values that it changes once Add returns (boxing the
	// values allocated for every record).
	Properties map[string]any
	// MessageID identifies the record: "topic/partition/offset".
	MessageID string
}

// PropertyValues returns a copy of props with the values pointers point at
// (see [Event]) in place of the pointers: a map a [Batch] may keep.
func PropertyValues(props map[string]any) map[string]any {
	c := make(map[string]any, len(props))
	for k, v := range props {
		switch p := v.(type) {
		case *int64:
			c[k] = *p
		case *time.Time:
			c[k] = *p
		case *[]byte:
			c[k] = *p
		default:
			c[k] = v
		}
	}
	return c
}

// Batch collects events for one partition of one event hub, up to the size
// the hub accepts in one publication.
type Batch interface {
	// Add appends e. It returns an error wrapping ErrBatchFull when e does not
	// fit, and ErrEventTooLarge when e would not fit into an empty batch.
	// It keeps neither e nor its Properties map nor the values its
	// pointers point at after it returns: the engine reuses them all for
	// the next event.
	Add(e *Event) error
	// Len is the number of events added.
	Len() int
	// Bytes is the encoded size of the batch.
	Bytes() int
}

// Sink publishes to an Event Hubs namespace. Implementations must be safe
// for concurrent use.
type Sink interface {
	// Hub describes an event hub, or returns an error wrapping ErrHubNotFound.
	Hub(ctx context.Context, name string) (Hub, error)
	// NewBatch starts an empty batch for one partition of a hub.
	NewBatch(ctx context.Context, hub, partitionID string) (Batch, error)
	// Send publishes a batch. It returns nil only when Event Hubs accepted
	// every event in it. It does not send the batch again after an error
	// whose outcome it does not know: the drain decides (an error wrapping
	// ErrThrottled means the batch was refused and not stored).
	Send(ctx context.Context, b Batch) error
}
