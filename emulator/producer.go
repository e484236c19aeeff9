package emulator

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/ehmirror/ehmirror/emulator/amqp"
	"github.com/ehmirror/ehmirror/partitionkey"
)

// acceptedState is the encoded accepted outcome.
var acceptedState = amqp.AppendAccepted(nil)

// receiveFrame adds one transfer frame to the link's current delivery and
// handles the delivery when it is complete.
func (l *link) receiveFrame(t *amqp.Transfer, payload []byte) error {
	srv := l.s.c.srv
	if !l.cur.active {
		if !t.HasDeliveryID {
			return protocolError("amqp:not-allowed", "first transfer of a delivery on link %q has no delivery-id", l.name)
		}
		l.cur = incomingDelivery{active: true, id: t.DeliveryID, format: t.MessageFormat, settled: t.Settled}
		if l.kind == kindProducer && srv.faults.takeDrop() {
			l.s.c.log.Info("fault: dropping the connection in the middle of a transfer", "link", l.name, "delivery-id", t.DeliveryID)
			l.s.c.abort()
			return errConnClosed
		}
		if t.More {
			// A multi-frame delivery is usually a full batch: reserve the
			// link's limit at once instead of growing and copying, but no
			// more than 2 MiB and 32 times what the first frame carries.
			l.cur.buf = make([]byte, 0, min(l.limit, 2<<20, 32*int64(len(payload))))
		}
	} else if t.HasDeliveryID && t.DeliveryID != l.cur.id {
		return protocolError("amqp:not-allowed", "transfer for delivery %d while delivery %d is incomplete on link %q", t.DeliveryID, l.cur.id, l.name)
	}
	if t.Settled {
		l.cur.settled = true
	}
	if t.Aborted {
		l.cur = incomingDelivery{}
		l.countDelivery()
		return nil
	}
	l.cur.size += int64(len(payload))
	switch {
	case l.cur.size > l.limit:
		l.cur.oversize = true
		l.cur.buf = nil
	case l.cur.buf == nil && !t.More:
		l.cur.buf = append([]byte(nil), payload...)
	default:
		l.cur.buf = appendCapped(l.cur.buf, payload, int(l.limit))
	}
	if t.More {
		return nil
	}
	d := l.cur
	l.cur = incomingDelivery{}
	if slack := cap(d.buf) - len(d.buf); slack > 64<<10 && slack > len(d.buf)/4 {
		// Stored events keep the buffer alive: do not retain a mostly
		// empty reservation.
		d.buf = append([]byte(nil), d.buf...)
	}
	if l.detachedByEmulator() {
		return nil
	}
	var state []byte
	switch l.kind {
	case kindProducer:
		if delay := l.s.c.srv.faults.ingestDelay(); delay > 0 {
			time.Sleep(delay)
		}
		state = l.ingest(&d)
	case kindRequest:
		state = acceptedState
		if d.oversize {
			state = rejectedState(&amqp.Error{Condition: "amqp:link:message-size-exceeded", Description: "request too large"})
		}
	}
	if !d.settled {
		l.settle(d.id, state)
	}
	if l.kind == kindRequest && !d.oversize {
		l.handleRequest(d.buf)
	}
	return l.countDelivery()
}

func (l *link) detachedByEmulator() bool {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.detachSent
}

// countDelivery advances the link's delivery count and tops up credit.
func (l *link) countDelivery() error {
	l.rcvDeliveryCount++
	if l.rcvCredit > 0 {
		l.rcvCredit--
	}
	if l.rcvCredit <= linkCredit/2 {
		l.rcvCredit = linkCredit
		return l.s.sendFlow(l)
	}
	return nil
}

func rejectedState(e *amqp.Error) []byte {
	b, err := amqp.AppendRejected(nil, e)
	if err != nil {
		return acceptedState // unreachable: e has no info map
	}
	return b
}

