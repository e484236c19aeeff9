package amqp

import (
	"fmt"
	"time"
)

// Message format codes.
const (
	// MessageFormatAMQP is the standard AMQP message format.
	MessageFormatAMQP uint32 = 0
	// MessageFormatBatch is Microsoft's batched format (0x800137, version 0):
	// every data section holds one complete encoded message.
	MessageFormatBatch uint32 = 0x80013700
)

// Descriptor codes of the message sections (messaging §3.2).
const (
	SectionHeader                = 0x70
	SectionDeliveryAnnotations   = 0x71
	SectionMessageAnnotations    = 0x72
	SectionProperties            = 0x73
	SectionApplicationProperties = 0x74
	SectionData                  = 0x75
	SectionSequence              = 0x76
	SectionValue                 = 0x77
	SectionFooter                = 0x78
)

// ForEachSection calls fn for every section of the encoded message msg, in
// order, with the section's descriptor code, the complete encoded section and
// the encoded value that follows the descriptor. It does not allocate.
func ForEachSection(msg []byte, fn func(code uint64, section, value []byte) error) error {
	for len(msg) > 0 {
		d := Decoder{b: msg}
		code, sym, err := d.ReadDescriptor()
		if err != nil {
			return fmt.Errorf("message section at byte %d: %w", len(msg), err)
		}
		if code < SectionHeader || code > SectionFooter {
			return fmt.Errorf("%w: unknown message section 0x%x %q", ErrMalformed, code, sym)
		}
		value, err := d.Raw()
		if err != nil {
			return fmt.Errorf("message section 0x%x: %w", code, err)
		}
		n := len(msg) - len(d.b)
		if err := fn(code, msg[:n:n], value); err != nil {
			return err
		}
		msg = d.b
	}
	return nil
}

// Header is the header section (messaging §3.2.1).
type Header struct {
	Durable       bool
	Priority      uint8 // default 4
	TTL           uint32
	FirstAcquirer bool
	DeliveryCount uint32
}

// Properties is the properties section (messaging §3.2.4). Zero values are
// absent fields.
type Properties struct {
	MessageID          any // string, uint64, UUID or []byte
	UserID             []byte
	To                 string
	Subject            string
	ReplyTo            string
	CorrelationID      any // string, uint64, UUID or []byte
	ContentType        Symbol
	ContentEncoding    Symbol
	AbsoluteExpiryTime time.Time
	CreationTime       time.Time
	GroupID            string
	GroupSequence      *uint32
	ReplyToGroupID     string
}

// Message is a decoded AMQP message. Binary data in a decoded message aliases
// the bytes it was decoded from.
type Message struct {
	Header                *Header
	DeliveryAnnotations   Map
	MessageAnnotations    Map
	Properties            *Properties
	ApplicationProperties Map
	Data                  [][]byte
	Sequence              [][]any
	Value                 any
	HasValue              bool
	Footer                Map
}

// Unmarshal decodes an encoded message.
func (m *Message) Unmarshal(b []byte) error {
	*m = Message{}
	return ForEachSection(b, func(code uint64, _, value []byte) error {
		d := Decoder{b: value}
		var err error
		switch code {
		case SectionHeader:
			m.Header, err = decodeHeader(&d)
		case SectionDeliveryAnnotations:
			m.DeliveryAnnotations, err = d.ReadMap()
		case SectionMessageAnnotations:
			m.MessageAnnotations, err = d.ReadMap()
		case SectionProperties:
			m.Properties, err = decodeProperties(&d)
		case SectionApplicationProperties:
			m.ApplicationProperties, err = d.ReadMap()
		case SectionData:
			var p []byte
			if p, err = d.ReadBinary(); err == nil {
				m.Data = append(m.Data, p)
			}
		case SectionSequence:
			var v any
			if v, err = d.Value(); err == nil {
				l, ok := v.([]any)
				if !ok {
					return fmt.Errorf("%w: amqp-sequence section holds %T", ErrMalformed, v)
				}
				m.Sequence = append(m.Sequence, l)
			}
		case SectionValue:
			m.Value, err = d.Value()
			m.HasValue = true
		case SectionFooter:
			m.Footer, err = d.ReadMap()
		}
		if err != nil {
			return fmt.Errorf("message section 0x%x: %w", code, err)
		}
		return nil
	})
}

func decodeHeader(d *Decoder) (*Header, error) {
	body, n, err := d.ReadList()
	if err != nil {
		return nil, err
	}
	f := fields{d: body, n: n, name: "header"}
	h := &Header{Priority: 4}
	f.bool(&h.Durable, "durable")
	f.ubyte(&h.Priority, "priority")
	f.uint(&h.TTL, "ttl")
	f.bool(&h.FirstAcquirer, "first-acquirer")
	f.uint(&h.DeliveryCount, "delivery-count")
	return h, f.err
}

