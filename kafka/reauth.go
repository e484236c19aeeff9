package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go/sasl"
)

// SASL with re-authentication (KIP-368).
//
// kafka-go authenticates a connection once and never again, so a broker
// with connections.max.reauth.ms (MSK, Confluent Cloud) closes it when the
// session is over and its next request fails. For OAUTHBEARER and
// AWS_MSK_IAM the Source therefore does TLS and SASL itself when it dials
// (saslDialer), with SaslAuthenticate v1, whose answer carries the session
// lifetime, and hands kafka-go a connection that is already authenticated.
// That connection (reauthConn) re-authenticates in band, with a fresh token,
// once 80% of the session is over: before the next request is written, at
// a moment no request is waiting for its answer, so kafka-go never sees it.
// A connection that stays busy past its session is closed by the broker;
// the request fails and the next one dials a new connection.
//
// A connection whose session is already over when its next request
// begins (a pooled connection that sat idle) is not re-authenticated:
// Kafka accepts that, but brokers and proxies that enforce the session on
// every request close the connection and the request would fail. The
// connection dials a fresh one underneath instead (redial) and writes the
// request there.
//
// A re-authentication that cannot get a credential (the token endpoint
// is down) sends nothing: the connection keeps its session, and tries
// again a moment later, until the session is over. An outage of the token
// endpoint shorter than the sessions' remaining time thus ends no claim.

// Request keys and versions written by saslDialer.
const (
	keySaslHandshake    = 17
	keySaslAuthenticate = 36
	// corrBase starts the correlation ids of the requests the dialer
	// writes; kafka-go never sees their answers.
	corrBase = 0x7ff00000
	// reauthAt is the fraction of a session after which the connection
	// re-authenticates.
	reauthAt = 0.8
	// reauthRetry is how long a connection whose re-authentication got no
	// credential waits before trying again (while its session lasts).
	reauthRetry = 500 * time.Millisecond
)

// ErrNoCredential is returned (wrapped) when a SASL authentication could
// not start because no credential (token, signature) could be obtained;
// nothing was sent to the broker. Waiting may fix it.
var ErrNoCredential = errors.New("no SASL credential")

// credentialError marks a failure to obtain a credential with
// ErrNoCredential, keeping its own one-line message.
type credentialError struct{ err error }

func (e *credentialError) Error() string { return e.err.Error() }

// Unwrap returns the cause and ErrNoCredential.
func (e *credentialError) Unwrap() []error { return []error{e.err, ErrNoCredential} }

// refuser is a mechanism that explains a broker's refusal (an error code
// in SaslAuthenticate) in one line naming the setting to check.
type refuser interface {
	refused(code int16, msg string) error
}

// saslDialer dials, does TLS, authenticates, and returns a reauthConn.
type saslDialer struct {
	dial     func(ctx context.Context, network, address string) (net.Conn, error)
	tls      *tls.Config
	mech     sasl.Mechanism
	clientID string
	timeout  time.Duration
	ctx      context.Context // the Source's; bounds re-authentications
	log      *slog.Logger
}

// DialContext opens an authenticated connection to address.
func (d *saslDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("broker address %q: %w", address, err)
	}
	port, _ := strconv.Atoi(portText)
	c, err := d.dial(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		cfg := d.tls
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		hctx, cancel := context.WithTimeout(ctx, d.timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c = tc
	}
	rc := &reauthConn{Conn: c, d: d, meta: sasl.Metadata{Host: host, Port: port}, corr: corrBase, network: network, address: address}
	if err := rc.authenticate(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("SASL %s authentication with %s: %w", d.mech.Name(), address, err)
	}
	return rc, nil
}

// reauthConn is an authenticated connection that re-authenticates before
// its session ends. It follows the request and response frames written
// and read through it, to know when none is in flight.
type reauthConn struct {
	net.Conn
	d                *saslDialer
	meta             sasl.Metadata
	network, address string

	mu         sync.Mutex // writes, re-authentication, and the fields below
	corr       int32
	authedAt   time.Time
	sessionEnd time.Time // zero: the session does not expire
	inflight   int
	reauths    int
	redials    int
	retryAt    time.Time // no re-authentication before (one got no credential)
	w, r       frames
	// readDL and writeDL are the deadlines kafka-go set, restored after
	// a re-authentication and on a redialed connection.
	readDL, writeDL time.Time
}

