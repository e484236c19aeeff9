package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/mirror"
)

// errMembershipClosed is what the gated dialer answers once a membership is
// closing, so kafka-go's ConsumerGroup cannot rejoin behind our back.
var errMembershipClosed = errors.New("kafka: group membership closed")

// Claim joins the consumer group (Options.Group) subscribed to topics, using
// kafka-go's ConsumerGroup (round-robin, else range assignment), and returns
// the partitions this member owns for the current generation with their
// committed offsets.
//
// Membership lifecycle. kafka-go's ConsumerGroup rejoins by itself as soon
// as a generation ends, and then waits for someone to call Next; if nobody
// does, it stops heartbeating that new generation and the next rebalance of
// the group stalls until RebalanceTimeout evicts it. This adapter therefore
// keeps calling Next in a goroutine per membership and parks the newest
// generation. When a claim is lost (Lost closes), the membership stays in
// the group (kafka-go has already rejoined, and the group split partitions
// with the newcomer) until either
//   - Claim is called again with the same topics: it takes the parked
//     generation at once, without another rebalance, or
//   - the lost claim is Released: the member leaves, or
//   - nothing happens for SessionTimeout: the member leaves by itself.
//
// Release leaves promptly: it stops kafka-go from dialling again, closes the
// membership's connections (so a join or heartbeat in flight cannot hold it
// up), and sends LeaveGroup itself through the Source's Transport.
//
// Claim fails fast when the group cannot be joined (for example the broker is
// down) instead of waiting out kafka-go's join backoff; the caller retries.
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
	key := strings.Join(ts, "\x00")

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("kafka: claim: %w", ErrClosed)
	}
	var m *membership
	var idleOther []*membership
	for mm := range s.members {
		if mm.key == key && m == nil && mm.takeIfIdle() {
			m = mm
		} else if mm.key != key && mm.isIdle() {
			idleOther = append(idleOther, mm)
		}
	}
	if m == nil {
		if len(s.unleft) > 0 {
			s.mu.Unlock()
			s.retryLeaves(ctx)
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				return nil, fmt.Errorf("kafka: claim: %w", ErrClosed)
			}
		}
		var err error
		if m, err = s.newMembership(ts, key); err != nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("kafka: claim group %q: %w", s.opts.Group, err)
		}
		s.members[m] = struct{}{}
	}
	s.mu.Unlock()

	// Idle memberships for another topic set only hold partitions back;
	// this process is joining anew anyway.
	for _, mm := range idleOther {
		mm.shutdown()
	}

	start := time.Now()
	c, err := m.await(ctx)
	if err != nil {
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

// generation is one kafka-go Generation with its end signal.
type generation struct {
	gen      *kafkago.Generation
	lost     chan struct{} // closed when the generation ends
	assigned map[mirror.TopicPartition]int64
}

func (g *generation) ended() bool {
	select {
	case <-g.lost:
		return true
	default:
		return false
	}
}

// membership is one kafka-go ConsumerGroup member. Successive claims may use
// it while it stays in the group.
type membership struct {
	s      *Source
	key    string
	topics []string
	cg     *kafkago.ConsumerGroup
	log    *slog.Logger

	ctx    context.Context // cancelled when closing; stops the pump
	cancel context.CancelFunc

	connMu sync.Mutex
	gated  bool
	conns  map[*trackedConn]struct{}

	mu        sync.Mutex
	pending   *generation   // newest generation not yet claimed
	err       error         // terminal error from ConsumerGroup.Next
	notify    chan struct{} // closed (and replaced) when pending or err change
	owner     *claim        // the claim that holds, or last held, this member
	waiting   bool          // a Claim call is waiting in await
	closing   bool
	memberID  string
	idleTimer *time.Timer

	closeOnce sync.Once
	done      chan struct{} // closed when fully closed
	closeErr  error         // LeaveGroup outcome; read after done
}

func (s *Source) newMembership(topics []string, key string) (*membership, error) {
	ctx, cancel := context.WithCancel(s.ctx)
	m := &membership{
		s:       s,
		key:     key,
		topics:  topics,
		log:     s.log.With("topics", topics),
		ctx:     ctx,
		cancel:  cancel,
		conns:   make(map[*trackedConn]struct{}),
		notify:  make(chan struct{}),
		waiting: true,
		done:    make(chan struct{}),
	}
	cg, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID:      s.opts.Group,
		Brokers: s.opts.Brokers,
		Dialer: &kafkago.Dialer{
			ClientID:      s.opts.ClientID,
			Timeout:       s.opts.DialTimeout,
			TLS:           s.opts.TLS,
			SASLMechanism: s.mech,
			DialFunc:      m.dial,
		},
		Topics:            topics,
		GroupBalancers:    []kafkago.GroupBalancer{kafkago.RoundRobinGroupBalancer{}, kafkago.RangeGroupBalancer{}},
		HeartbeatInterval: s.opts.HeartbeatInterval,
		SessionTimeout:    s.opts.SessionTimeout,
		RebalanceTimeout:  s.opts.RebalanceTimeout,
		// Only reached when a rejoin fails; the membership is closed
		// then anyway (see pump), so keep kafka-go from sleeping long.
		JoinGroupBackoff: 200 * time.Millisecond,
		// FirstOffset (-2) marks "nothing committed"; Assigned maps it
		// to mirror.NoOffset. Committed offsets are never negative.
		StartOffset: kafkago.FirstOffset,
		Timeout:     s.opts.RequestTimeout,
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

// pump receives every generation kafka-go produces, so kafka-go never blocks
// handing one over, and parks the newest for await.
func (m *membership) pump() {
	for {
		gen, err := m.cg.Next(m.ctx)
		if err != nil {
			if m.ctx.Err() != nil || errors.Is(err, kafkago.ErrGroupClosed) {
				return
			}
			if errors.Is(err, kafkago.RebalanceInProgress) {
				continue // kafka-go rejoins at once, keeping its member ID
			}
			m.log.Warn("consumer group join failed", "err", err)
			m.mu.Lock()
			m.err = err
			m.signal()
			m.mu.Unlock()
			m.shutdown()
			return
		}
		g := &generation{gen: gen, lost: make(chan struct{}), assigned: assignments(gen)}
		gen.Start(func(ctx context.Context) {
			<-ctx.Done()
			close(g.lost)
			m.generationEnded(g)
		})
		m.mu.Lock()
		m.memberID = gen.MemberID
		m.pending = g
		m.signal()
		m.mu.Unlock()
		m.log.Debug("generation joined", "generation", gen.ID, "member", gen.MemberID, "partitions", len(g.assigned))
	}
}

// assignments converts kafka-go's assignments to owned partitions with
// committed offsets (negative = none committed → NoOffset).
func assignments(gen *kafkago.Generation) map[mirror.TopicPartition]int64 {
	out := make(map[mirror.TopicPartition]int64)
	for topic, ps := range gen.Assignments {
		for _, p := range ps {
			off := p.Offset
			if off < 0 {
				off = mirror.NoOffset
			}
			out[mirror.TopicPartition{Topic: topic, Partition: int32(p.ID)}] = off
		}
	}
	return out
}

// signal wakes await; m.mu must be held.
func (m *membership) signal() {
	close(m.notify)
	m.notify = make(chan struct{})
}

// generationEnded runs when kafka-go ends g (rebalance, coordinator loss,
// closing). If g was claimed, the member becomes idle and is given
// SessionTimeout to be claimed again or released.
func (m *membership) generationEnded(g *generation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == g {
		m.pending = nil
	}
	c := m.owner
	if c == nil || c.g != g || m.closing {
		return
	}
	m.log.Debug("claim lost", "generation", g.gen.ID)
	if m.idleTimer != nil {
		m.idleTimer.Stop()
	}
	m.idleTimer = time.AfterFunc(m.s.opts.SessionTimeout, func() {
		m.mu.Lock()
		idle := m.owner == c && !m.waiting && !m.closing
		m.mu.Unlock()
		if idle {
			m.log.Debug("idle membership leaves the group")
			m.shutdown()
		}
	})
}

// isIdle reports whether the member's claim was lost and nobody took it over.
func (m *membership) isIdle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.idleLocked()
}

func (m *membership) idleLocked() bool {
	return !m.closing && !m.waiting && m.owner != nil && m.owner.g.ended()
}

// takeIfIdle reserves an idle membership for a new Claim.
func (m *membership) takeIfIdle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.idleLocked() {
		return false
	}
	m.waiting = true
	if m.idleTimer != nil {
		m.idleTimer.Stop()
		m.idleTimer = nil
	}
	return true
}

