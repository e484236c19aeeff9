package emulator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// linkKind says what a link is for.
type linkKind uint8

const (
	kindProducer linkKind = iota // client sends events to a hub or partition
	kindConsumer                 // client receives events from a partition
	kindRequest                  // client sends $cbs or $management requests
	kindReply                    // client receives $cbs or $management responses
)

func (k linkKind) receives() bool { return k == kindProducer || k == kindRequest }

// String names the kind for logs.
func (k linkKind) String() string {
	switch k {
	case kindProducer:
		return "producer"
	case kindConsumer:
		return "consumer"
	case kindRequest:
		return "request"
	}
	return "reply"
}

// Link credit the emulator grants to client senders; it is topped up when
// half of it is used.
const linkCredit = 1000

// incomingDelivery is a delivery being reassembled from transfer frames.
type incomingDelivery struct {
	active   bool
	id       uint32
	format   uint32
	settled  bool
	buf      []byte
	size     int64
	oversize bool
}

// link is one attached link.
type link struct {
	s            *session
	kind         linkKind
	name         string
	remoteHandle uint32
	handle       uint32

	// Receiving side (producer, request); reader goroutine only.
	rcvDeliveryCount uint32
	rcvCredit        uint32
	cur              incomingDelivery
	limit            int64 // largest delivery accepted

	// RPC links.
	node string // "$cbs" or "$management"
	// address is, for a reply link, its target address (the requests'
	// reply-to); for a request link, its source address, where replies to
	// requests without a reply-to go.
	address string

	// Producer links.
	hub       *hub
	partition int // -1 when the service picks the partition
	msgs      [][]byte
	locs      [][2]int32

	// Sending side (consumer, reply); guarded by s.mu.
	sndDeliveryCount uint32
	sndCredit        uint32
	drain            bool
	pending          [][]byte      // replies waiting for credit
	creditCh         chan struct{} // wakes the consumer goroutine

	// Consumer links.
	cg       string // lower-case consumer group
	part     *partition
	epoch    int64
	hasEpoch bool
	receiver string // com.microsoft:receiver-name, or the link name
	metrics  bool   // the client asked for receiver runtime metrics
	start    startPosition
	nextSeq  int64 // consumer goroutine only, after attach

	detachSent    bool          // guarded by s.mu: the link is over for the emulator
	attached      bool          // guarded by s.mu: the attach reply was sent
	pendingDetach *amqp.Error   // guarded by s.mu: a detach to send right after the attach reply
	done          chan struct{} // closed by stopLocked
}

// stopLocked marks the link as finished; s.mu must be held.
func (l *link) stopLocked() {
	if !l.detachSent {
		l.detachSent = true
	}
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.s.cond.Broadcast()
}

// wake signals the consumer goroutine without blocking.
func (l *link) wake() {
	if l.creditCh == nil {
		return
	}
	select {
	case l.creditCh <- struct{}{}:
	default:
	}
}

// cleanup removes the link from every registry; it must not be called with
// s.mu held.
func (l *link) cleanup() {
	srv := l.s.c.srv
	switch l.kind {
	case kindReply:
		c := l.s.c
		c.mu.Lock()
		if c.replyLinks[l.address] == l {
			delete(c.replyLinks, l.address)
		}
		if c.replyNames[l.name] == l {
			delete(c.replyNames, l.name)
		}
		c.mu.Unlock()
	case kindRequest:
		c := l.s.c
		c.mu.Lock()
		if c.cbsSender == l {
			c.cbsSender = nil
		}
		c.mu.Unlock()
	case kindConsumer:
		if l.part != nil {
			l.part.removeReceiver(l)
		}
		srv.unregisterLink(l)
	case kindProducer:
		srv.unregisterLink(l)
	}
}

// detach ends the link from the emulator's side with an error
// (detach closed=true); the client answers with its own detach.
func (l *link) detach(e *amqp.Error) bool {
	s := l.s
	s.mu.Lock()
	if l.detachSent || s.ended {
		s.mu.Unlock()
		return false
	}
	l.stopLocked()
	if !l.attached {
		// Another connection stole the link while its attach is in progress:
		// the detach follows the attach reply.
		l.pendingDetach = e
		s.mu.Unlock()
		return true
	}
	err := s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, &amqp.Detach{Handle: l.handle, Closed: true, Error: e}, nil)
	s.mu.Unlock()
	if err == nil {
		s.c.flush()
	}
	return true
}

