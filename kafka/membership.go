package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/mirror"
)

// errMembershipClosed is what the gated dialer answers once a membership is
// closing, so kafka-go's ConsumerGroup cannot rejoin behind our back.
var errMembershipClosed = errors.New("kafka: group membership closed")

// membership is the process's one consumer-group member (one kafka-go
// ConsumerGroup). Every drain of the process claims through it: claims made
// while a generation is live share that generation, and the mirror keeps
// two drains off the same partition (Mirror.hold), so a second concurrent
// drain works on what the first is not holding instead of joining again and
// rebalancing the first.
//
// Lifetime. The member stays while a claim is held or a Claim waits for a
// generation. When the last claim is released it stays IdleGrace longer, so
// back-to-back drains (a catch-up's drains, a timer run right after another
// drain) do not leave and join again (on a real broker an empty group waits
// group.initial.rebalance.delay.ms, 3 s by default, before its first
// generation, and every join rebalances the other members). An unused
// member leaves at once when its generation ends (another member joined or
// left), so it never takes partitions in a new generation it will not drain.
// A membership whose subscription no longer fits the claims is retired: it
// takes no new claims and leaves as soon as its last claim is released.
type membership struct {
	s      *Source
	topics []string // the subscription, sorted
	cg     *kafkago.ConsumerGroup
	log    *slog.Logger

	ctx    context.Context // cancelled when closing; stops the pump
	cancel context.CancelFunc

	connMu sync.Mutex
	gated  bool
	conns  map[*trackedConn]struct{}

	mu         sync.Mutex
	current    *generation         // newest live generation, nil while (re)joining
	err        error               // terminal error from ConsumerGroup.Next
	notify     chan struct{}       // closed (and replaced) when current or err change
	claims     map[*claim]struct{} // claims not yet released
	waiters    int                 // Claim calls waiting for a generation
	retired    bool                // takes no new claims; leaves when unused
	closing    bool
	memberID   string
	graceTimer *time.Timer

	closeOnce sync.Once
	done      chan struct{} // closed when fully closed
	closeErr  error         // LeaveGroup outcome; read after done
}