func decodeProperties(d *Decoder) (*Properties, error) {
	body, n, err := d.ReadList()
	if err != nil {
		return nil, err
	}
	f := fields{d: body, n: n, name: "properties"}
	p := &Properties{}
	f.value(&p.MessageID, "message-id")
	f.binary(&p.UserID, "user-id")
	f.addr(&p.To, "to")
	f.string(&p.Subject, "subject")
	f.addr(&p.ReplyTo, "reply-to")
	f.value(&p.CorrelationID, "correlation-id")
	f.symbol(&p.ContentType, "content-type")
	f.symbol(&p.ContentEncoding, "content-encoding")
	f.time(&p.AbsoluteExpiryTime, "absolute-expiry-time")
	f.time(&p.CreationTime, "creation-time")
	f.string(&p.GroupID, "group-id")
	f.optUint(&p.GroupSequence, "group-sequence")
	f.string(&p.ReplyToGroupID, "reply-to-group-id")
	return p, f.err
}

func (f *fields) value(dst *any, field string) {
	if !f.present() {
		return
	}
	v, err := f.d.Value()
	*dst = v
	f.fail(field, err)
}

func (f *fields) addr(dst *string, field string) {
	var v any
	f.value(&v, field)
	switch v := v.(type) {
	case string:
		*dst = v
	case Symbol:
		*dst = string(v)
	}
}

func (f *fields) time(dst *time.Time, field string) {
	if !f.present() {
		return
	}
	ms, err := f.d.ReadTimestamp()
	if f.fail(field, err) {
		*dst = Timestamp(ms)
	}
}

// Append encodes m, sections in the order the specification requires.
func (m *Message) Append(b []byte) ([]byte, error) {
	var err error
	if h := m.Header; h != nil {
		l := beginFields(b, SectionHeader)
		l.flag(h.Durable)
		if h.Priority != 4 {
			l.ubyte(h.Priority)
		} else {
			l.null()
		}
		if h.TTL != 0 {
			l.uint(h.TTL)
		} else {
			l.null()
		}
		l.flag(h.FirstAcquirer)
		if h.DeliveryCount != 0 {
			l.uint(h.DeliveryCount)
		} else {
			l.null()
		}
		b = l.finish()
	}
	if m.DeliveryAnnotations != nil {
		if b, err = AppendMap(AppendDescriptor(b, SectionDeliveryAnnotations), m.DeliveryAnnotations); err != nil {
			return b, err
		}
	}
	if m.MessageAnnotations != nil {
		if b, err = AppendMap(AppendDescriptor(b, SectionMessageAnnotations), m.MessageAnnotations); err != nil {
			return b, err
		}
	}
	if p := m.Properties; p != nil {
		l := beginFields(b, SectionProperties)
		if err := l.optValue(p.MessageID); err != nil {
			return b, err
		}
		if p.UserID != nil {
			l.binary(p.UserID)
		} else {
			l.null()
		}
		l.optString(p.To)
		l.optString(p.Subject)
		l.optString(p.ReplyTo)
		if err := l.optValue(p.CorrelationID); err != nil {
			return b, err
		}
		l.optSymbol(p.ContentType)
		l.optSymbol(p.ContentEncoding)
		l.optTime(p.AbsoluteExpiryTime)
		l.optTime(p.CreationTime)
		l.optString(p.GroupID)
		l.optUint(p.GroupSequence)
		l.optString(p.ReplyToGroupID)
		b = l.finish()
	}
	if m.ApplicationProperties != nil {
		if b, err = AppendMap(AppendDescriptor(b, SectionApplicationProperties), m.ApplicationProperties); err != nil {
			return b, err
		}
	}
	for _, p := range m.Data {
		b = AppendBinary(AppendDescriptor(b, SectionData), p)
	}
	for _, s := range m.Sequence {
		if b, err = AppendList(AppendDescriptor(b, SectionSequence), s); err != nil {
			return b, err
		}
	}
	if m.HasValue {
		if b, err = AppendValue(AppendDescriptor(b, SectionValue), m.Value); err != nil {
			return b, err
		}
	}
	if m.Footer != nil {
		if b, err = AppendMap(AppendDescriptor(b, SectionFooter), m.Footer); err != nil {
			return b, err
		}
	}
	return b, nil
}

func (f *fieldList) optValue(v any) error {
	if v == nil {
		f.null()
		return nil
	}
	var err error
	if f.buf, err = AppendValue(f.buf, v); err != nil {
		return err
	}
	f.done()
	return nil
}

func (f *fieldList) optTime(t time.Time) {
	if t.IsZero() {
		f.null()
		return
	}
	f.timestamp(t.UnixMilli())
}
