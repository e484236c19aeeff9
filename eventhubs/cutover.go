package eventhubs

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehmirror/ehmirror/cutover"
)

var _ cutover.Hubs = (*Sink)(nil)

// PartitionIDs lists hub's partitions (cached like Hub).
func (s *Sink) PartitionIDs(ctx context.Context, hub string) ([]string, error) {
	h, err := s.Hub(ctx, hub)
	if err != nil {
		return nil, err
	}
	return h.PartitionIDs, nil
}

// ScanPartition reads one partition of hub from its first retained event
// to the last one enqueued when the scan began, in order, and calls fn with
// each event's sequence number, offset and Kafka provenance. It reads in
// Options.ReaderConsumerGroup and needs the Listen right. It returns nil
// only when it reached the last event.
func (s *Sink) ScanPartition(ctx context.Context, hub, partitionID string, fn func(cutover.Event)) error {
	last, err := s.LastSequence(ctx, hub, partitionID)
	if err != nil {
		return err
	}
	if last < 0 {
		return nil
	}
	earliest := true
	pc, err := s.partitionClient(hub, partitionID, &azeventhubs.PartitionClientOptions{
		StartPosition: azeventhubs.StartPosition{Earliest: &earliest}, Prefetch: 300,
	})
	if err != nil {
		return err
	}
	defer closePartitionClient(ctx, pc)
	seen := int64(-1)
	for seen < last {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("eventhubs: scanning %q partition %s: stopped at sequence number %d of %d: %w", hub, partitionID, seen, last, err)
		}
		rctx, cancel := context.WithTimeout(ctx, receiveWait)
		evs, err := pc.ReceiveEvents(rctx, 300, nil)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("eventhubs: scanning %q partition %s after sequence number %d: %w", hub, partitionID, seen, classify(err))
		}
		for _, ev := range evs {
			if ev.SequenceNumber > last {
				return nil
			}
			ce := cutover.Event{Sequence: ev.SequenceNumber, Offset: ev.Offset}
			ce.Record, ce.RecordOffset, ce.HasProvenance = cutover.ProvenanceOf(ev.Properties)
			fn(ce)
			seen = ev.SequenceNumber
		}
	}
	return nil
}

// Namespace returns the fully qualified namespace the sink writes to, as
// the SDK's processors name it in checkpoints: the connection string's
// endpoint host, or Options.FullyQualifiedNamespace.
func (s *Sink) Namespace() (string, error) {
	if s.opts.ConnectionString == "" {
		return s.opts.FullyQualifiedNamespace, nil
	}
	p, err := azeventhubs.ParseConnectionString(s.opts.ConnectionString)
	if err != nil {
		return "", fmt.Errorf("eventhubs: connection string: %w", err)
	}
	return p.FullyQualifiedNamespace, nil
}
