// Package sasltest is a test-only SASL front for franz-go's kfake and a
// local OIDC issuer, so that the Kafka adapter's SASL/OAUTHBEARER and
// AWS_MSK_IAM mechanisms can be tested offline against a broker that really
// checks them.
//
// kfake speaks SASL PLAIN and SCRAM only, and its Control hook does not say
// which connection a request came on, so a session cannot be tracked there.
// Instead [Front.Listen], passed to kfake with kfake.ListenFn, wraps every
// accepted connection: it answers SaslHandshake and SaslAuthenticate itself,
// with the configured [Verifier], refuses (closes) a connection that sends
// anything but ApiVersions before authenticating, and closes a connection
// whose session lifetime is over when its next request arrives, as a Kafka
// broker with connections.max.reauth.ms does for a client that does not
// re-authenticate (KIP-368). Every other request goes to kfake unchanged.
package sasltest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Verifier checks a client's SASL authentication bytes. It returns the
// authenticated principal and when the credential expires (zero: never).
type Verifier interface {
	// Mechanism is the SASL mechanism name, e.g. "OAUTHBEARER".
	Mechanism() string
	// Verify checks the client's first (and only) message.
	Verify(auth []byte) (principal string, expiry time.Time, err error)
}

// Stats counts what a Front saw.
type Stats struct {
	// Authenticated counts successful authentications.
	Authenticated int64
	// Reauthenticated counts the successful authentications that renewed
	// the session of an authenticated connection (KIP-368).
	Reauthenticated int64
	// Refused counts refused authentications.
	Refused int64
	// Expired counts connections closed because a request arrived after
	// their session lifetime was over.
	Expired int64
	// Unauthenticated counts connections closed because they sent a
	// request other than ApiVersions before authenticating.
	Unauthenticated int64
	// Principals are the distinct principals authenticated.
	Principals []string
	// LastRefusal is the reason of the newest refusal.
	LastRefusal string
}

// Front terminates SASL in front of kfake. Use Listen as kfake's ListenFn.
type Front struct {
	// Verifier checks authentications. Required.
	Verifier Verifier
	// SessionLifetime, when positive, is connections.max.reauth.ms: a
	// session lasts until the earlier of this and the credential's expiry.
	// It applies to the Verifier's mechanism only.
	SessionLifetime time.Duration
	// EnforceSession closes a connection whose session is over when any
	// request arrives, a re-authentication's SaslHandshake included, as
	// brokers and proxies that enforce the session on every request do;
	// without it a session may be renewed after its end, as Kafka allows.
	EnforceSession bool
	// Plain, when set, also accepts SASL PLAIN for these users (user =>
	// password), for tools that speak neither OAUTHBEARER nor AWS_MSK_IAM.
	Plain map[string]string

	authenticated, reauthenticated, refused, expired, unauthenticated atomic.Int64

	mu          sync.Mutex
	principals  []string
	lastRefusal string
}

// Stats returns a snapshot of the counters.
func (f *Front) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{
		Authenticated:   f.authenticated.Load(),
		Reauthenticated: f.reauthenticated.Load(),
		Refused:         f.refused.Load(),
		Expired:         f.expired.Load(),
		Unauthenticated: f.unauthenticated.Load(),
		Principals:      slices.Clone(f.principals),
		LastRefusal:     f.lastRefusal,
	}
}

// Listen listens like net.Listen and wraps every accepted connection.
func (f *Front) Listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &listener{Listener: ln, f: f}, nil
}

type listener struct {
	net.Listener
	f *Front
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, f: l.f}, nil
}

// conn hands kfake the frames of an authenticated session and answers the
// SASL requests itself.
type conn struct {
	net.Conn
	f *Front

	wmu sync.Mutex // kfake's writer and the SASL answers

	// Read side, used by kfake's single reader goroutine only.
	pending   []byte
	handshake bool
	plain     bool // the handshake chose PLAIN
	authed    bool
	expiry    time.Time
}

func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Conn.Write(p)
}

