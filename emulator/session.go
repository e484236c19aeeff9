package emulator

import (
	"sync"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// session is one AMQP session. The link maps and framesSinceFlow belong to
// the connection's reader goroutine; the flow-control counters are guarded by
// mu because consumer goroutines send transfers concurrently.
type session struct {
	c  *conn
	ch uint16

	links           map[uint32]*link // by the client's handle
	handles         map[uint32]*link // by the emulator's handle
	framesSinceFlow uint32
	xfer            amqp.Transfer // reused by handleTransfer

	mu                   sync.Mutex
	cond                 *sync.Cond // signalled when the client's window opens or the session ends
	nextIncomingID       uint32
	nextOutgoingID       uint32
	remoteIncomingWindow uint32
	nextDeliveryID       uint32
	ended                bool
}

func newSession(c *conn, ch uint16, b *amqp.Begin) *session {
	s := &session{
		c:                    c,
		ch:                   ch,
		links:                map[uint32]*link{},
		handles:              map[uint32]*link{},
		nextIncomingID:       b.NextOutgoingID,
		remoteIncomingWindow: b.IncomingWindow,
	}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *session) handleFrame(code uint64, body []byte) error {
	switch code {
	case amqp.CodeTransfer:
		return s.handleTransfer(body)
	case amqp.CodeFlow:
		var f amqp.Flow
		if err := f.Unmarshal(body); err != nil {
			return protocolError("amqp:decode-error", "%v", err)
		}
		return s.handleFlow(&f)
	case amqp.CodeDisposition:
		var d amqp.Disposition
		if err := d.Unmarshal(body); err != nil {
			return protocolError("amqp:decode-error", "%v", err)
		}
		return nil // every delivery the emulator sends is pre-settled
	case amqp.CodeAttach:
		var a amqp.Attach
		if err := a.Unmarshal(body); err != nil {
			return protocolError("amqp:decode-error", "%v", err)
		}
		return s.handleAttach(&a)
	case amqp.CodeDetach:
		var d amqp.Detach
		if err := d.Unmarshal(body); err != nil {
			return protocolError("amqp:decode-error", "%v", err)
		}
		return s.handleDetach(&d)
	case amqp.CodeEnd:
		var e amqp.End
		if err := e.Unmarshal(body); err != nil {
			return protocolError("amqp:decode-error", "%v", err)
		}
		if e.Error != nil {
			s.c.log.Info("client ended a session with an error", "channel", s.ch, "error", e.Error)
		}
		s.release()
		s.c.endSession(s)
		return s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, &amqp.End{}, nil)
	}
	return protocolError("amqp:not-allowed", "unexpected performative 0x%02x on channel %d", code, s.ch)
}

// release ends every link of the session without sending detaches.
func (s *session) release() {
	s.mu.Lock()
	s.ended = true
	for _, l := range s.links {
		l.stopLocked()
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	for h, l := range s.links {
		l.cleanup()
		delete(s.links, h)
	}
	clear(s.handles)
}

func (s *session) allocHandle() uint32 {
	var h uint32
	for s.handles[h] != nil {
		h++
	}
	return h
}

// flowLocked builds a flow frame with the session fields and, for l, the
// link fields.
func (s *session) flowLocked(l *link) *amqp.Flow {
	nextIn := s.nextIncomingID
	f := &amqp.Flow{
		NextIncomingID: &nextIn,
		IncomingWindow: sessionWindow,
		NextOutgoingID: s.nextOutgoingID,
		OutgoingWindow: sessionWindow,
	}
	if l != nil {
		h := l.handle
		f.Handle = &h
		var dc, credit uint32
		if l.kind.receives() {
			dc, credit = l.rcvDeliveryCount, l.rcvCredit
		} else {
			dc, credit = l.sndDeliveryCount, l.sndCredit
		}
		f.DeliveryCount, f.LinkCredit = &dc, &credit
	}
	return f
}

// sendFlow writes a flow frame for the session and, if l is not nil, l.
func (s *session) sendFlow(l *link) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.framesSinceFlow = 0
	return s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, s.flowLocked(l), nil)
}

