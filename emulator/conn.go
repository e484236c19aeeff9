package emulator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// Connection parameters the emulator advertises.
const (
	// maxFrameSize is the max-frame-size the emulator advertises and the
	// largest frame it accepts: no length field can make it allocate more.
	maxFrameSize = 65536
	// idleTimeout is the idle-time-out the emulator advertises; the client
	// then sends a frame at least every idleTimeout/2. The emulator closes a
	// connection that stays silent for twice this long.
	idleTimeout = 120 * time.Second
	// heartbeatInterval is how often the emulator sends an empty frame; the
	// SDK closes connections silent for 60 s.
	heartbeatInterval = 15 * time.Second
	// writeTimeout bounds every write to a client.
	writeTimeout = 60 * time.Second
	// sessionWindow is the incoming-window (in transfer frames) of every
	// session; it is refreshed long before it runs out.
	sessionWindow = 1 << 20
)

// connError is an error that ends the connection with an AMQP close carrying
// the condition.
type connError struct {
	cond string
	desc string
}

// Error implements the error interface.
func (e *connError) Error() string { return e.cond + ": " + e.desc }

func framingError(format string, args ...any) error {
	return &connError{cond: "amqp:connection:framing-error", desc: fmt.Sprintf(format, args...)}
}

func protocolError(cond, format string, args ...any) error {
	return &connError{cond: cond, desc: fmt.Sprintf(format, args...)}
}

// errConnClosed reports a write on a connection that is gone.
var errConnClosed = errors.New("connection closed")

// conn serves one client connection. The reader goroutine (serve) owns the
// session and link maps; other goroutines (consumer deliveries, heartbeats,
// faults) write frames through the write lock.
type conn struct {
	srv *Server
	nc  net.Conn
	br  *bufio.Reader
	log *slog.Logger

	// write side
	wmu  sync.Mutex
	bw   *bufio.Writer
	wbuf []byte
	werr error

	peerMaxFrame uint32

	sessions map[uint16]*session // by channel; reader goroutine only
	// ended are the channels whose session the client ended and has not
	// begun again; reader goroutine only.
	ended map[uint16]bool

	mu         sync.Mutex
	replyLinks map[string]*link // RPC reply links by their target address
	replyNames map[string]*link // RPC reply links by their link name
	cbsSender  *link            // the connection's one $cbs request link
	claims     []claim

	done      chan struct{} // closed when the connection ends
	closeOnce sync.Once
	wg        sync.WaitGroup // consumer goroutines
}

func newConn(srv *Server, nc net.Conn, id uint64) *conn {
	return &conn{
		srv:          srv,
		nc:           nc,
		br:           bufio.NewReaderSize(nc, maxFrameSize),
		bw:           bufio.NewWriterSize(nc, 64<<10),
		log:          srv.log.With("conn", id, "remote", nc.RemoteAddr().String()),
		peerMaxFrame: amqp.MinMaxFrameSize,
		sessions:     map[uint16]*session{},
		ended:        map[uint16]bool{},
		replyLinks:   map[string]*link{},
		replyNames:   map[string]*link{},
		done:         make(chan struct{}),
	}
}

// abort closes the TCP connection at once, without an AMQP close.
func (c *conn) abort() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.nc.Close()
	})
}

// serve runs the connection until it ends. A protocol error ends it with an
// AMQP close carrying the error; anything else just closes the socket.
func (c *conn) serve(ctx context.Context) {
	defer c.shutdown()
	err := c.handshake()
	if err == nil {
		hb := time.NewTicker(c.srv.cfg.heartbeat)
		defer hb.Stop()
		c.wg.Add(1)
		go c.heartbeats(ctx, hb.C)
		err = c.readLoop()
	}
	var ce *connError
	if errors.As(err, &ce) {
		c.log.Info("closing connection on protocol error", "condition", ce.cond, "description", ce.desc)
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Close{Error: &amqp.Error{Condition: amqp.Symbol(ce.cond), Description: ce.desc}}, nil)
		c.flush()
		return
	}
	c.log.Debug("connection ended", "err", err)
}

func (c *conn) heartbeats(ctx context.Context, tick <-chan time.Time) {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case <-ctx.Done():
			c.abort()
			return
		case <-tick:
			if c.writeFrame(amqp.FrameTypeAMQP, 0, nil, nil) != nil || c.flush() != nil {
				c.abort()
				return
			}
		}
	}
}

// shutdown closes the socket (which unblocks any pending write), releases
// every session and link and waits for the connection's goroutines.
func (c *conn) shutdown() {
	c.abort()
	for ch, s := range c.sessions {
		s.release()
		delete(c.sessions, ch)
	}
	c.wg.Wait()
	c.srv.removeConn(c)
}