// handleAttach answers a client's attach: it creates the link, or refuses it
// with a null-terminus attach followed by a detach carrying the error.
func (s *session) handleAttach(a *amqp.Attach) error {
	if _, dup := s.links[a.Handle]; dup {
		return protocolError("amqp:session:handle-in-use", "attach of handle %d, which is in use", a.Handle)
	}
	l := &link{
		s:            s,
		name:         a.Name,
		remoteHandle: a.Handle,
		handle:       s.allocHandle(),
		partition:    -1,
		done:         make(chan struct{}),
	}
	s.links[a.Handle] = l
	s.handles[l.handle] = l
	srv := s.c.srv

	reply := &amqp.Attach{
		Name:      a.Name,
		Handle:    l.handle,
		Role:      !a.Role,
		SourceRaw: a.SourceRaw,
		TargetRaw: a.TargetRaw,
	}
	var refusal *amqp.Error
	if a.Role == amqp.RoleSender {
		addr := ""
		if a.Target != nil {
			addr = a.Target.Address
		}
		reply.SndSettleMode = a.SndSettleMode
		first := amqp.ReceiverSettleFirst
		reply.RcvSettleMode = &first
		switch addr {
		case "$cbs", "$management":
			l.kind, l.node, l.limit = kindRequest, addr, DefaultMaxMessageSize
			if a.Source != nil {
				l.address = a.Source.Address
			}
			if addr == "$cbs" {
				refusal = s.c.claimCBS(l)
			}
		default:
			l.kind = kindProducer
			refusal = srv.attachProducer(s.c, l, addr)
			if refusal == nil {
				reply.MaxMessageSize = uint64(l.hub.cfg.MaxMessageSize)
			}
		}
		l.rcvCredit = linkCredit
		if a.InitialDeliveryCount != nil {
			l.rcvDeliveryCount = *a.InitialDeliveryCount
		}
	} else {
		addr := ""
		if a.Source != nil {
			addr = a.Source.Address
		}
		settled := amqp.SenderSettleSettled
		zero := uint32(0)
		reply.SndSettleMode = &settled
		reply.InitialDeliveryCount = &zero
		switch addr {
		case "$cbs", "$management":
			l.kind, l.node = kindReply, addr
			if a.Target != nil {
				l.address = a.Target.Address
			}
			s.c.mu.Lock()
			if l.address != "" {
				s.c.replyLinks[l.address] = l
			}
			s.c.replyNames[l.name] = l
			s.c.mu.Unlock()
		default:
			l.kind = kindConsumer
			l.creditCh = make(chan struct{}, 1)
			refusal = srv.attachConsumer(s.c, l, a)
		}
	}
	log := s.c.log.With("link", l.name, "kind", l.kind.String(), "channel", s.ch)
	if refusal != nil {
		log.Info("attach refused", "condition", refusal.Condition, "description", refusal.Description)
		reply.SourceRaw, reply.TargetRaw, reply.MaxMessageSize = nil, nil, 0
		if err := s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, reply, nil); err != nil {
			return err
		}
		s.mu.Lock()
		l.stopLocked()
		s.mu.Unlock()
		return s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, &amqp.Detach{Handle: l.handle, Closed: true, Error: refusal}, nil)
	}
	if l.metrics {
		reply.OfferedCapabilities = []amqp.Symbol{capabilityRuntimeMetric}
	}
	if a.Properties != nil {
		// A link that sent properties gets a properties map back, never
		// null: the Python SDK merges it into its own and fails on null.
		reply.Properties = amqp.Map{}
	}
	log.Debug("attached")
	s.mu.Lock()
	err := s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, reply, nil)
	l.attached = true
	if err == nil && l.pendingDetach != nil {
		err = s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, &amqp.Detach{Handle: l.handle, Closed: true, Error: l.pendingDetach}, nil)
	}
	stopped := l.detachSent
	s.mu.Unlock()
	if err != nil || stopped {
		return err
	}
	switch l.kind {
	case kindProducer, kindRequest:
		return s.sendFlow(l)
	case kindConsumer:
		srv.registerLink(l)
		s.c.wg.Add(1)
		go l.runConsumer()
	}
	return nil
}

// claimCBS makes l the connection's $cbs request link; the service allows
// one $cbs link pair per connection and refuses another while the first is
// attached.
func (c *conn) claimCBS(l *link) *amqp.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cbsSender != nil {
		return &amqp.Error{Condition: "amqp:not-allowed", Description: fmt.Sprintf(
			"A $cbs link (%q) is already open on this connection; only one $cbs sender and receiver pair is allowed per connection.", c.cbsSender.name)}
	}
	c.cbsSender = l
	return nil
}

func notFound(format string, args ...any) *amqp.Error {
	return &amqp.Error{Condition: "amqp:not-found", Description: fmt.Sprintf(format, args...)}
}

// entityPath splits a link address into its path segments, tolerating an
// absolute amqp:// or sb:// form and a leading slash.
func entityPath(addr string) []string {
	for _, scheme := range []string{"amqps://", "amqp://", "sb://"} {
		if rest, ok := strings.CutPrefix(addr, scheme); ok {
			_, addr, _ = strings.Cut(rest, "/")
		}
	}
	return strings.Split(strings.Trim(addr, "/"), "/")
}

