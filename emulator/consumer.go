package emulator

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// Broker annotations added to every delivered event (message-annotations,
// symbol keys).
const (
	annotationSequenceNumber = "x-opt-sequence-number"
	annotationOffset         = "x-opt-offset"
	annotationEnqueuedTime   = "x-opt-enqueued-time"
	annotationPartitionKey   = "x-opt-partition-key"
)

// capabilityRuntimeMetric is the consumer link capability that asks for the
// partition's last enqueued event in every delivery's delivery-annotations.
const capabilityRuntimeMetric amqp.Symbol = "com.microsoft:enable-receiver-runtime-metric"

// selectorRE matches the selector filter expressions the SDK sends (contract
// §5.2).
var selectorRE = regexp.MustCompile(`(?i)^\s*amqp\.annotation\.(x-opt-offset|x-opt-sequence-number|x-opt-enqueued-time)\s*(>=|>)\s*'([^']*)'\s*$`)

// startFromFilter reads the start position from a consumer link's source
// filter set. Without a selector the consumer starts at the earliest event.
func startFromFilter(filter amqp.Map) (startPosition, error) {
	for _, e := range filter {
		d, ok := e.Value.(amqp.Described)
		if !ok {
			continue
		}
		switch desc := d.Descriptor.(type) {
		case uint64:
			if desc != amqp.SelectorFilterCode {
				continue
			}
		case amqp.Symbol:
			if desc != "apache.org:selector-filter:string" {
				continue
			}
		default:
			continue
		}
		expr, ok := d.Value.(string)
		if !ok {
			return startPosition{}, fmt.Errorf("selector filter holds %T, want a string", d.Value)
		}
		return parseSelector(expr)
	}
	return startPosition{field: "offset", value: -1}, nil
}

func parseSelector(expr string) (startPosition, error) {
	m := selectorRE.FindStringSubmatch(expr)
	if m == nil {
		return startPosition{}, fmt.Errorf("unsupported selector filter %q", expr)
	}
	sp := startPosition{field: strings.TrimPrefix(strings.ToLower(m[1]), "x-opt-"), inclusive: m[2] == ">="}
	if sp.field == "offset" && m[3] == "@latest" {
		sp.latest = true
		return sp, nil
	}
	v, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return startPosition{}, fmt.Errorf("selector filter %q: %q is not a 64-bit integer", expr, m[3])
	}
	sp.value = v
	return sp, nil
}

// addReceiver registers a consumer link under the owner-level rules of the
// service: a receiver with an epoch takes the partition from receivers with a
// lower or equal epoch and from receivers without one (they are detached with
// amqp:link:stolen); it is refused while a higher epoch is attached, and a
// receiver without an epoch is refused while one with an epoch is attached.
func (p *partition) addReceiver(l *link) *amqp.Error {
	p.rmu.Lock()
	current := p.receivers[l.cg]
	for _, o := range current {
		if o.hasEpoch && (!l.hasEpoch || o.epoch > l.epoch) {
			p.rmu.Unlock()
			if !l.hasEpoch {
				return &amqp.Error{Condition: "amqp:link:stolen", Description: fmt.Sprintf(
					"At least one receiver for the endpoint is created with epoch of '%d', and so non-epoch receiver is not allowed. Either reconnect with a higher epoch, or make sure all epoch receivers are closed or disconnected.", o.epoch)}
			}
			return &amqp.Error{Condition: "amqp:link:stolen", Description: fmt.Sprintf(
				"Receiver '%s' with a higher epoch '%d' already exists. Receiver '%s' with epoch %d cannot be created. Make sure you are creating receiver with increasing epoch value to ensure connectivity, or ensure all old epoch receivers are closed or disconnected.",
				o.receiver, o.epoch, l.receiver, l.epoch)}
		}
	}
	var victims []*link
	if l.hasEpoch {
		victims = current
		p.receivers[l.cg] = []*link{l}
	} else {
		p.receivers[l.cg] = append(current, l)
	}
	p.rmu.Unlock()
	for _, v := range victims {
		desc := fmt.Sprintf("New receiver '%s' with higher epoch of '%d' is created hence current receiver '%s' is getting disconnected. If you are recreating the receiver, make sure a higher epoch is used.", l.receiver, l.epoch, v.receiver)
		if v.hasEpoch {
			desc = fmt.Sprintf("New receiver '%s' with higher epoch of '%d' is created hence current receiver '%s' with epoch '%d' is getting disconnected. If you are recreating the receiver, make sure a higher epoch is used.", l.receiver, l.epoch, v.receiver, v.epoch)
		}
		v.detach(&amqp.Error{Condition: "amqp:link:stolen", Description: desc})
	}
	return nil
}

func (p *partition) removeReceiver(l *link) {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	list := p.receivers[l.cg]
	if i := slices.Index(list, l); i >= 0 {
		p.receivers[l.cg] = slices.Delete(list, i, i+1)
	}
}

