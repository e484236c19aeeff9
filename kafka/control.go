package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/mirror"
)

// This file implements mirror.Control: what offset resets and pauses need
// besides the Source. Pauses live in a separate consumer group that never
// has members, "<group>.control": a pause is a simple commit (generation
// -1, as kafka-consumer-groups.sh does) on partition 0 of the topic, whose
// metadata holds the pause record. The main group's commit metadata is left
// to positions.

var _ mirror.Control = (*Source)(nil)

// controlPartition is the partition whose commit in the control group
// holds a topic's control record.
const controlPartition = 0

// ControlGroup returns the name of the control group that holds the
// control records of slot (mirror.ControlSlotDecision is "<group>.control",
// mirror.ControlSlotKept "<group>.control.kept").
func (s *Source) ControlGroup(slot string) string { return s.opts.Group + "." + slot }

// CommittedMetadata returns the group's committed offsets with their
// metadata (mirror.NoOffset and "" where none).
func (s *Source) CommittedMetadata(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]mirror.CommitOffset, error) {
	offsets, meta, err := s.committed(ctx, tps)
	if err != nil {
		return nil, err
	}
	out := make(map[mirror.TopicPartition]mirror.CommitOffset, len(offsets))
	for tp, off := range offsets {
		out[tp] = mirror.CommitOffset{Offset: off, Metadata: meta[tp]}
	}
	return out, nil
}

// OffsetsForTime returns, per partition, the earliest offset whose record
// timestamp is at or after t (ListOffsets by timestamp), or the log end when
// no record is that recent.
func (s *Source) OffsetsForTime(ctx context.Context, tps []mirror.TopicPartition, t time.Time) (map[mirror.TopicPartition]int64, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("kafka: offsets for time: %w", ErrClosed)
	}
	out := make(map[mirror.TopicPartition]int64, len(tps))
	if len(tps) == 0 {
		return out, nil
	}
	ts := t.UnixMilli()
	offs, err := s.listOffsets(ctx, tps, ts)
	if err != nil {
		return nil, fmt.Errorf("kafka: offsets at %s of %d partitions: %w", t.Format(time.RFC3339), len(tps), err)
	}
	var missing []mirror.TopicPartition
	for tp, off := range offs[ts] {
		if off >= 0 {
			out[tp] = off
		}
	}
	for _, tp := range tps {
		if _, ok := out[tp]; !ok {
			missing = append(missing, tp)
		}
	}
	if len(missing) > 0 {
		wms, err := s.Watermarks(ctx, missing)
		if err != nil {
			return nil, err
		}
		for _, tp := range missing {
			out[tp] = wms[tp].End
		}
	}
	return out, nil
}

