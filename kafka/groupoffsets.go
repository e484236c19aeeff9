package kafka

import (
	"context"
	"errors"
	"fmt"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/describegroups"

	"github.com/ehmirror/ehmirror/mirror"
)

// MembersOf returns how many members a consumer group has now: an
// application's group, for the cut-over to Event Hubs (GroupMembers is
// the mirror's own group). A group the coordinator does not know has 0.
func (s *Source) MembersOf(ctx context.Context, group string) (int, error) {
	if s.isClosed() {
		return 0, fmt.Errorf("kafka: describe group: %w", ErrClosed)
	}
	var n int
	err := s.withRetry(ctx, func(ctx context.Context) error {
		rctx, cancel := s.requestCtx(ctx, 0)
		defer cancel()
		// The raw message: kafka-go's Client.DescribeGroups decodes every
		// member's subscription and fails on other clients' (a franz-go or
		// Java consumer's newer ConsumerProtocol versions); counting needs
		// none of it.
		m, err := s.transport.RoundTrip(rctx, s.addr, &describegroups.Request{Groups: []string{group}})
		if err != nil {
			return err
		}
		res, ok := m.(*describegroups.Response)
		if !ok {
			return fmt.Errorf("unexpected answer %T", m)
		}
		n = 0
		for _, g := range res.Groups {
			if g.ErrorCode != 0 {
				if err := kafkago.Error(g.ErrorCode); !errors.Is(err, kafkago.GroupIdNotFound) {
					return err
				}
			}
			n += len(g.Members)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("kafka: describe group %q: %w", group, err)
	}
	return n, nil
}

// CommittedOf returns a consumer group's committed offsets for tps
// (OffsetFetch), mirror.NoOffset where it committed nothing: an
// application's group, for the cut-over to Event Hubs.
func (s *Source) CommittedOf(ctx context.Context, group string, tps []mirror.TopicPartition) (map[mirror.TopicPartition]int64, error) {
	out, _, err := s.committedOf(ctx, group, tps)
	return out, err
}

// committedOf returns group's committed offsets and the metadata stored
// with them.
func (s *Source) committedOf(ctx context.Context, group string, tps []mirror.TopicPartition) (map[mirror.TopicPartition]int64, map[mirror.TopicPartition]string, error) {
	if s.isClosed() {
		return nil, nil, fmt.Errorf("kafka: committed offsets: %w", ErrClosed)
	}
	out := make(map[mirror.TopicPartition]int64, len(tps))
	meta := make(map[mirror.TopicPartition]string, len(tps))
	if len(tps) == 0 {
		return out, meta, nil
	}
	req := &kafkago.OffsetFetchRequest{GroupID: group, Topics: make(map[string][]int)}
	for _, tp := range tps {
		req.Topics[tp.Topic] = append(req.Topics[tp.Topic], int(tp.Partition))
	}
	var res *kafkago.OffsetFetchResponse
	err := s.withRetry(ctx, func(ctx context.Context) error {
		rctx, cancel := s.requestCtx(ctx, 0)
		defer cancel()
		var err error
		if res, err = s.client.OffsetFetch(rctx, req); err != nil {
			return err
		}
		if errors.Is(res.Error, kafkago.GroupIdNotFound) {
			// A group that never committed: kfake answers so; Kafka
			// answers -1 offsets. Both mean nothing is committed.
			res = &kafkago.OffsetFetchResponse{}
			return nil
		}
		if res.Error != nil {
			return res.Error
		}
		return partitionError(res.Topics, func(p kafkago.OffsetFetchPartition) (int, error) { return p.Partition, p.Error })
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: committed offsets of group %q: %w", group, err)
	}
	for _, tp := range tps {
		out[tp] = mirror.NoOffset
	}
	for topic, ps := range res.Topics {
		for _, p := range ps {
			tp := mirror.TopicPartition{Topic: topic, Partition: int32(p.Partition)}
			if _, asked := out[tp]; !asked {
				continue
			}
			if p.CommittedOffset >= 0 {
				out[tp] = p.CommittedOffset
				meta[tp] = p.Metadata
			}
		}
	}
	return out, meta, nil
}