// consumerBatch is how many events the consumer goroutine takes from the
// partition at a time.
const consumerBatch = 64

// runConsumer delivers events while the client grants credit, waiting for
// new events (long poll) when it has read everything.
func (l *link) runConsumer() {
	defer l.s.c.wg.Done()
	s, srv := l.s, l.s.c.srv
	var recs []record
	var msg []byte
	for {
		s.mu.Lock()
		credit, drain, stopped := l.sndCredit, l.drain, l.detachSent
		s.mu.Unlock()
		if stopped {
			return
		}
		if credit == 0 {
			select {
			case <-l.creditCh:
			case <-l.done:
				return
			}
			continue
		}
		var wait <-chan struct{}
		recs, l.nextSeq, wait = l.part.read(l.nextSeq, min(int(credit), consumerBatch), recs[:0], srv.now())
		if len(recs) == 0 {
			if drain {
				l.finishDrain()
			}
			select {
			case <-wait:
			case <-l.creditCh:
			case <-l.done:
				return
			}
			continue
		}
		var metrics []byte
		if l.metrics {
			metrics = l.runtimeMetrics(srv.now())
		}
		for i := range recs {
			msg = appendDelivered(msg[:0], &recs[i], metrics)
			if err := l.sendTransfer(binary.BigEndian.AppendUint64(nil, uint64(recs[i].seq)), msg); err != nil {
				return
			}
		}
		clear(recs) // drop references to delivery buffers
		srv.stats.eventsDelivered.Add(int64(len(recs)))
		if s.c.flush() != nil {
			return
		}
	}
}

// finishDrain uses up the remaining credit when the client asked to drain
// and there is nothing to send (transport §2.6.7).
func (l *link) finishDrain() {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !l.drain || l.detachSent {
		return
	}
	l.sndDeliveryCount += l.sndCredit
	l.sndCredit = 0
	f := s.flowLocked(l)
	f.Drain = true
	if s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, f, nil) == nil {
		s.c.flush()
	}
}

// errLinkGone stops a sender whose link or session ended.
var errLinkGone = fmt.Errorf("link detached")

// sendTransfer sends one pre-settled delivery on l, split into frames that
// fit the client's max-frame-size and within the client's session window.
func (l *link) sendTransfer(tag, payload []byte) error {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return l.sendTransferLocked(tag, payload)
}

// transferOverhead bounds the bytes of a frame header plus an encoded
// transfer performative.
const transferOverhead = 96

// frameChunk is how many payload bytes a transfer frame carries.
func (s *session) frameChunk() int { return int(s.c.peerMaxFrame) - transferOverhead }

// framesFor is how many transfer frames a delivery of n bytes takes.
func (s *session) framesFor(n int) uint32 {
	return uint32(max(1, (n+s.frameChunk()-1)/s.frameChunk()))
}

func (l *link) sendTransferLocked(tag, payload []byte) error {
	s := l.s
	if l.detachSent || s.ended || l.sndCredit == 0 {
		return errLinkGone
	}
	l.sndCredit--
	l.sndDeliveryCount++
	t := amqp.Transfer{
		Handle:           l.handle,
		DeliveryID:       s.nextDeliveryID,
		HasDeliveryID:    true,
		DeliveryTag:      tag,
		MessageFormat:    amqp.MessageFormatAMQP,
		HasMessageFormat: true,
		Settled:          true,
	}
	s.nextDeliveryID++
	chunk := s.frameChunk()
	for first := true; first || len(payload) > 0; first = false {
		for s.remoteIncomingWindow == 0 {
			if l.detachSent || s.ended {
				return errLinkGone
			}
			// The client opens its window again once it has the
			// transfers it counted: put them on the wire before
			// waiting, or both ends wait (until a heartbeat flushes).
			if err := s.c.flush(); err != nil {
				return err
			}
			s.cond.Wait()
		}
		if l.detachSent || s.ended {
			return errLinkGone
		}
		n := min(len(payload), chunk)
		t.More = n < len(payload)
		if !first {
			t.HasDeliveryID, t.DeliveryTag, t.HasMessageFormat, t.Settled = false, nil, false, false
		}
		if err := s.c.writeFrame(amqp.FrameTypeAMQP, s.ch, &t, payload[:n]); err != nil {
			return err
		}
		payload = payload[n:]
		s.nextOutgoingID++
		s.remoteIncomingWindow--
	}
	return nil
}

