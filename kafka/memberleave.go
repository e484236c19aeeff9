package kafka

// How a membership ends: releasing claims, the idle grace, retirement after
// an uncertain commit, and leaving the group.

import (
	"context"
	"errors"
	"time"
)

// release ends claim c. When that leaves the membership unused it leaves the
// group after IdleGrace, or at once (waiting up to ctx) when it is retired,
// has no live generation, or IdleGrace is negative.
func (m *membership) release(ctx context.Context, c *claim) error {
	m.mu.Lock()
	if _, ok := m.claims[c]; !ok {
		m.mu.Unlock()
		return nil
	}
	delete(m.claims, c)
	c.g.end()
	m.signal() // settle waits for the claims on an ended generation
	if !m.unusedLocked() || m.closing {
		m.mu.Unlock()
		return nil
	}
	grace := m.s.opts.IdleGrace
	if m.retired || grace <= 0 || m.current == nil || m.current.ended() {
		m.mu.Unlock()
		return m.close(ctx)
	}
	m.startGraceLocked()
	m.mu.Unlock()
	return nil
}

// afterCommit retires the membership when a commit failed without a definite
// outcome (anything but a fenced or locally refused commit): the broker may
// still apply that request later, after a higher commit of a later claim on
// the same generation. Retired, the member takes no new claim and leaves
// when its claims are released, with no idle grace, so the coordinator
// fences the late request. It returns err.
func (m *membership) afterCommit(err error) error {
	if err == nil || errors.Is(err, ErrClaimLost) {
		return err
	}
	m.mu.Lock()
	if !m.retired {
		m.log.Debug("commit outcome unknown; the member leaves once its claims are released", "err", err)
	}
	m.retired = true
	m.mu.Unlock()
	return err
}

// startGraceLocked (re)starts the idle grace timer; m.mu must be held.
func (m *membership) startGraceLocked() {
	if m.graceTimer != nil {
		m.graceTimer.Stop()
	}
	m.graceTimer = time.AfterFunc(max(m.s.opts.IdleGrace, 0), m.leaveIfUnused)
}

// leaveIfUnused shuts the membership down when no claim holds it and no
// Claim waits for it.
func (m *membership) leaveIfUnused() {
	m.mu.Lock()
	unused := m.unusedLocked() && !m.closing
	m.mu.Unlock()
	if unused {
		m.log.Debug("unused member leaves the group")
		m.shutdown()
	}
}

// shutdown starts closing the membership (once) and returns at once; done
// closes when it has finished. Every claim on it is lost. With a known
// member ID it gates the dialer, closes the member's connections and sends
// LeaveGroup itself; before the first generation (member ID unknown) it lets
// kafka-go finish the join and leave on its own.
func (m *membership) shutdown() {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closing = true
		memberID := m.memberID
		if m.graceTimer != nil {
			m.graceTimer.Stop()
		}
		for c := range m.claims {
			c.g.end()
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