// await waits for a live generation and makes it a claim. On failure or
// cancellation the membership is closed.
func (m *membership) await(ctx context.Context) (*claim, error) {
	for {
		m.mu.Lock()
		if g := m.pending; g != nil {
			m.pending = nil
			if g.ended() {
				m.mu.Unlock()
				continue
			}
			c := &claim{m: m, g: g}
			m.owner = c
			m.waiting = false
			m.mu.Unlock()
			return c, nil
		}
		if err := m.err; err != nil {
			m.mu.Unlock()
			m.shutdown()
			return nil, err
		}
		if m.closing {
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
			m.shutdown()
			return nil, ctx.Err()
		}
	}
}

// shutdown starts closing the membership (once) and returns at once; done
// closes when it has finished. With a known member ID it gates the dialer,
// closes the member's connections and sends LeaveGroup itself; before the
// first generation (member ID unknown) it lets kafka-go finish the join and
// leave on its own.
func (m *membership) shutdown() {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closing = true
		memberID := m.memberID
		if m.idleTimer != nil {
			m.idleTimer.Stop()
		}
		m.signal()
		m.mu.Unlock()
		m.cancel()
		if memberID != "" {
			m.gate()
		}
		m.s.wg.Go(func() {
			defer close(m.done)
			start := time.Now()
			if memberID != "" {
				ctx, cancel := context.WithTimeout(context.Background(), m.s.opts.RequestTimeout)
				m.closeErr = m.s.leaveGroup(ctx, memberID)
				cancel()
				if m.closeErr != nil {
					m.s.mu.Lock()
					if !m.s.closed && len(m.s.unleft) < 64 {
						m.s.unleft = append(m.s.unleft, memberID)
					}
					m.s.mu.Unlock()
				}
			}
			_ = m.cg.Close()
			m.s.mu.Lock()
			delete(m.s.members, m)
			m.s.mu.Unlock()
			m.log.Debug("left group", "member", memberID, "took", time.Since(start), "err", m.closeErr)
		})
	})
}