// OtherMembers returns how many members the mirror's consumer group has now
// besides this process's own (drains of other instances are members while
// they run).
func (s *Source) OtherMembers(ctx context.Context) (int, error) {
	if s.isClosed() {
		return 0, fmt.Errorf("kafka: describe group: %w", ErrClosed)
	}
	var n int
	err := s.withRetry(ctx, func(ctx context.Context) error {
		rctx, cancel := s.requestCtx(ctx, 0)
		defer cancel()
		res, err := s.client.DescribeGroups(rctx, &kafkago.DescribeGroupsRequest{GroupIDs: []string{s.opts.Group}})
		if err != nil {
			return err
		}
		own := s.ownMemberIDs()
		n = 0
		for _, g := range res.Groups {
			if g.Error != nil && !errors.Is(g.Error, kafkago.GroupIdNotFound) {
				return g.Error
			}
			for _, mb := range g.Members {
				if !own[mb.MemberID] {
					n++
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("kafka: describe group %q: %w", s.opts.Group, err)
	}
	return n, nil
}

// ControlRecords returns the control records of topics in slot ("" where
// none).
func (s *Source) ControlRecords(ctx context.Context, slot string, topics []string) (map[string]string, error) {
	tps := make([]mirror.TopicPartition, len(topics))
	for i, t := range topics {
		tps[i] = mirror.TopicPartition{Topic: t, Partition: controlPartition}
	}
	recs, err := s.PartitionRecords(ctx, slot, tps)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(recs))
	for tp, r := range recs {
		out[tp.Topic] = r
	}
	return out, nil
}

// WriteControlRecord stores a topic's control record in slot: a simple
// commit (generation -1, no member) in the slot's control group.
func (s *Source) WriteControlRecord(ctx context.Context, slot, topic, record string) error {
	err := s.WritePartitionRecords(ctx, slot, map[mirror.TopicPartition]string{{Topic: topic, Partition: controlPartition}: record})
	if err != nil {
		return fmt.Errorf("kafka: control record of %q: %w", topic, err)
	}
	return nil
}

var _ mirror.PartitionControl = (*Source)(nil)

// PartitionRecords returns the records of tps in slot ("" or absent where
// none): the commit metadata of the slot's control group.
func (s *Source) PartitionRecords(ctx context.Context, slot string, tps []mirror.TopicPartition) (map[mirror.TopicPartition]string, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("kafka: control records: %w", ErrClosed)
	}
	out := make(map[mirror.TopicPartition]string, len(tps))
	if len(tps) == 0 {
		return out, nil
	}
	req := &kafkago.OffsetFetchRequest{GroupID: s.ControlGroup(slot), Topics: make(map[string][]int)}
	for _, tp := range tps {
		req.Topics[tp.Topic] = append(req.Topics[tp.Topic], int(tp.Partition))
	}
	err := s.withRetry(ctx, func(ctx context.Context) error {
		rctx, cancel := s.requestCtx(ctx, 0)
		defer cancel()
		res, err := s.client.OffsetFetch(rctx, req)
		if err != nil {
			return err
		}
		if errors.Is(res.Error, kafkago.GroupIdNotFound) {
			return nil // nothing ever written
		}
		if res.Error != nil {
			return res.Error
		}
		for topic, ps := range res.Topics {
			for _, p := range ps {
				if p.Error != nil {
					if errors.Is(p.Error, kafkago.UnknownTopicOrPartition) {
						continue
					}
					return fmt.Errorf("%s/%d: %w", topic, p.Partition, p.Error)
				}
				if p.CommittedOffset >= 0 {
					out[mirror.TopicPartition{Topic: topic, Partition: int32(p.Partition)}] = p.Metadata
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: control records of group %q: %w", s.ControlGroup(slot), err)
	}
	return out, nil
}

// WritePartitionRecords stores records in slot in one request: a simple
// commit (generation -1, no member) in the slot's control group, the
// record as the commit's metadata.
func (s *Source) WritePartitionRecords(ctx context.Context, slot string, records map[mirror.TopicPartition]string) error {
	if s.isClosed() {
		return fmt.Errorf("kafka: control record: %w", ErrClosed)
	}
	if len(records) == 0 {
		return nil
	}
	req := &kafkago.OffsetCommitRequest{GroupID: s.ControlGroup(slot), GenerationID: -1, Topics: map[string][]kafkago.OffsetCommit{}}
	for tp, r := range records {
		req.Topics[tp.Topic] = append(req.Topics[tp.Topic], kafkago.OffsetCommit{Partition: int(tp.Partition), Offset: 0, Metadata: r})
	}
	err := s.withRetry(ctx, func(ctx context.Context) error {
		rctx, cancel := s.requestCtx(ctx, 0)
		defer cancel()
		res, err := s.client.OffsetCommit(rctx, req)
		if err != nil {
			return err
		}
		return partitionError(res.Topics, func(p kafkago.OffsetCommitPartition) (int, error) { return p.Partition, p.Error })
	})
	if err != nil {
		return fmt.Errorf("kafka: control records in group %q: %w", s.ControlGroup(slot), err)
	}
	return nil
}

// ownMemberIDs returns the member ids of this process's live memberships.
func (s *Source) ownMemberIDs() map[string]bool {
	s.mu.Lock()
	members := make([]*membership, 0, len(s.members))
	for m := range s.members {
		members = append(members, m)
	}
	s.mu.Unlock()
	own := make(map[string]bool, len(members))
	for _, m := range members {
		m.mu.Lock()
		if m.memberID != "" {
			own[m.memberID] = true
		}
		m.mu.Unlock()
	}
	return own
}