// handshake exchanges protocol headers, performs SASL ANONYMOUS and the open
// exchange.
func (c *conn) handshake() error {
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.nc.SetDeadline(time.Time{})
	id, err := c.readProtocolHeader()
	if err != nil {
		return err
	}
	if id == amqp.ProtocolSASL {
		if err := c.sasl(); err != nil {
			return err
		}
		if id, err = c.readProtocolHeader(); err != nil {
			return err
		}
	}
	if id != amqp.ProtocolAMQP {
		h := amqp.ProtocolHeader(amqp.ProtocolSASL)
		c.nc.Write(h[:])
		return fmt.Errorf("unsupported protocol id %d", id)
	}
	h := amqp.ProtocolHeader(amqp.ProtocolAMQP)
	if _, err := c.bw.Write(h[:]); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}
	fh, body, err := c.readFrame()
	if err != nil {
		return err
	}
	var open amqp.Open
	if fh.Type != amqp.FrameTypeAMQP {
		return errors.New("expected open, got a SASL frame")
	}
	if err := open.Unmarshal(body); err != nil {
		c.discardFrame(fh)
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Open{ContainerID: c.srv.containerID, MaxFrameSize: maxFrameSize}, nil)
		return &connError{cond: "amqp:decode-error", desc: err.Error()}
	}
	c.discardFrame(fh)
	c.peerMaxFrame = open.MaxFrameSize
	if c.peerMaxFrame < amqp.MinMaxFrameSize {
		c.peerMaxFrame = amqp.MinMaxFrameSize
	}
	c.log.Debug("open", "container", open.ContainerID, "hostname", open.Hostname, "max-frame-size", open.MaxFrameSize, "idle-time-out", open.IdleTimeout)
	if err := c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Open{
		ContainerID:  c.srv.containerID,
		Hostname:     open.Hostname,
		MaxFrameSize: maxFrameSize,
		ChannelMax:   65535,
		IdleTimeout:  uint32(idleTimeout.Milliseconds()),
	}, nil); err != nil {
		return err
	}
	return c.flush()
}

func (c *conn) readProtocolHeader() (uint8, error) {
	var h [8]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return 0, err
	}
	id, err := amqp.ParseProtocolHeader(h)
	if err != nil {
		reply := amqp.ProtocolHeader(amqp.ProtocolSASL)
		c.nc.Write(reply[:])
		return 0, err
	}
	return id, nil
}

// sasl answers the SASL header, offers ANONYMOUS (and PLAIN, accepted without
// checks) and reports success.
func (c *conn) sasl() error {
	h := amqp.ProtocolHeader(amqp.ProtocolSASL)
	if _, err := c.bw.Write(h[:]); err != nil {
		return err
	}
	if err := c.writeFrame(amqp.FrameTypeSASL, 0, &amqp.SASLMechanisms{Mechanisms: []amqp.Symbol{"ANONYMOUS", "PLAIN"}}, nil); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}
	fh, body, err := c.readFrame()
	if err != nil {
		return err
	}
	var init amqp.SASLInit
	if fh.Type != amqp.FrameTypeSASL {
		return errors.New("expected sasl-init")
	}
	err = init.Unmarshal(body)
	c.discardFrame(fh)
	code := amqp.SASLCodeOK
	if err != nil || (init.Mechanism != "ANONYMOUS" && init.Mechanism != "PLAIN") {
		code = amqp.SASLCodeAuth
	}
	if werr := c.writeFrame(amqp.FrameTypeSASL, 0, &amqp.SASLOutcome{Code: code}, nil); werr != nil {
		return werr
	}
	if werr := c.flush(); werr != nil {
		return werr
	}
	if code != amqp.SASLCodeOK {
		return fmt.Errorf("sasl-init refused (mechanism %q): %v", init.Mechanism, err)
	}
	return nil
}

// readFrame peeks the next complete frame. body aliases the read buffer and
// is valid until discardFrame.
func (c *conn) readFrame() (amqp.FrameHeader, []byte, error) {
	if c.br.Buffered() < amqp.FrameHeaderSize {
		c.nc.SetReadDeadline(time.Now().Add(2 * idleTimeout))
	}
	hb, err := c.br.Peek(amqp.FrameHeaderSize)
	if err != nil {
		return amqp.FrameHeader{}, nil, err
	}
	fh, err := amqp.ParseFrameHeader(hb, maxFrameSize)
	if err != nil {
		return fh, nil, framingError("%v", err)
	}
	frame, err := c.br.Peek(int(fh.Size))
	if err != nil {
		return fh, nil, err
	}
	return fh, frame[fh.BodyOffset():], nil
}

func (c *conn) discardFrame(fh amqp.FrameHeader) {
	c.br.Discard(int(fh.Size))
}