// frames follows size-prefixed frames in a byte stream.
type frames struct {
	size []byte // bytes of the size prefix read so far
	left int    // bytes of the current frame's body still to come
}

// feed consumes p and returns how many frames started and how many ended.
func (f *frames) feed(p []byte) (started, ended int) {
	for len(p) > 0 {
		if f.left == 0 {
			need := 4 - len(f.size)
			k := min(need, len(p))
			f.size = append(f.size, p[:k]...)
			p = p[k:]
			if len(f.size) < 4 {
				return started, ended
			}
			f.left = int(binary.BigEndian.Uint32(f.size))
			f.size = f.size[:0]
			started++
			if f.left == 0 {
				ended++
			}
			continue
		}
		k := min(f.left, len(p))
		f.left -= k
		p = p[k:]
		if f.left == 0 {
			ended++
		}
	}
	return started, ended
}

func (f *frames) atBoundary() bool { return f.left == 0 && len(f.size) == 0 }

// Write writes kafka-go's request bytes, re-authenticating first when the
// session is nearly over, a new request begins and none is in flight.
func (c *reauthConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); c.w.atBoundary() && c.inflight == 0 && c.due(now) {
		reauth := c.reauthenticate
		if !now.Before(c.sessionEnd) {
			reauth = c.redial
		}
		if err := reauth(); err != nil {
			if errors.Is(err, ErrNoCredential) && now.Before(c.sessionEnd) {
				// Nothing was sent: keep the session while it lasts.
				c.retryAt = time.Now().Add(reauthRetry)
				c.d.log.Warn("kafka connection not re-authenticated yet, its session goes on", "broker", c.meta.Host,
					"session_left", c.sessionEnd.Sub(now).Round(time.Millisecond), "err", err)
			} else {
				_ = c.Conn.Close()
				return 0, err
			}
		}
	}
	n, err := c.Conn.Write(p)
	started, _ := c.w.feed(p[:n])
	c.inflight += started
	return n, err
}

// Read reads kafka-go's response bytes.
func (c *reauthConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	conn := c.Conn
	c.mu.Unlock()
	n, err := conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		_, ended := c.r.feed(p[:n])
		c.inflight -= ended
		c.mu.Unlock()
	}
	return n, err
}

