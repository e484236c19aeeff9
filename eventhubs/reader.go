package eventhubs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehmirror/ehmirror/mirror"
)

var _ mirror.HubReader = (*Sink)(nil)

// receiveWait bounds one ReceiveEvents call; reading stops with an error
// (never silently) when the events up to the requested sequence number do
// not arrive before the caller's context ends.
const receiveWait = 2 * time.Second

// consumer returns the cached consumer client of hub, creating it on first
// use. It reads in ReaderConsumerGroup (default "$Default").
func (s *Sink) consumer(hub string) (*azeventhubs.ConsumerClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.consumers[hub]; ok {
		return c, nil
	}
	group := s.opts.ReaderConsumerGroup
	if group == "" {
		group = azeventhubs.DefaultConsumerGroup
	}
	opts := &azeventhubs.ConsumerClientOptions{ApplicationID: "ehmirror", RetryOptions: s.opts.Retry}
	var c *azeventhubs.ConsumerClient
	var err error
	if s.opts.ConnectionString != "" {
		c, err = azeventhubs.NewConsumerClientFromConnectionString(s.opts.ConnectionString, hub, group, opts)
	} else {
		c, err = azeventhubs.NewConsumerClient(s.opts.FullyQualifiedNamespace, hub, group, s.opts.Credential, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("eventhubs: consumer for %q: %w", hub, err)
	}
	s.consumers[hub] = c
	return c, nil
}

// LastSequence returns the sequence number of the last event enqueued in
// one partition of hub, or -1 when the partition holds none.
func (s *Sink) LastSequence(ctx context.Context, hub, partitionID string) (int64, error) {
	var props azeventhubs.PartitionProperties
	err := s.read(ctx, hub, true, func(p *producer) (err error) {
		props, err = p.GetPartitionProperties(ctx, partitionID, nil)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("eventhubs: reading properties of %q partition %s: %w", hub, partitionID, classify(err))
	}
	if props.IsEmpty {
		return -1, nil
	}
	return props.LastEnqueuedSequenceNumber, nil
}

// ReadAfter reads the events of one partition of hub whose sequence numbers
// are above after and at most until, in order, and calls fn for each. It
// needs the Listen right; without it the error wraps mirror.ErrUnauthorized.
// It returns nil only when it reached until.
func (s *Sink) ReadAfter(ctx context.Context, hub, partitionID string, after, until int64, fn func(mirror.StoredEvent)) error {
	if until <= after {
		return nil
	}
	start := azeventhubs.StartPosition{SequenceNumber: &after, Inclusive: false}
	if after < 0 {
		earliest := true
		start = azeventhubs.StartPosition{Earliest: &earliest}
	}
	pc, err := s.partitionClient(hub, partitionID, &azeventhubs.PartitionClientOptions{StartPosition: start, Prefetch: 300})
	if err != nil {
		return err
	}
	defer closePartitionClient(ctx, pc)
	last := after
	for last < until {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("eventhubs: reading %q partition %s: stopped at sequence number %d of %d: %w", hub, partitionID, last, until, err)
		}
		rctx, cancel := context.WithTimeout(ctx, receiveWait)
		// Ask for no more than what is left, so the call returns as soon
		// as the last event arrived.
		evs, err := pc.ReceiveEvents(rctx, int(min(until-last, 300)), nil)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("eventhubs: reading %q partition %s after sequence number %d: %w", hub, partitionID, last, classify(err))
		}
		for _, ev := range evs {
			if ev.SequenceNumber > until {
				return nil
			}
			se := mirror.StoredEvent{Sequence: ev.SequenceNumber, Body: ev.Body, Properties: ev.Properties}
			if ev.MessageID != nil {
				se.MessageID = *ev.MessageID
			}
			fn(se)
			last = ev.SequenceNumber
		}
	}
	return nil
}

// CheckListen opens a receiver on one partition of hub, at the event with
// sequence number at (which then arrives at once) or, when at is negative,
// at the partition's end, and returns an error wrapping
// mirror.ErrUnauthorized when the service refuses it (no Listen right).
// Other outcomes, including no event arriving within 500 ms, are nil.
func (s *Sink) CheckListen(ctx context.Context, hub, partitionID string, at int64) error {
	latest := true
	start := azeventhubs.StartPosition{Latest: &latest}
	if at >= 0 {
		start = azeventhubs.StartPosition{SequenceNumber: &at, Inclusive: true}
	}
	pc, err := s.partitionClient(hub, partitionID, &azeventhubs.PartitionClientOptions{StartPosition: start, Prefetch: -1})
	if err != nil {
		return err
	}
	defer closePartitionClient(ctx, pc)
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := pc.ReceiveEvents(rctx, 1, nil); err != nil {
		if err := classify(err); errors.Is(err, mirror.ErrUnauthorized) {
			return fmt.Errorf("eventhubs: reading %q: %w", hub, err)
		}
	}
	return nil
}

// partitionClient opens a receiver on one partition of hub with the
// sink's consumer client for that hub.
func (s *Sink) partitionClient(hub, partitionID string, opts *azeventhubs.PartitionClientOptions) (*azeventhubs.PartitionClient, error) {
	c, err := s.consumer(hub)
	if err != nil {
		return nil, err
	}
	pc, err := c.NewPartitionClient(partitionID, opts)
	if err != nil {
		return nil, fmt.Errorf("eventhubs: reader for %q partition %s: %w", hub, partitionID, classify(err))
	}
	return pc, nil
}

// closePartitionClient closes pc, waiting up to 5 s even when ctx has ended.
func closePartitionClient(ctx context.Context, pc *azeventhubs.PartitionClient) {
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = pc.Close(closeCtx)
}
