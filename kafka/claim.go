package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/mirror"
)

// claim implements mirror.Claim for one generation.
type claim struct {
	m *membership
	g *generation
	// committed are the owned partitions' committed offsets, read after
	// the generation began.
	committed map[mirror.TopicPartition]int64
	metadata  map[mirror.TopicPartition]string

	releaseOnce sync.Once
	releaseErr  error
}

var _ mirror.Claim = (*claim)(nil)

// Assigned returns a copy of the owned partitions with their committed
// offsets (mirror.NoOffset where none), read with OffsetFetch after the
// generation began; an OffsetFetch error fails the Claim instead.
func (c *claim) Assigned() map[mirror.TopicPartition]int64 {
	out := make(map[mirror.TopicPartition]int64, len(c.g.assigned))
	for tp := range c.g.assigned {
		off, ok := c.committed[tp]
		if !ok {
			off = mirror.NoOffset
		}
		out[tp] = off
	}
	return out
}

// AssignedMetadata returns the metadata stored with the owned partitions'
// committed offsets.
func (c *claim) AssignedMetadata() map[mirror.TopicPartition]string {
	out := make(map[mirror.TopicPartition]string, len(c.metadata))
	for tp, m := range c.metadata {
		if _, ok := c.g.assigned[tp]; ok {
			out[tp] = m
		}
	}
	return out
}

// Lost is closed when the generation ends: a member joined or left (noticed
// at the next heartbeat), the coordinator moved or became unreachable, or
// the claim was released.
func (c *claim) Lost() <-chan struct{} { return c.g.lost }

// Commit commits offsets (the next offset to read per partition) with this
// claim's generation and member ID, so the coordinator rejects it once the
// generation is over. Every partition must be owned by the claim and every
// offset non-negative; nothing is sent otherwise. It fails with ErrClaimLost
// when the claim is known to be lost or the coordinator fences it.
func (c *claim) Commit(ctx context.Context, offsets map[mirror.TopicPartition]int64) error {
	if c.g.ended() {
		return fmt.Errorf("kafka: commit group %q generation %d: %w", c.m.s.opts.Group, c.g.gen.ID, ErrClaimLost)
	}
	with := make(map[mirror.TopicPartition]mirror.CommitOffset, len(offsets))
	for tp, off := range offsets {
		with[tp] = mirror.CommitOffset{Offset: off}
	}
	return c.m.afterCommit(c.commit(ctx, with))
}

// CommitWithMetadata is Commit with metadata stored beside each offset.
func (c *claim) CommitWithMetadata(ctx context.Context, offsets map[mirror.TopicPartition]mirror.CommitOffset) error {
	if c.g.ended() {
		return fmt.Errorf("kafka: commit group %q generation %d: %w", c.m.s.opts.Group, c.g.gen.ID, ErrClaimLost)
	}
	return c.m.afterCommit(c.commit(ctx, offsets))
}

// commit sends the OffsetCommit without the local lost check (tests use it
// to show the coordinator's own fencing).
func (c *claim) commit(ctx context.Context, offsets map[mirror.TopicPartition]mirror.CommitOffset) error {
	s := c.m.s
	if len(offsets) == 0 {
		return nil
	}
	if s.isClosed() {
		return fmt.Errorf("kafka: commit group %q: %w", s.opts.Group, ErrClosed)
	}
	topics := make(map[string][]kafkago.OffsetCommit)
	for tp, off := range offsets {
		if _, ok := c.g.assigned[tp]; !ok {
			return fmt.Errorf("kafka: commit group %q: %s is not owned by this claim", s.opts.Group, tp)
		}
		if off.Offset < 0 {
			return fmt.Errorf("kafka: commit group %q: %s: negative offset %d", s.opts.Group, tp, off.Offset)
		}
		topics[tp.Topic] = append(topics[tp.Topic], kafkago.OffsetCommit{Partition: int(tp.Partition), Offset: off.Offset, Metadata: off.Metadata})
	}
	req := &kafkago.OffsetCommitRequest{
		GroupID:      s.opts.Group,
		GenerationID: int(c.g.gen.ID),
		MemberID:     c.g.gen.MemberID,
		Topics:       topics,
	}
	var failed error
	err := s.withRetry(ctx, func(ctx context.Context) error {
		rctx, cancel := s.requestCtx(ctx, 0)
		defer cancel()
		res, err := s.client.OffsetCommit(rctx, req)
		if err != nil {
			return err
		}
		failed = partitionErrors(res.Topics)
		if failed != nil && staleRouting(failed) {
			return failed // the coordinator moved: retry once
		}
		return nil
	})
	if err == nil {
		err = failed
	}
	if err == nil {
		return nil
	}
	for _, fenced := range []error{kafkago.IllegalGeneration, kafkago.UnknownMemberId, kafkago.RebalanceInProgress, kafkago.FencedInstanceID} {
		if errors.Is(err, fenced) {
			return fmt.Errorf("kafka: commit group %q generation %d: %w: %w", s.opts.Group, c.g.gen.ID, ErrClaimLost, err)
		}
	}
	return fmt.Errorf("kafka: commit group %q generation %d: %w", s.opts.Group, c.g.gen.ID, err)
}

// Release ends the claim (Lost closes, commits are refused). The process's
// membership leaves the group (LeaveGroup) when no other claim holds it:
// after Options.IdleGrace, or at once, waiting for the leave up to ctx, when
// the grace is zero, the membership is retired or its generation ended (see
// membership). It is safe to call more than once; later calls return the
// first result.
func (c *claim) Release(ctx context.Context) error {
	c.releaseOnce.Do(func() {
		if err := c.m.release(ctx, c); err != nil {
			c.releaseErr = fmt.Errorf("kafka: release group %q: %w", c.m.s.opts.Group, err)
		}
	})
	return c.releaseErr
}

// partitionErrors summarises the per-partition errors of an OffsetCommit
// response: nil when there are none, else one error naming the partitions
// and wrapping the first distinct error of each kind.
func partitionErrors(topics map[string][]kafkago.OffsetCommitPartition) error {
	byErr := make(map[string][]string)
	first := make(map[string]error)
	var order []string
	for topic, ps := range topics {
		for _, p := range ps {
			if p.Error == nil {
				continue
			}
			k := p.Error.Error()
			if _, ok := first[k]; !ok {
				first[k] = p.Error
				order = append(order, k)
			}
			byErr[k] = append(byErr[k], fmt.Sprintf("%s/%d", topic, p.Partition))
		}
	}
	if len(order) == 0 {
		return nil
	}
	errs := make([]error, 0, len(order))
	for _, k := range order {
		tps := byErr[k]
		slices.Sort(tps)
		errs = append(errs, fmt.Errorf("%s: %w", strings.Join(tps, ", "), first[k]))
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