// readLoop reads and dispatches frames until the connection ends. Replies
// are flushed when no more input is buffered (or every 64 frames), so
// pipelined frames get their replies in few writes.
func (c *conn) readLoop() error {
	for n := 0; ; n++ {
		if c.br.Buffered() == 0 || n%64 == 0 {
			if err := c.flush(); err != nil {
				return err
			}
		}
		fh, body, err := c.readFrame()
		if err != nil {
			return err
		}
		err = c.handleFrame(fh, body)
		c.discardFrame(fh)
		if err != nil {
			return err
		}
	}
}

// errClientClosed ends the read loop after the client's close.
var errClientClosed = errors.New("client closed the connection")

func (c *conn) handleFrame(fh amqp.FrameHeader, body []byte) error {
	if fh.Type != amqp.FrameTypeAMQP {
		return framingError("SASL frame after the SASL exchange")
	}
	if len(body) == 0 {
		return nil // heartbeat
	}
	code, err := amqp.PerformativeCode(body)
	if err != nil {
		return protocolError("amqp:decode-error", "frame body: %v", err)
	}
	switch code {
	case amqp.CodeBegin:
		var b amqp.Begin
		if err := b.Unmarshal(body); err != nil {
			return protocolError("amqp:decode-error", "%v", err)
		}
		return c.handleBegin(fh.Channel, &b)
	case amqp.CodeClose:
		var cl amqp.Close
		if err := cl.Unmarshal(body); err == nil && cl.Error != nil {
			c.log.Info("client closed the connection with an error", "error", cl.Error)
		}
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Close{}, nil)
		c.flush()
		return errClientClosed
	case amqp.CodeOpen:
		return protocolError("amqp:illegal-state", "second open")
	}
	s := c.sessions[fh.Channel]
	if s == nil && c.ended[fh.Channel] {
		// The Python SDK detaches its management links after ending
		// their session; like the service, ignore what follows an end.
		c.log.Debug("frame after the client ended the session ignored", "channel", fh.Channel, "performative", fmt.Sprintf("0x%02x", code))
		return nil
	}
	if s == nil && code == amqp.CodeEnd {
		// go-amqp ends the sessions it abandoned (a begin whose context
		// ended), also one whose begin never reached the peer (seen
		// under load), and expects no answer: ignore it and keep the
		// connection and the sessions on it.
		c.log.Info("end on a channel without a session ignored", "channel", fh.Channel)
		return nil
	}
	if s == nil {
		return protocolError("amqp:connection:framing-error", "frame 0x%02x on channel %d without a session", code, fh.Channel)
	}
	return s.handleFrame(code, body)
}

func (c *conn) handleBegin(ch uint16, b *amqp.Begin) error {
	if _, inUse := c.sessions[ch]; inUse {
		return protocolError("amqp:illegal-state", "begin on channel %d, which has a session", ch)
	}
	if b.RemoteChannel != nil {
		return protocolError("amqp:not-allowed", "begin with a remote-channel: the emulator never begins sessions")
	}
	s := newSession(c, ch, b)
	c.sessions[ch] = s
	delete(c.ended, ch)
	return c.writeFrame(amqp.FrameTypeAMQP, ch, &amqp.Begin{
		RemoteChannel:  &ch,
		NextOutgoingID: 0,
		IncomingWindow: sessionWindow,
		OutgoingWindow: sessionWindow,
		HandleMax:      1<<32 - 2,
	}, nil)
}

// endSession forgets a session the client ended.
func (c *conn) endSession(s *session) {
	delete(c.sessions, s.ch)
	c.ended[s.ch] = true
}

// writeFrame encodes and buffers a frame; payload is written after the
// performative without copying. It does not flush.
func (c *conn) writeFrame(frameType uint8, ch uint16, p amqp.Performative, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeFrameLocked(frameType, ch, p, payload)
}

func (c *conn) writeFrameLocked(frameType uint8, ch uint16, p amqp.Performative, payload []byte) error {
	if c.werr != nil {
		return c.werr
	}
	var err error
	c.wbuf, err = amqp.AppendFrame(c.wbuf[:0], frameType, ch, p, nil)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	size := len(c.wbuf) + len(payload)
	c.wbuf[0], c.wbuf[1], c.wbuf[2], c.wbuf[3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.bw.Write(c.wbuf); err != nil {
		return c.failWriteLocked(err)
	}
	if len(payload) > 0 {
		if _, err := c.bw.Write(payload); err != nil {
			return c.failWriteLocked(err)
		}
	}
	return nil
}

func (c *conn) failWriteLocked(err error) error {
	c.werr = fmt.Errorf("%w: %w", errConnClosed, err)
	c.abort()
	return c.werr
}

// flush writes buffered frames to the socket.
func (c *conn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if c.bw.Buffered() == 0 {
		return nil
	}
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := c.bw.Flush(); err != nil {
		return c.failWriteLocked(err)
	}
	return nil
}