// Read returns the bytes of the next frames meant for kfake.
func (c *conn) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		frame, err := c.readFrame()
		if err != nil {
			return 0, err
		}
		pass, err := c.handle(frame)
		if err != nil {
			_ = c.Conn.Close()
			return 0, err
		}
		if pass {
			c.pending = frame
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// readFrame reads one size-prefixed request, prefix included.
func (c *conn) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.Conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 100<<20 {
		return nil, fmt.Errorf("sasltest: request of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(c.Conn, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// errClosed ends a connection the front refuses to serve further.
var errClosed = errors.New("sasltest: connection closed by the SASL front")

// handle reports whether frame goes on to kfake; an error closes the
// connection.
func (c *conn) handle(frame []byte) (bool, error) {
	body := frame[4:]
	if len(body) < 8 {
		return false, errors.New("sasltest: short request")
	}
	key := int16(binary.BigEndian.Uint16(body[0:]))
	version := int16(binary.BigEndian.Uint16(body[2:]))
	corr := int32(binary.BigEndian.Uint32(body[4:]))
	if c.f.EnforceSession && c.authed && !c.expiry.IsZero() && time.Now().After(c.expiry) {
		c.f.expired.Add(1)
		return false, errClosed
	}
	switch key {
	case kmsg.ApiVersions.Int16():
		return true, nil
	case kmsg.SASLHandshake.Int16(), kmsg.SASLAuthenticate.Int16():
		return false, c.sasl(key, version, corr, body)
	}
	if !c.authed {
		c.f.unauthenticated.Add(1)
		return false, errClosed
	}
	if !c.expiry.IsZero() && time.Now().After(c.expiry) {
		c.f.expired.Add(1)
		return false, errClosed
	}
	return true, nil
}

// sasl answers a SaslHandshake or SaslAuthenticate request.
func (c *conn) sasl(key, version int16, corr int32, body []byte) error {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	rest, err := skipHeader(body[8:], req.IsFlexible())
	if err != nil {
		return err
	}
	if err := req.ReadFrom(rest); err != nil {
		return fmt.Errorf("sasltest: decode %s: %w", kmsg.NameForKey(key), err)
	}
	resp := req.ResponseKind()
	closeAfter := false
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		hr := resp.(*kmsg.SASLHandshakeResponse)
		hr.SupportedMechanisms = []string{c.f.Verifier.Mechanism()}
		switch {
		case r.Mechanism == c.f.Verifier.Mechanism():
			// On an authenticated connection this begins a KIP-368
			// re-authentication (franz-go does it; kafka-go does not).
			c.handshake, c.plain = true, false
		case r.Mechanism == "PLAIN" && len(c.f.Plain) > 0 && !c.authed:
			c.handshake, c.plain = true, true
			hr.SupportedMechanisms = append(hr.SupportedMechanisms, "PLAIN")
		default:
			hr.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
	case *kmsg.SASLAuthenticateRequest:
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		switch {
		case !c.handshake:
			ar.ErrorCode = kerr.IllegalSaslState.Code
			closeAfter = true
		case c.plain:
			parts := strings.Split(string(r.SASLAuthBytes), "\x00")
			if len(parts) != 3 || c.f.Plain[parts[1]] == "" || c.f.Plain[parts[1]] != parts[2] {
				c.f.refused.Add(1)
				ar.ErrorCode = kerr.SaslAuthenticationFailed.Code
				msg := "authentication failed: bad PLAIN user or password"
				ar.ErrorMessage = &msg
				closeAfter = true
				break
			}
			c.authed, c.handshake, c.expiry = true, false, time.Time{}
		case c.f.Verifier.Mechanism() == "OAUTHBEARER" && string(r.SASLAuthBytes) == "\x01":
			// The client acknowledges an error challenge (RFC 7628
			// §3.2.3): the exchange fails.
			ar.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "authentication failed"
			ar.ErrorMessage = &msg
			closeAfter = true
		default:
			principal, expiry, err := c.f.Verifier.Verify(r.SASLAuthBytes)
			if err != nil {
				c.f.refused.Add(1)
				c.f.mu.Lock()
				c.f.lastRefusal = err.Error()
				c.f.mu.Unlock()
				if ee := (*ExtensionsError)(nil); c.f.Verifier.Mechanism() == "OAUTHBEARER" && !errors.As(err, &ee) {
					// RFC 7628 §3.2.2: an error challenge.
					ar.SASLAuthBytes, _ = json.Marshal(map[string]string{"status": "invalid_token"})
				} else {
					ar.ErrorCode = kerr.SaslAuthenticationFailed.Code
					msg := "authentication failed: " + err.Error()
					if ee := (*ExtensionsError)(nil); errors.As(err, &ee) {
						msg = ee.Error() // Kafka's own message
					}
					ar.ErrorMessage = &msg
					closeAfter = true
				}
				break
			}
			if c.authed {
				c.f.reauthenticated.Add(1)
			}
			if c.f.Verifier.Mechanism() == "AWS_MSK_IAM" {
				// MSK answers a good signature with its version and a
				// request id (franz-go requires an answer).
				ar.SASLAuthBytes = []byte(`{"version":"2020_10_22","request-id":"sasltest"}`)
			}
			c.authed, c.handshake = true, false
			c.expiry = time.Time{}
			if c.f.SessionLifetime > 0 {
				c.expiry = time.Now().Add(c.f.SessionLifetime)
			}
			if !expiry.IsZero() && (c.expiry.IsZero() || expiry.Before(c.expiry)) {
				c.expiry = expiry
			}
			if !c.expiry.IsZero() {
				ar.SessionLifetimeMillis = max(1, time.Until(c.expiry).Milliseconds())
			}
			c.f.authenticated.Add(1)
			c.f.mu.Lock()
			if !slices.Contains(c.f.principals, principal) {
				c.f.principals = append(c.f.principals, principal)
			}
			c.f.mu.Unlock()
		}
	}
	if err := c.reply(corr, resp, version, req.IsFlexible()); err != nil {
		return err
	}
	if closeAfter {
		return errClosed
	}
	return nil
}

// reply writes one response frame.
func (c *conn) reply(corr int32, resp kmsg.Response, version int16, flexible bool) error {
	resp.SetVersion(version)
	out := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(out[4:], uint32(corr))
	if flexible {
		out = append(out, 0) // response header tagged fields
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	_, err := c.Write(out)
	return err
}

// skipHeader skips a request header's client id and, for flexible
// requests, its tagged fields.
func skipHeader(b []byte, flexible bool) ([]byte, error) {
	if len(b) < 2 {
		return nil, errors.New("sasltest: short header")
	}
	n := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n > 0 {
		if len(b) < int(n) {
			return nil, errors.New("sasltest: short client id")
		}
		b = b[n:]
	}
	if !flexible {
		return b, nil
	}
	tags, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("sasltest: bad tagged fields")
	}
	b = b[k:]
	for range tags {
		_, k = binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("sasltest: bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, errors.New("sasltest: bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}
