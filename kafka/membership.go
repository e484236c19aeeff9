package kafka

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/mirror"
)

// errMembershipClosed is what the gated dialer answers once a membership is
// closing, so kafka-go's ConsumerGroup cannot rejoin behind our back.
var errMembershipClosed = errors.New("kafka: group membership closed")

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
