package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	released    atomic.Bool

	// commitMu keeps the claim's commits in order: one at a time, and
	// none sent before the previous request is over (answered, or given up
	// after commitRequestLimit), even when its caller stopped
	// waiting earlier. So an older commit can never overtake a newer one.
	commitMu sync.Mutex
	// inflight is the previous commit's request; its done closes when it is
	// over.
	inflight *commitRequest
	// uncertain is set when a commit's outcome stayed unknown (its
	// connection broke or timed out): the broker may have applied it late.
	// The next successful commit then reads the offsets back and commits
	// again when they are lower.
	uncertain bool

	bgMu     sync.Mutex
	bg       context.Context
	bgCancel context.CancelFunc
}

// commitRequestLimit bounds how long a commit's request may wait for the
// broker's answer after its caller gave up. While it waits, later commits of
// the claim are not sent (they would race it on another connection). Kafka
// answers a commit within offsets.commit.timeout.ms (5 s) of handling it, so
// a request still unanswered after this long was lost with its connection;
// its outcome is then unknown and the next commit is read back.
const commitRequestLimit = time.Minute

// background returns the context the claim's commit requests run under:
// canceled by Release and by the Source's Close.
func (c *claim) background() context.Context {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bg == nil {
		c.bg, c.bgCancel = context.WithCancel(c.m.s.commits)
	}
	return c.bg
}