// lookupHub finds a hub by name, or returns the not-found error the SDK
// treats as fatal.
func (srv *Server) lookupHub(name string) (*hub, *amqp.Error) {
	h := srv.hub(name)
	if h == nil {
		return nil, srv.entityNotFound(name)
	}
	return h, nil
}

// entityNotFound is the service's error for an entity (hub or consumer
// group) that does not exist; other SDKs map amqp:not-found with this text to
// "entity not found".
func (srv *Server) entityNotFound(path string) *amqp.Error {
	return notFound("The messaging entity 'sb://%s/%s' could not be found. To know more visit https://aka.ms/sbResourceMgrExceptions.", srv.cfg.Namespace, path)
}

func lookupPartition(h *hub, id string) (int, *amqp.Error) {
	n, err := strconv.Atoi(id)
	if err != nil || n < 0 || n >= len(h.partitions) || strconv.Itoa(n) != id {
		return 0, &amqp.Error{Condition: "com.microsoft:argument-out-of-range", Description: fmt.Sprintf(
			"The specified partition is invalid for an EventHub partition sender or receiver. It should be between 0 and %d.", len(h.partitions)-1)}
	}
	return n, nil
}

// attachProducer resolves a producer link's target: "hub" or
// "hub/Partitions/N".
func (srv *Server) attachProducer(c *conn, l *link, addr string) *amqp.Error {
	parts := entityPath(addr)
	if parts[0] == "" || (len(parts) != 1 && (len(parts) != 3 || !strings.EqualFold(parts[1], "Partitions"))) {
		return notFound("address %q is not an event hub or a partition of one", addr)
	}
	h, e := srv.lookupHub(parts[0])
	if e != nil {
		return e
	}
	if len(parts) == 3 {
		p, e := lookupPartition(h, parts[2])
		if e != nil {
			return e
		}
		l.partition = p
	}
	if e := c.authorize(strings.Join(parts, "/"), rightSend); e != nil {
		return e
	}
	l.hub = h
	l.limit = h.cfg.MaxMessageSize
	srv.registerLink(l)
	return nil
}

// attachConsumer resolves a consumer link's source
// "hub/ConsumerGroups/CG/Partitions/N", its start position and owner level.
func (srv *Server) attachConsumer(c *conn, l *link, a *amqp.Attach) *amqp.Error {
	addr := a.Source.Address
	parts := entityPath(addr)
	if len(parts) != 5 || !strings.EqualFold(parts[1], "ConsumerGroups") || !strings.EqualFold(parts[3], "Partitions") {
		if len(parts) >= 1 && parts[0] != "" && srv.hub(parts[0]) == nil {
			_, e := srv.lookupHub(parts[0])
			return e
		}
		return notFound("address %q is not a partition of a consumer group of an event hub", addr)
	}
	h, e := srv.lookupHub(parts[0])
	if e != nil {
		return e
	}
	cg, ok := h.consumerGroups[strings.ToLower(parts[2])]
	if !ok {
		return srv.entityNotFound(h.cfg.Name + "/ConsumerGroups/" + parts[2])
	}
	p, e := lookupPartition(h, parts[4])
	if e != nil {
		return e
	}
	if e := c.authorize(strings.Join(parts, "/"), rightListen); e != nil {
		return e
	}
	sp, err := startFromFilter(a.Source.Filter)
	if err != nil {
		return &amqp.Error{Condition: "amqp:not-allowed", Description: err.Error()}
	}
	l.hub, l.cg, l.part, l.start = h, strings.ToLower(cg), h.partitions[p], sp
	if v, ok := a.Properties.Get(amqp.Symbol("com.microsoft:epoch")); ok {
		epoch, ok := integer(v)
		if !ok {
			return &amqp.Error{Condition: "amqp:not-allowed", Description: fmt.Sprintf("com.microsoft:epoch has type %T, want an integer", v)}
		}
		l.epoch, l.hasEpoch = epoch, true
	}
	l.metrics = slices.Contains(a.DesiredCapabilities, capabilityRuntimeMetric)
	l.receiver = l.name
	if v, ok := a.Properties.Get(amqp.Symbol("com.microsoft:receiver-name")); ok {
		if name, ok := v.(string); ok && name != "" {
			l.receiver = name
		}
	}
	if e := l.part.addReceiver(l); e != nil {
		return e
	}
	l.nextSeq = l.part.resolve(sp, srv.now())
	return nil
}

func integer(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case int16:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint8:
		return int64(v), true
	case uint64:
		if v <= 1<<63-1 {
			return int64(v), true
		}
	}
	return 0, false
}