func (s *session) handleFlow(f *amqp.Flow) error {
	var l *link
	if f.Handle != nil {
		l = s.links[*f.Handle]
		if l == nil {
			return protocolError("amqp:session:unattached-handle", "flow for unknown handle %d", *f.Handle)
		}
	}
	s.mu.Lock()
	var nextIn uint32 // the client's next-incoming-id, initially our next-outgoing-id (0)
	if f.NextIncomingID != nil {
		nextIn = *f.NextIncomingID
	}
	s.remoteIncomingWindow = remoteWindow(nextIn, f.IncomingWindow, s.nextOutgoingID)
	s.cond.Broadcast()
	echo := f.Echo
	if l != nil && !l.kind.receives() && f.LinkCredit != nil {
		// The client is the receiver: credit = its delivery-count + its
		// link-credit - our delivery-count (transport §2.6.7).
		dc := uint32(0)
		if f.DeliveryCount != nil {
			dc = *f.DeliveryCount
		}
		l.sndCredit = dc + *f.LinkCredit - l.sndDeliveryCount
		if int32(l.sndCredit) < 0 {
			l.sndCredit = 0
		}
		l.drain = f.Drain
		l.wake()
	}
	// Every reply link of the session resumes on any flow: replies wait
	// for link credit and for session window, and a session flow opens the
	// window of all the session's links. (Consumer links wait on s.cond.)
	for _, rl := range s.links {
		if rl.kind == kindReply && len(rl.pending) > 0 {
			rl.sendPendingLocked()
		}
	}
	var err error
	if echo {
		err = s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, s.flowLocked(l), nil)
	}
	s.mu.Unlock()
	return err
}

// remoteWindow is how many more transfer frames the client takes after a
// flow with its next-incoming-id and incoming-window (transport §2.5.6:
// next-incoming-id + incoming-window - our next-outgoing-id). Transfers in
// flight when the client sent the flow, and a window it shrank, can make
// that negative: then it is 0, never a wrapped-around huge window. Ids are
// compared as serial numbers (RFC 1982), windows taken whole.
func remoteWindow(nextIncomingID, incomingWindow, nextOutgoingID uint32) uint32 {
	inFlight := int64(int32(nextOutgoingID - nextIncomingID))
	return uint32(min(max(int64(incomingWindow)-inFlight, 0), 1<<32-1))
}

func (s *session) handleTransfer(body []byte) error {
	t := &s.xfer
	payload, err := t.UnmarshalPayload(body)
	if err != nil {
		return protocolError("amqp:decode-error", "%v", err)
	}
	s.mu.Lock()
	s.nextIncomingID++
	s.mu.Unlock()
	s.framesSinceFlow++
	l := s.links[t.Handle]
	if l == nil {
		return protocolError("amqp:session:unattached-handle", "transfer on unknown handle %d", t.Handle)
	}
	if !l.kind.receives() {
		return protocolError("amqp:not-allowed", "transfer from the receiving end of link %q", l.name)
	}
	if err := l.receiveFrame(t, payload); err != nil {
		return err
	}
	if s.framesSinceFlow >= sessionWindow/2 {
		return s.sendFlow(nil)
	}
	return nil
}

func (s *session) handleDetach(d *amqp.Detach) error {
	l := s.links[d.Handle]
	if l == nil {
		return protocolError("amqp:session:unattached-handle", "detach of unknown handle %d", d.Handle)
	}
	if d.Error != nil {
		s.c.log.Info("client detached a link with an error", "link", l.name, "error", d.Error)
	}
	delete(s.links, d.Handle)
	delete(s.handles, l.handle)
	s.mu.Lock()
	alreadyDetached := l.detachSent
	l.stopLocked()
	s.mu.Unlock()
	l.cleanup()
	if alreadyDetached {
		return nil
	}
	return s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, &amqp.Detach{Handle: l.handle, Closed: true}, nil)
}