// Claim returns a claim on this process's group membership subscribed to
// topics: the partitions of those topics the member owns in the current
// generation, with their committed offsets. It joins the consumer group
// (Options.Group; kafka-go's ConsumerGroup, round-robin else range
// assignment) only when the process has no membership that fits:
//
//   - A membership subscribed to exactly topics, or in use by another claim
//     and subscribed to a superset of topics, is shared: the claim takes its
//     live generation without a rebalance (or waits for the one being
//     joined).
//   - Otherwise a new member joins, subscribed to topics plus the topics of
//     the claims still using the old one, and the old member is retired: it
//     leaves once its claims are released (at once when it has none).
//
// The wait for a generation is bounded by the join bound (see joinBound):
// a JoinGroup or SyncGroup that does not complete within it fails the Claim,
// and a membership nobody else waits for is abandoned: it takes no claim
// and leaves the group once kafka-go's join ends (see shutdown).
//
// kafka-go's ConsumerGroup rejoins by itself as soon as a generation ends
// and then waits for someone to call Next; a goroutine per membership keeps
// calling Next (pump), so the member never stalls a rebalance, and parks the
// newest generation for the next Claim.
func (s *Source) Claim(ctx context.Context, topics []string) (mirror.Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kafka: claim: %w", err)
	}
	ts := slices.Clone(topics)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	if len(ts) == 0 || ts[0] == "" {
		return nil, errors.New("kafka: claim: no topics (or an empty topic name)")
	}
	bound := s.joinBound(ctx)
	jctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()

	// Members whose LeaveGroup failed during an outage would hold up a
	// join until their session expires: leave on their behalf first.
	s.mu.Lock()
	unleft := len(s.unleft) > 0
	s.mu.Unlock()
	if unleft {
		s.retryLeaves(jctx)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("kafka: claim: %w", ErrClosed)
	}
	m, old, oldTopics := s.membershipFor(ts)
	if m == nil {
		sub := ts
		if len(oldTopics) > 0 {
			sub = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(ts), oldTopics...))))
		}
		var err error
		if m, err = s.newMembership(sub); err != nil {
			s.mu.Unlock()
			if old != nil {
				old.leaveIfUnused()
			}
			return nil, fmt.Errorf("kafka: claim group %q: %w", s.opts.Group, err)
		}
		s.members[m] = struct{}{}
	}
	s.mu.Unlock()
	if old != nil {
		old.leaveIfUnused()
	}

	// The coordinator is looked up beside the join, so that reading the
	// committed offsets after it takes one round trip (coordinator.go).
	// The lookup ends with the Claim (jctx) at the latest.
	go func() {
		if _, err := s.router.coordinator(jctx, s.addr, s.opts.Group); err != nil {
			s.log.Debug("looking up the group coordinator", "err", err)
		}
	}()
	start := time.Now()
	c, err := m.await(jctx, ts)
	if err != nil {
		if ctx.Err() == nil && jctx.Err() != nil {
			err = fmt.Errorf("no group generation within the join bound %v (JoinGroup/SyncGroup did not complete; join abandoned): %w", bound.Round(time.Millisecond), err)
		}
		return nil, fmt.Errorf("kafka: claim group %q topics %v: %w", s.opts.Group, ts, err)
	}
	// Read the committed offsets ourselves: kafka-go's join maps a
	// partition-level OffsetFetch error (COORDINATOR_LOAD_IN_PROGRESS while
	// a coordinator loads the group) to "nothing committed", which would
	// restart the partition at the earliest or latest offset.
	tps := make([]mirror.TopicPartition, 0, len(c.g.assigned))
	for tp := range c.g.assigned {
		tps = append(tps, tp)
	}
	if c.committed, c.metadata, err = s.committed(ctx, tps); err != nil {
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Release(releaseCtx)
		return nil, fmt.Errorf("kafka: claim group %q: reading committed offsets: %w", s.opts.Group, err)
	}
	s.log.Debug("claimed", "generation", c.g.gen.ID, "member", c.g.gen.MemberID,
		"partitions", len(c.g.assigned), "took", time.Since(start))
	return c, nil
}

// joinBound is how long a Claim waits for a generation: Options.JoinTimeout,
// and at most a third of the time left before ctx's deadline (a drain's
// work deadline), so a join that hangs leaves the drain most of its budget
// and the next drain retries.
func (s *Source) joinBound(ctx context.Context) time.Duration {
	bound := s.opts.JoinTimeout
	if d, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(d)/3)
	}
	return max(bound, 100*time.Millisecond)
}

// membershipFor picks the membership a Claim for topics (sorted) uses and
// registers the Claim as its waiter. With none fitting it returns nil, the
// membership to retire (if any) and, when that one is in use, its topics
// (the new member must keep serving them). s.mu must be held.
func (s *Source) membershipFor(topics []string) (m, old *membership, oldTopics []string) {
	for mm := range s.members {
		mm.mu.Lock()
		if mm.closing || mm.retired {
			mm.mu.Unlock()
			continue
		}
		inUse := !mm.unusedLocked()
		covers := true
		for _, t := range topics {
			if !slices.Contains(mm.topics, t) {
				covers = false
				break
			}
		}
		if covers && (inUse || slices.Equal(topics, mm.topics)) {
			mm.waiters++
			if mm.graceTimer != nil {
				mm.graceTimer.Stop()
				mm.graceTimer = nil
			}
			mm.mu.Unlock()
			return mm, nil, nil
		}
		mm.retired = true
		if inUse {
			oldTopics = mm.topics
		}
		mm.mu.Unlock()
		old = mm
	}
	return nil, old, oldTopics
}