// runtimeMetrics encodes the delivery-annotations section of receiver
// runtime metrics: the partition's last enqueued event and the time it was
// read. It is built once per batch of deliveries.
func (l *link) runtimeMetrics(now time.Time) []byte {
	seq, off, enq := l.part.runtimeInfo()
	b := amqp.AppendDescriptor(nil, amqp.SectionDeliveryAnnotations)
	b, err := amqp.AppendMap(b, amqp.Map{
		{Key: amqp.Symbol("last_enqueued_sequence_number"), Value: seq},
		{Key: amqp.Symbol("last_enqueued_offset"), Value: strconv.FormatInt(off, 10)},
		{Key: amqp.Symbol("last_enqueued_time_utc"), Value: amqp.Timestamp(enq)},
		{Key: amqp.Symbol("runtime_info_retrieval_time_utc"), Value: now},
	})
	if err != nil {
		return nil // unreachable: every value is encodable
	}
	return b
}

// appendDelivered appends the event as delivered to consumers: the stored
// message with the broker annotations merged into its message-annotations
// (any values the producer set for those keys are replaced) and, when
// metrics is not nil, that delivery-annotations section in place of any the
// producer sent.
func appendDelivered(dst []byte, r *record, metrics []byte) []byte {
	if metrics == nil {
		dst = append(dst, r.msg[:r.maStart]...)
	} else {
		hdrEnd, daEnd := 0, -1
		pos := 0
		amqp.ForEachSection(r.msg[:r.maStart], func(code uint64, section, _ []byte) error {
			pos += len(section)
			switch code {
			case amqp.SectionHeader:
				hdrEnd = pos
			case amqp.SectionDeliveryAnnotations:
				daEnd = pos
			}
			return nil
		})
		if daEnd < 0 {
			daEnd = hdrEnd
		}
		dst = append(dst, r.msg[:hdrEnd]...)
		dst = append(dst, metrics...)
		dst = append(dst, r.msg[daEnd:r.maStart]...)
	}
	dst = amqp.AppendDescriptor(dst, amqp.SectionMessageAnnotations)
	hdr := len(dst)
	dst = append(dst, 0xd1, 0, 0, 0, 0, 0, 0, 0, 0)
	pairs := 0
	if r.maEnd > r.maStart {
		d := amqp.NewDecoder(r.msg[r.maStart:r.maEnd])
		if _, _, err := d.ReadDescriptor(); err == nil {
			if body, n, err := d.ReadMapHeader(); err == nil {
				for range n {
					k, err := body.Raw()
					if err != nil {
						break
					}
					v, err := body.Raw()
					if err != nil {
						break
					}
					if isBrokerAnnotation(k, r.key != "") {
						continue
					}
					dst = append(append(dst, k...), v...)
					pairs++
				}
			}
		}
	}
	dst = amqp.AppendSymbol(dst, annotationSequenceNumber)
	dst = amqp.AppendLong(dst, r.seq)
	dst = amqp.AppendSymbol(dst, annotationOffset)
	var num [20]byte
	dst = amqp.AppendString(dst, string(strconv.AppendInt(num[:0], r.offset, 10)))
	dst = amqp.AppendSymbol(dst, annotationEnqueuedTime)
	dst = amqp.AppendTimestampMillis(dst, r.enqueued)
	pairs += 3
	if r.key != "" {
		dst = amqp.AppendSymbol(dst, annotationPartitionKey)
		dst = amqp.AppendString(dst, r.key)
		pairs++
	}
	binary.BigEndian.PutUint32(dst[hdr+1:], uint32(len(dst)-hdr-5))
	binary.BigEndian.PutUint32(dst[hdr+5:], uint32(2*pairs))
	return append(dst, r.msg[r.maEnd:]...)
}

// isBrokerAnnotation reports whether the encoded key is one the emulator
// sets itself.
func isBrokerAnnotation(key []byte, withPartitionKey bool) bool {
	d := amqp.NewDecoder(key)
	k, err := d.ReadStringBytes()
	if err != nil {
		return false
	}
	switch string(k) {
	case annotationSequenceNumber, annotationOffset, annotationEnqueuedTime:
		return true
	case annotationPartitionKey:
		return withPartitionKey
	}
	return false
}

// sendReply queues an RPC response on a reply link and sends what credit
// allows.
func (l *link) sendReply(msg []byte) {
	s := l.s
	s.mu.Lock()
	l.pending = append(l.pending, msg)
	l.sendPendingLocked()
	s.mu.Unlock()
}

// sendPendingLocked sends the queued replies that credit and the client's
// session window allow. It runs on the connection's reader goroutine, which
// must never wait for window (only it reads the flow that would open it): a
// reply waits in pending, and the session's next flow sends it.
func (l *link) sendPendingLocked() {
	for len(l.pending) > 0 && l.sndCredit > 0 && !l.detachSent && l.s.remoteIncomingWindow >= l.s.framesFor(len(l.pending[0])) {
		tag := binary.BigEndian.AppendUint32(nil, l.sndDeliveryCount)
		if l.sendTransferLocked(tag, l.pending[0]) != nil {
			return
		}
		l.pending[0] = nil
		l.pending = l.pending[1:]
	}
}