// SetDeadline records and sets the read and write deadlines.
func (c *reauthConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDL, c.writeDL = t, t
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline records and sets the read deadline.
func (c *reauthConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDL = t
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline records and sets the write deadline.
func (c *reauthConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDL = t
	return c.Conn.SetWriteDeadline(t)
}

// Close closes the connection in use.
func (c *reauthConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.Close()
}

// restoreDeadlines sets kafka-go's deadlines again on the connection.
func (c *reauthConn) restoreDeadlines() {
	_ = c.Conn.SetReadDeadline(c.readDL)
	_ = c.Conn.SetWriteDeadline(c.writeDL)
}

// redial replaces the connection, whose session is over, with a freshly
// dialed and authenticated one to the same broker; nothing is in flight.
func (c *reauthConn) redial() error {
	ctx, cancel := context.WithTimeout(c.d.ctx, c.d.timeout)
	defer cancel()
	fresh, err := c.d.DialContext(ctx, c.network, c.address)
	if err != nil {
		return fmt.Errorf("the SASL session with %s ended; dialing a fresh connection: %w", c.address, err)
	}
	nc := fresh.(*reauthConn)
	_ = c.Conn.Close()
	c.Conn, c.corr, c.authedAt, c.sessionEnd = nc.Conn, nc.corr, nc.authedAt, nc.sessionEnd
	c.w, c.r = frames{}, frames{}
	c.redials++
	c.restoreDeadlines()
	c.d.log.Debug("kafka connection redialed: its SASL session was over", "broker", c.meta.Host, "mechanism", c.d.mech.Name(), "redials", c.redials)
	return nil
}

func (c *reauthConn) due(now time.Time) bool {
	if c.sessionEnd.IsZero() || (now.Before(c.retryAt) && now.Before(c.sessionEnd)) {
		return false
	}
	life := c.sessionEnd.Sub(c.authedAt)
	return !now.Before(c.authedAt.Add(time.Duration(float64(life) * reauthAt)))
}

func (c *reauthConn) reauthenticate() error {
	ctx, cancel := context.WithTimeout(c.d.ctx, c.d.timeout)
	defer cancel()
	if err := c.authenticate(ctx); err != nil {
		return fmt.Errorf("SASL %s re-authentication with %s: %w", c.d.mech.Name(), net.JoinHostPort(c.meta.Host, strconv.Itoa(c.meta.Port)), err)
	}
	c.reauths++
	c.d.log.Debug("kafka connection re-authenticated", "broker", c.meta.Host, "mechanism", c.d.mech.Name(), "reauthentications", c.reauths, "session", c.sessionEnd.Sub(c.authedAt).Round(time.Millisecond))
	return nil
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate v1 on the raw
// connection; the caller makes sure nothing else is using it.
func (c *reauthConn) authenticate(ctx context.Context) error {
	deadline := time.Now().Add(c.d.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.Conn.SetDeadline(deadline)
	defer c.restoreDeadlines()

	// The credential first: without one, nothing is sent and the
	// connection (and its session) stays as it was.
	sess, state, err := c.d.mech.Start(sasl.WithMetadata(ctx, &c.meta))
	if err != nil {
		return &credentialError{err: err}
	}
	name := c.d.mech.Name()
	resp, err := c.roundTrip(keySaslHandshake, appendString(nil, name))
	if err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if len(resp) < 2 {
		return errors.New("SaslHandshake: short answer")
	}
	if code := int16(binary.BigEndian.Uint16(resp)); code != 0 {
		return fmt.Errorf("the broker does not accept SASL mechanism %s (error code %d)", name, code)
	}
	start := time.Now()
	for done := false; !done; {
		resp, err := c.roundTrip(keySaslAuthenticate, appendBytes(nil, state))
		if err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		code, msg, challenge, lifetime, err := parseSaslAuthenticate(resp)
		if err != nil {
			return err
		}
		if code != 0 {
			if msg == "" {
				msg = "authentication failed"
			}
			if r, ok := c.d.mech.(refuser); ok {
				return r.refused(code, msg)
			}
			return fmt.Errorf("the broker refused the authentication (error code %d): %s", code, oneLine(msg))
		}
		if done, state, err = sess.Next(ctx, challenge); err != nil {
			return err
		}
		if done {
			c.authedAt, c.sessionEnd, c.retryAt = start, time.Time{}, time.Time{}
			if lifetime > 0 {
				c.sessionEnd = start.Add(time.Duration(lifetime) * time.Millisecond)
			}
		}
	}
	return nil
}

// roundTrip writes a v1 request with body and reads its answer's body.
func (c *reauthConn) roundTrip(key int16, body []byte) ([]byte, error) {
	c.corr++
	corr := c.corr
	req := make([]byte, 4, 64+len(body))
	req = binary.BigEndian.AppendUint16(req, uint16(key))
	req = binary.BigEndian.AppendUint16(req, 1)
	req = binary.BigEndian.AppendUint32(req, uint32(corr))
	req = appendString(req, c.d.clientID)
	req = append(req, body...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	if _, err := c.Conn.Write(req); err != nil {
		return nil, err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if size < 4 || size > 1<<20 {
		return nil, fmt.Errorf("answer of %d bytes", size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return nil, fmt.Errorf("answer to request %d, want %d", got, corr)
	}
	resp := make([]byte, size-4)
	if _, err := io.ReadFull(c.Conn, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// parseSaslAuthenticate decodes a SaslAuthenticate v1 answer.
func parseSaslAuthenticate(b []byte) (code int16, msg string, authBytes []byte, lifetimeMs int64, err error) {
	bad := errors.New("SaslAuthenticate: malformed answer")
	if len(b) < 4 {
		return 0, "", nil, 0, bad
	}
	code = int16(binary.BigEndian.Uint16(b))
	n := int16(binary.BigEndian.Uint16(b[2:]))
	b = b[4:]
	if n > 0 {
		if len(b) < int(n) {
			return 0, "", nil, 0, bad
		}
		msg, b = string(b[:n]), b[n:]
	}
	if len(b) < 4 {
		return 0, "", nil, 0, bad
	}
	m := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if m > 0 {
		if len(b) < int(m) {
			return 0, "", nil, 0, bad
		}
		authBytes, b = b[:m], b[m:]
	}
	if len(b) < 8 {
		return 0, "", nil, 0, bad
	}
	return code, msg, authBytes, int64(binary.BigEndian.Uint64(b)), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	return append(b, p...)
}
