package kafka

import (
	"context"

	kafkago "github.com/segmentio/kafka-go"
	"net"
	"sync"
	"time"
)

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
	dial := d.DialContext
	if m.s.sasl != nil {
		dial = m.s.sasl.DialContext
	}
	c, err := dial(ctx, network, address)
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

// memberDialer is the Dialer of a membership's ConsumerGroup: kafka-go does
// TLS and SASL, unless the Source's saslDialer does them (in dial).
func (s *Source) memberDialer(dial func(ctx context.Context, network, address string) (net.Conn, error)) *kafkago.Dialer {
	d := &kafkago.Dialer{ClientID: s.opts.ClientID, Timeout: s.opts.DialTimeout, DialFunc: dial}
	if s.sasl == nil {
		d.TLS, d.SASLMechanism = s.opts.TLS, s.mech
	}
	return d
}