// commitRequest is one OffsetCommit on its way; err is set before done
// closes.
type commitRequest struct {
	done chan struct{}
	err  error
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

// closed reports whether the claim takes no more commits: it was released,
// or its generation ended and the member stopped waiting for its claims
// (see membership.settle; it may rejoin from then on). Between a
// generation's end and then, the member has not rejoined, so no other member
// can have been given its partitions, and the coordinator still takes the
// generation's commits (it fences them itself once the rebalance moved on,
// or the member was evicted): a drain whose claim was lost commits what
// Event Hubs acknowledged before its partitions change hands.
func (c *claim) closed() bool {
	if c.released.Load() {
		return true
	}
	select {
	case <-c.g.base.settled:
		return true
	default:
		return false
	}
}

// Commit commits offsets (the next offset to read per partition) with this
// claim's generation and member ID, so the coordinator rejects it once the
// generation is over. Every partition must be owned by the claim and every
// offset non-negative; nothing is sent otherwise. It fails with ErrClaimLost
// when the claim is closed (released, or lost and its member moved on) or
// the coordinator fences it. A commit after Lost and before the member
// rejoins is sent: the coordinator still takes it.
func (c *claim) Commit(ctx context.Context, offsets map[mirror.TopicPartition]int64) error {
	if c.closed() {
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
	if c.closed() {
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
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if prev := c.inflight; prev != nil {
		select {
		case <-prev.done:
			if prev.err != nil && !brokerAnswered(prev.err) {
				c.uncertain = true
			}
			c.inflight = nil
		case <-ctx.Done():
			return fmt.Errorf("kafka: commit group %q: not sent: the previous commit is still in flight and a later one must not overtake it: %w", s.opts.Group, ctx.Err())
		}
	}
	// The request runs up to commitRequestLimit even when the caller stops
	// waiting; the next commit waits for it.
	cr := &commitRequest{done: make(chan struct{})}
	c.inflight = cr
	bg := c.background()
	s.wg.Go(func() {
		defer close(cr.done)
		rctx, cancel := context.WithTimeout(bg, commitRequestLimit)
		defer cancel()
		cr.err = c.sendRetrying(ctx, rctx, req)
		if cr.err != nil {
			s.log.Debug("commit request failed", "generation", c.g.gen.ID, "err", cr.err)
		}
		if cr.err != nil && !brokerAnswered(cr.err) && rctx.Err() == nil {
			// The connection broke without an answer: send the same
			// offsets again on a new one. Should the first request still
			// land, it carries the same offsets, so nothing regresses.
			cr.err = c.sendRetrying(ctx, rctx, req)
		}
		if cr.err == nil && c.uncertainSnapshot() {
			cr.err = c.verify(rctx, req, offsets)
		}
	})
	var err error
	select {
	case <-cr.done:
		c.inflight = nil
		err = cr.err
		if err != nil && !brokerAnswered(err) {
			c.uncertain = true
		}
	case <-ctx.Done():
		return fmt.Errorf("kafka: commit group %q generation %d: outcome unknown, the request goes on in the background: %w", s.opts.Group, c.g.gen.ID, ctx.Err())
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

// Commit errors the coordinator answers while it cannot take the commit
// now (its replicas timed out, it is loading the group or moved) are retried,
// as Kafka's own consumer retries a synchronous commit: sending the same
// offsets again is harmless, a REQUEST_TIMED_OUT commit having perhaps been
// applied already. Retries go on while the caller waits for the commit, at
// most until the request's limit, so they never hold up a later commit.
const (
	commitRetryBackoff    = 100 * time.Millisecond
	maxCommitRetryBackoff = time.Second
)

// retriableCommit reports a commit error that retrying may fix: every
// partition's error is one of those above, or no connection could
// authenticate for want of a credential (the token endpoint is down: the
// commit waits for a token while the caller waits, so that what Event
// Hubs acknowledged is committed).
func retriableCommit(err error) bool {
	if errors.Is(err, ErrNoCredential) {
		return true
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !retriableCommit(e) {
				return false
			}
		}
		return true
	}
	for _, target := range []error{kafkago.RequestTimedOut, kafkago.GroupLoadInProgress, kafkago.GroupCoordinatorNotAvailable, kafkago.NotCoordinatorForGroup} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// sendRetrying sends req (send), again after a retriable answer while the
// caller (waiting) still waits and ctx, the request's limit, allows.
func (c *claim) sendRetrying(waiting, ctx context.Context, req *kafkago.OffsetCommitRequest) error {
	backoff := commitRetryBackoff
	for attempt := 1; ; attempt++ {
		err := c.send(ctx, req)
		if err == nil || !retriableCommit(err) || waiting.Err() != nil {
			return err
		}
		c.m.s.log.Debug("commit answered with a retriable error; retrying", "generation", c.g.gen.ID, "attempt", attempt, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-waiting.Done():
			t.Stop()
			return err
		case <-ctx.Done():
			t.Stop()
			return err
		}
		backoff = min(2*backoff, maxCommitRetryBackoff)
	}
}

// send sends one OffsetCommit (retried once after stale routing) and
// returns the first error, partition-level ones included.
func (c *claim) send(ctx context.Context, req *kafkago.OffsetCommitRequest) error {
	s := c.m.s
	var failed error
	// ctx bounds the request (commitRequestLimit), not RequestTimeout: a
	// commit is waited for until the broker answers.
	err := s.withRetry(ctx, func(ctx context.Context) error {
		res, err := s.client.OffsetCommit(ctx, req)
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
	return err
}

// uncertainSnapshot reports and clears uncertain; commitMu is held by the
// commit whose request calls it (its caller waits for it or leaves it as
// c.inflight, which the next commit waits for).
func (c *claim) uncertainSnapshot() bool {
	u := c.uncertain
	c.uncertain = false
	return u
}

// verify resolves an earlier commit of unknown outcome: it reads the
// committed offsets back and commits again when a late request of that
// earlier commit overwrote the one just made.
func (c *claim) verify(ctx context.Context, req *kafkago.OffsetCommitRequest, offsets map[mirror.TopicPartition]mirror.CommitOffset) error {
	s := c.m.s
	tps := make([]mirror.TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	got, _, err := s.committed(ctx, tps)
	if err != nil {
		return fmt.Errorf("reading back offsets after a commit of unknown outcome: %w", err)
	}
	for tp, off := range offsets {
		if got[tp] < off.Offset {
			s.log.Warn("an earlier commit of unknown outcome overtook a later one; committing again",
				"topic", tp.Topic, "partition", tp.Partition, "committed", got[tp], "want", off.Offset)
			return c.send(ctx, req)
		}
	}
	return nil
}

// brokerAnswered reports whether err is the broker's answer (so the request's
// outcome is known) rather than a timeout or a broken connection.
func brokerAnswered(err error) bool {
	var ke kafkago.Error
	return errors.As(err, &ke)
}

// Release ends the claim (Lost closes, commits are refused). The process's
// membership leaves the group (LeaveGroup) when no other claim holds it:
// after Options.IdleGrace, or at once, waiting for the leave up to ctx, when
// the grace is zero, the membership is retired or its generation ended (see
// membership). It is safe to call more than once; later calls return the
// first result.
func (c *claim) Release(ctx context.Context) error {
	c.releaseOnce.Do(func() {
		c.released.Store(true)
		c.bgMu.Lock()
		if c.bgCancel != nil {
			c.bgCancel() // a commit request still waiting is abandoned
		}
		c.bgMu.Unlock()
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