// close shuts the membership down and waits for it, or for ctx.
func (m *membership) close(ctx context.Context) error {
	m.shutdown()
	select {
	case <-m.done:
		return m.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dial is the ConsumerGroup's Dialer.DialFunc: it refuses once the
// membership is gated and tracks connections so gate can close them.
func (m *membership) dial(ctx context.Context, network, address string) (net.Conn, error) {
	m.connMu.Lock()
	gated := m.gated
	m.connMu.Unlock()
	if gated {
		return nil, errMembershipClosed
	}
	d := net.Dialer{Timeout: m.s.opts.DialTimeout, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, m: m}
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if m.gated {
		_ = c.Close()
		return nil, errMembershipClosed
	}
	m.conns[tc] = struct{}{}
	return tc, nil
}

// gate makes dial refuse and closes every open connection of the member, so
// kafka-go's blocked requests (join, sync, heartbeat) fail at once.
func (m *membership) gate() {
	m.connMu.Lock()
	m.gated = true
	conns := make([]*trackedConn, 0, len(m.conns))
	for c := range m.conns {
		conns = append(conns, c)
	}
	m.connMu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// trackedConn removes itself from its membership when closed.
type trackedConn struct {
	net.Conn
	m    *membership
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.m.connMu.Lock()
		delete(c.m.conns, c)
		c.m.connMu.Unlock()
	})
	return err
}

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
	return c.commit(ctx, with)
}

// CommitWithMetadata is Commit with metadata stored beside each offset.
func (c *claim) CommitWithMetadata(ctx context.Context, offsets map[mirror.TopicPartition]mirror.CommitOffset) error {
	if c.g.ended() {
		return fmt.Errorf("kafka: commit group %q generation %d: %w", c.m.s.opts.Group, c.g.gen.ID, ErrClaimLost)
	}
	return c.commit(ctx, offsets)
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

// Release leaves the group (LeaveGroup) unless a later Claim has taken this
// member over, in which case it does nothing. It waits for the leave up to
// ctx and is safe to call more than once; later calls return the first
// result.
func (c *claim) Release(ctx context.Context) error {
	c.releaseOnce.Do(func() {
		m := c.m
		m.mu.Lock()
		mine := m.owner == c && !m.waiting
		if mine {
			m.closing = true // no Claim may take the member over now
		}
		m.mu.Unlock()
		if !mine {
			return
		}
		if err := m.close(ctx); err != nil {
			c.releaseErr = fmt.Errorf("kafka: release group %q: %w", m.s.opts.Group, err)
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