// settle sends the settled disposition for a delivery, after the injected
// delay if there is one.
func (l *link) settle(id uint32, state []byte) {
	c := l.s.c
	disp := &amqp.Disposition{Role: amqp.RoleReceiver, First: id, Settled: true, State: state}
	if delay := c.srv.faults.dispositionDelay(); delay > 0 {
		ch := l.s.ch
		time.AfterFunc(delay, func() {
			if c.writeFrame(amqp.FrameTypeAMQP, ch, disp, nil) == nil {
				c.flush()
			}
		})
		return
	}
	c.writeFrame(amqp.FrameTypeAMQP, l.s.ch, disp, nil)
}

// ingest stores the events of a complete producer delivery and returns the
// delivery state for its disposition.
func (l *link) ingest(d *incomingDelivery) []byte {
	srv := l.s.c.srv
	h := l.hub
	if cond, ok := srv.faults.takeReject(); ok {
		srv.stats.rejectedSends.Add(1)
		return rejectedState(&amqp.Error{Condition: amqp.Symbol(cond), Description: "rejected by the emulator's fault injection"})
	}
	if d.oversize {
		srv.stats.rejectedSends.Add(1)
		return rejectedState(&amqp.Error{
			Condition: "amqp:link:message-size-exceeded",
			Description: fmt.Sprintf("The received message (delivery-id:%d, size:%d bytes) exceeds the limit (%d bytes) currently allowed on the link.",
				d.id, d.size, h.cfg.MaxMessageSize),
		})
	}
	msgs, locs := l.msgs[:0], l.locs[:0]
	var key string
	var err error
	switch d.format {
	case amqp.MessageFormatBatch:
		msgs, locs, key, err = splitBatch(d.buf, msgs, locs)
	case amqp.MessageFormatAMQP:
		var loc [2]int32
		loc, key, err = locateAnnotations(d.buf, true)
		msgs, locs = append(msgs, d.buf), append(locs, loc)
	default:
		err = fmt.Errorf("message format 0x%08x is not supported", d.format)
	}
	if err != nil {
		srv.stats.rejectedSends.Add(1)
		return rejectedState(&amqp.Error{Condition: "amqp:decode-error", Description: err.Error()})
	}
	if srv.throttle != nil && len(msgs) > 0 && !srv.throttle.admit(d.size, len(msgs)) {
		clear(msgs)
		l.msgs, l.locs = msgs[:0], locs[:0]
		srv.stats.rejectedSends.Add(1)
		srv.stats.throttledRequests.Add(1)
		return rejectedState(&amqp.Error{Condition: ConditionServerBusy, Description: ServerBusyDescription})
	}
	p := l.partition
	switch {
	case p >= 0:
	case key != "":
		p = partitionkey.Partition(key, len(h.partitions))
	default:
		p = int(h.nextPartition.Add(1)-1) % len(h.partitions)
	}
	if len(msgs) > 0 {
		if err := h.partitions[p].appendEvents(msgs, locs, key, srv.now()); err != nil {
			srv.log.Error("event not stored", "hub", h.cfg.Name, "err", err)
			clear(msgs)
			l.msgs, l.locs = msgs[:0], locs[:0]
			srv.stats.rejectedSends.Add(1)
			return rejectedState(&amqp.Error{Condition: "amqp:internal-error", Description: err.Error()})
		}
		srv.stats.eventsStored.Add(int64(len(msgs)))
		srv.stats.bytesStored.Add(d.size)
	}
	clear(msgs)
	l.msgs, l.locs = msgs[:0], locs[:0]
	return acceptedState
}

// splitBatch unpacks a batch (format 0x80013700): every data section holds
// one event's complete message; the envelope's other sections only repeat
// the first event's metadata, except for the partition key.
func splitBatch(buf []byte, msgs [][]byte, locs [][2]int32) ([][]byte, [][2]int32, string, error) {
	var key string
	err := amqp.ForEachSection(buf, func(code uint64, _, value []byte) error {
		switch code {
		case amqp.SectionMessageAnnotations:
			k, _, err := annotationString(value, annotationPartitionKey)
			if err != nil {
				return fmt.Errorf("batch message-annotations: %w", err)
			}
			key = k
		case amqp.SectionData:
			d := amqp.NewDecoder(value)
			inner, err := d.ReadBinary()
			if err != nil {
				return fmt.Errorf("batch data section %d: %w", len(msgs), err)
			}
			// Each event may carry its own partition key annotation
			// (the SDK repeats the batch's): it must be a valid string.
			loc, _, err := locateAnnotations(inner, true)
			if err != nil {
				return fmt.Errorf("batch event %d: %w", len(msgs), err)
			}
			msgs = append(msgs, inner)
			locs = append(locs, loc)
		}
		return nil
	})
	return msgs, locs, key, err
}

