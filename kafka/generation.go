package kafka

// Generations: the pump that takes each one kafka-go joins, and what the
// membership does when one ends (generationEnded, settle).

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/mirror"
)

// generation is one kafka-go Generation with its end signal. Every claim
// gets its own view of the generation (base set, assigned narrowed to the
// claim's topics, lost closed when the generation ends or the claim is
// released), so the claim code reads c.g the same way in both cases.
type generation struct {
	gen      *kafkago.Generation
	lost     chan struct{} // closed when the generation ends
	assigned map[mirror.TopicPartition]int64
	base     *generation // the membership's generation this view is of; nil for that one
	endOnce  sync.Once
	// settled (the membership's generation only) is closed when the member
	// stops waiting for the claims on the ended generation (see settle);
	// kafka-go may rejoin from then on.
	settled chan struct{}
}

func (g *generation) ended() bool {
	select {
	case <-g.lost:
		return true
	default:
		return false
	}
}

// end closes lost once.
func (g *generation) end() { g.endOnce.Do(func() { close(g.lost) }) }

// view is a claim's view of g, narrowed to topics.
func (g *generation) view(topics []string) *generation {
	v := &generation{gen: g.gen, lost: make(chan struct{}), assigned: make(map[mirror.TopicPartition]int64), base: g}
	for tp, off := range g.assigned {
		if slices.Contains(topics, tp.Topic) {
			v.assigned[tp] = off
		}
	}
	return v
}

// pump receives every generation kafka-go produces, so kafka-go never blocks
// handing one over, and makes the newest the current one.
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
		g := &generation{gen: gen, lost: make(chan struct{}), assigned: assignments(gen), settled: make(chan struct{})}
		gen.Start(func(ctx context.Context) {
			<-ctx.Done()
			g.end()
			m.generationEnded(g)
			m.settle(g)
			close(g.settled)
		})
		gen.Start(m.watchPartitions)
		m.mu.Lock()
		m.memberID = gen.MemberID
		m.current = g
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

// generationEnded runs when kafka-go ends g (rebalance, coordinator loss,
// closing): the claims on g are lost. A member without claims leaves now
// rather than take partitions in the next generation that no drain would
// read; one whose lost claims are not released yet (drains winding down,
// likely to claim again) gets IdleGrace.
func (m *membership) generationEnded(g *generation) {
	m.mu.Lock()
	if m.current == g {
		m.current = nil
	}
	for c := range m.claims {
		if c.g.base == g {
			c.g.end()
		}
	}
	idle := m.unusedLocked() && !m.closing
	if idle && len(m.claims) > 0 && !m.retired {
		idle = false
		m.startGraceLocked()
	}
	m.mu.Unlock()
	if idle {
		m.log.Debug("unused member leaves at the end of its generation", "generation", g.gen.ID)
		m.shutdown()
	}
}

// settle runs when g ended and kafka-go waits for it before it rejoins: it
// waits until every claim on g was released, at most half the rebalance
// timeout (the coordinator waits a rebalance timeout for the member to
// rejoin), or until the membership closes. Until the member rejoins, no
// other member can be given its partitions, and the coordinator still takes
// commits of g: the drains on g finish the sends they have on the wire and
// commit what Event Hubs acknowledged (see claim.Commit) before another
// process starts on those partitions, as a Kafka consumer commits in its
// revocation callback before it rejoins.
func (m *membership) settle(g *generation) {
	bound := time.NewTimer(m.s.opts.RebalanceTimeout / 2)
	defer bound.Stop()
	for {
		m.mu.Lock()
		busy := false
		for c := range m.claims {
			if c.g.base == g {
				busy = true
				break
			}
		}
		ch, closing := m.notify, m.closing
		m.mu.Unlock()
		if !busy || closing {
			return
		}
		select {
		case <-ch:
		case <-bound.C:
			m.log.Debug("claims on an ended generation not released in time; rejoining", "generation", g.gen.ID)
			return
		case <-m.ctx.Done():
			return
		}
	}
}