func (s *Source) newMembership(topics []string) (*membership, error) {
	ctx, cancel := context.WithCancel(s.ctx)
	m := &membership{
		s:       s,
		topics:  topics,
		log:     s.log.With("topics", topics),
		ctx:     ctx,
		cancel:  cancel,
		conns:   make(map[*trackedConn]struct{}),
		notify:  make(chan struct{}),
		claims:  make(map[*claim]struct{}),
		waiters: 1,
		done:    make(chan struct{}),
	}
	cg, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID:      s.opts.Group,
		Brokers: s.opts.Brokers,
		Dialer:  s.memberDialer(m.dial),
		Topics:  topics,
		// kafka-go's own watcher asks for each topic's partitions on its
		// own every interval (one request per topic: 100 a second for
		// 200 topics); watchPartitions asks for all of them at once.
		WatchPartitionChanges: false,
		GroupBalancers:        []kafkago.GroupBalancer{kafkago.RoundRobinGroupBalancer{}, kafkago.RangeGroupBalancer{}},
		HeartbeatInterval:     s.opts.HeartbeatInterval,
		SessionTimeout:        s.opts.SessionTimeout,
		RebalanceTimeout:      s.opts.RebalanceTimeout,
		// Only reached when a rejoin fails; the membership is closed
		// then anyway (see pump), so keep kafka-go from sleeping long.
		JoinGroupBackoff: 200 * time.Millisecond,
		// FirstOffset (-2) marks "nothing committed"; Assigned maps it
		// to mirror.NoOffset. Committed offsets are never negative.
		StartOffset: kafkago.FirstOffset,
		Timeout:     s.coordinatorTimeout(),
		Logger:      kafkaLogger(m.log, slog.LevelDebug),
		ErrorLogger: kafkaLogger(m.log, slog.LevelWarn),
	})
	if err != nil {
		cancel()
		return nil, err
	}
	m.cg = cg
	s.wg.Go(m.pump)
	return m, nil
}

// coordinatorTimeout bounds each request of the member to its coordinator;
// kafka-go ends the generation when a heartbeat fails or times out. A
// member whose heartbeats go unanswered must see its claim end before the
// coordinator can expire its session and give its partitions to another
// process, or it would go on publishing after the new owner took over. The
// session runs from when the coordinator received the last answered
// heartbeat; the next one is sent at most one interval plus that one's round
// trip (at most this timeout) later and fails at most this timeout after
// that, so two timeouts plus the interval must stay under the session
// timeout: 0.4 of (session - interval) keeps a tenth of it as a margin
// (2.2 s with the defaults). RequestTimeout still bounds it.
func (s *Source) coordinatorTimeout() time.Duration {
	return min(s.opts.RequestTimeout, (s.opts.SessionTimeout-s.opts.HeartbeatInterval)*4/10)
}

// signal wakes await; m.mu must be held.
func (m *membership) signal() {
	close(m.notify)
	m.notify = make(chan struct{})
}

// unusedLocked reports whether no Claim waits and no claim is live (claims
// lost but not yet released do not count); m.mu must be held.
func (m *membership) unusedLocked() bool {
	if m.waiters > 0 {
		return false
	}
	for c := range m.claims {
		if !c.g.ended() {
			return false
		}
	}
	return true
}

// await waits for a live generation and makes it a claim on topics. The
// caller registered itself as a waiter. When ctx ends and nobody else uses
// the membership, the membership is abandoned (closed).
func (m *membership) await(ctx context.Context, topics []string) (*claim, error) {
	for {
		m.mu.Lock()
		if g := m.current; g != nil && !g.ended() && !m.closing {
			c := &claim{m: m, g: g.view(topics)}
			m.claims[c] = struct{}{}
			m.waiters--
			m.mu.Unlock()
			return c, nil
		}
		if err := m.err; err != nil {
			m.waiters--
			m.mu.Unlock()
			m.shutdown()
			return nil, err
		}
		if m.closing {
			m.waiters--
			m.mu.Unlock()
			if m.s.isClosed() {
				return nil, ErrClosed
			}
			return nil, errMembershipClosed
		}
		ch := m.notify
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			m.mu.Lock()
			m.waiters--
			unused := m.unusedLocked()
			m.mu.Unlock()
			if unused {
				// Abandoned. Before its first generation the member ID is
				// unknown, so the join is not cut: kafka-go finishes it in
				// the background and leaves with that ID (a cut join could
				// leave a member the coordinator keeps, that nobody can
				// remove). The Claim has returned either way.
				m.shutdown()
			}
			return nil, ctx.Err()
		}
	}
}