// locateAnnotations checks that msg is a sequence of message sections and
// returns where its message-annotations section is (or where one belongs)
// and, if wantKey, the partition key annotation.
func locateAnnotations(msg []byte, wantKey bool) ([2]int32, string, error) {
	var loc [2]int32
	var key string
	found := false
	pos := 0
	var prev uint64
	err := amqp.ForEachSection(msg, func(code uint64, section, value []byte) error {
		if !sectionFollows(prev, code) {
			return fmt.Errorf("message section %#x after section %#x: sections out of order or repeated", code, prev)
		}
		prev = code
		switch {
		case code == amqp.SectionMessageAnnotations:
			loc = [2]int32{int32(pos), int32(pos + len(section))}
			found = true
			if wantKey {
				k, _, err := annotationString(value, annotationPartitionKey)
				if err != nil {
					return fmt.Errorf("message-annotations: %w", err)
				}
				key = k
			}
		case !found && code < amqp.SectionMessageAnnotations:
			loc = [2]int32{int32(pos + len(section)), int32(pos + len(section))}
		}
		pos += len(section)
		return nil
	})
	return loc, key, err
}

// sectionFollows reports whether a message section with code may follow
// one with prev (0 at the start): sections come in the order of the AMQP
// specification (header, delivery-annotations, message-annotations,
// properties, application-properties, body, footer), each once, except that
// a body of data or amqp-sequence sections repeats that one kind.
func sectionFollows(prev, code uint64) bool {
	isBody := func(c uint64) bool { return c >= amqp.SectionData && c <= amqp.SectionValue }
	switch {
	case code == prev:
		return code == amqp.SectionData || code == amqp.SectionSequence
	case isBody(prev) && isBody(code):
		return false
	default:
		return code > prev
	}
}

// annotationString returns the string (or symbol) value of the annotation
// name in an encoded annotations map.
func annotationString(mapValue []byte, name string) (string, bool, error) {
	d := amqp.NewDecoder(mapValue)
	body, n, err := d.ReadMapHeader()
	if err != nil {
		return "", false, err
	}
	for range n {
		k, err := body.Raw()
		if err != nil {
			return "", false, err
		}
		kd := amqp.NewDecoder(k)
		kb, kerr := kd.ReadStringBytes()
		if kerr != nil || string(kb) != name {
			if err := body.Skip(); err != nil {
				return "", false, err
			}
			continue
		}
		v, err := body.Value()
		if err != nil {
			return "", false, err
		}
		switch v := v.(type) {
		case string:
			// AMQP strings are UTF-8; the service cannot hash or return
			// a key that is not.
			if !utf8.ValidString(v) {
				return "", false, fmt.Errorf("%s is not valid UTF-8", name)
			}
			return v, true, nil
		case amqp.Symbol:
			// AMQP symbols are ASCII (AMQP 1.0 part 1, 1.6.20); the key
			// is delivered as a string, which must be valid.
			for i := 0; i < len(v); i++ {
				if v[i] >= utf8.RuneSelf {
					return "", false, fmt.Errorf("%s is a symbol with a byte outside ASCII at %d", name, i)
				}
			}
			return string(v), true, nil
		case nil:
			return "", false, nil
		}
		return "", false, fmt.Errorf("%s has type %T, want a string", name, v)
	}
	return "", false, nil
}

// appendCapped appends p to buf, growing buf geometrically but never beyond
// limit bytes of capacity unless the data needs it.
func appendCapped(buf, p []byte, limit int) []byte {
	need := len(buf) + len(p)
	if need > cap(buf) {
		c := max(2*cap(buf), need)
		if c > limit {
			c = max(limit, need)
		}
		nb := make([]byte, len(buf), c)
		copy(nb, buf)
		buf = nb
	}
	return append(buf, p...)
}
