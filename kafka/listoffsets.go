package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/listoffsets"
	"golang.org/x/sync/errgroup"

	"github.com/ehmirror/ehmirror/mirror"
)

// ListOffsets timestamps: the log start and the log end (under
// read_committed isolation, the last stable offset).
const (
	earliestTimestamp = -2
	latestTimestamp   = -1
)

// listOffsets is offsetsAt bounded by RequestTimeout, once more after
// stale routing metadata.
func (s *Source) listOffsets(ctx context.Context, tps []mirror.TopicPartition, timestamps ...int64) (map[int64]map[mirror.TopicPartition]int64, error) {
	var out map[int64]map[mirror.TopicPartition]int64
	err := s.withRetry(ctx, func(ctx context.Context) error {
		rctx, cancel := s.requestCtx(ctx, 0)
		defer cancel()
		var err error
		out, err = s.offsetsAt(rctx, tps, timestamps...)
		return err
	})
	return out, err
}

// offsetsAt returns, for each timestamp and each of tps, the offset
// ListOffsets answers under read_committed isolation (-1 where the broker
// found none), in one request per partition leader and timestamp, all sent
// at once. kafka-go's Client.ListOffsets sends one request per partition
// and offset: reading the watermarks of 20 partitions took 40 requests,
// each on a connection of its own (the Transport opens one per request in
// flight), two to three round trips where one does, and it took the idle
// connections a commit sent beside it needed, so the commit waited for a
// new connection. The leaders come from the Transport's cached metadata; a
// partition whose leader moved fails with the broker's error, which
// withRetry takes for stale routing.
func (s *Source) offsetsAt(ctx context.Context, tps []mirror.TopicPartition, timestamps ...int64) (map[int64]map[mirror.TopicPartition]int64, error) {
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	md, err := s.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("partition leaders: %w", err)
	}
	leaders := make(map[mirror.TopicPartition]int32, len(tps))
	for _, t := range md.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("partition leaders of %s: %w", t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			leaders[mirror.TopicPartition{Topic: t.Name, Partition: int32(p.ID)}] = int32(p.Leader.ID)
		}
	}
	byLeader := make(map[int32][]mirror.TopicPartition)
	for _, tp := range tps {
		leader, ok := leaders[tp]
		if !ok {
			return nil, fmt.Errorf("%s: %w", tp, kafkago.UnknownTopicOrPartition)
		}
		byLeader[leader] = append(byLeader[leader], tp)
	}

	type answer struct {
		timestamp int64
		res       *listoffsets.Response
	}
	answers := make(chan answer, len(byLeader)*len(timestamps))
	g, gctx := errgroup.WithContext(ctx)
	for leader, parts := range byLeader {
		for _, ts := range timestamps {
			g.Go(func() error {
				m, err := s.transport.RoundTrip(gctx, s.addr, &brokerRequest{
					Message:  listOffsetsRequest(parts, ts),
					node:     leader,
					clientID: s.opts.ClientID,
					unknown:  kafkago.NotLeaderForPartition,
				})
				if err != nil {
					return err
				}
				res, ok := m.(*listoffsets.Response)
				if !ok {
					return fmt.Errorf("unexpected answer %T", m)
				}
				answers <- answer{ts, res}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	close(answers)
	out := make(map[int64]map[mirror.TopicPartition]int64, len(timestamps))
	for _, ts := range timestamps {
		out[ts] = make(map[mirror.TopicPartition]int64, len(tps))
	}
	var errs []error
	for a := range answers {
		for _, t := range a.res.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					errs = append(errs, fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, kafkago.Error(p.ErrorCode)))
					continue
				}
				out[a.timestamp][mirror.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, ts := range timestamps {
		for _, tp := range tps {
			if _, ok := out[ts][tp]; !ok {
				return nil, fmt.Errorf("no answer for %s", tp)
			}
		}
	}
	return out, nil
}

// listOffsetsRequest asks for the offsets at timestamp of partitions (all
// led by one broker), under read_committed isolation.
func listOffsetsRequest(partitions []mirror.TopicPartition, timestamp int64) *listoffsets.Request {
	req := &listoffsets.Request{ReplicaID: -1, IsolationLevel: int8(kafkago.ReadCommitted)}
	index := make(map[string]int)
	for _, tp := range partitions {
		i, ok := index[tp.Topic]
		if !ok {
			i = len(req.Topics)
			index[tp.Topic] = i
			req.Topics = append(req.Topics, listoffsets.RequestTopic{Topic: tp.Topic})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, listoffsets.RequestPartition{
			Partition:          tp.Partition,
			CurrentLeaderEpoch: -1,
			Timestamp:          timestamp,
		})
	}
	return req
}
