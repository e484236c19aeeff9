package amqp

import (
	"encoding/binary"
	"fmt"
)

// FrameHeaderSize is the size of the fixed frame header (transport §2.3.1).
const FrameHeaderSize = 8

// MinMaxFrameSize is the smallest max-frame-size a peer may announce
// (MIN-MAX-FRAME-SIZE, transport §2.7.1).
const MinMaxFrameSize = 512

// Frame types.
const (
	FrameTypeAMQP uint8 = 0x00
	FrameTypeSASL uint8 = 0x01
)

// Protocol identifiers of the protocol header 'A' 'M' 'Q' 'P' id 1 0 0.
const (
	ProtocolAMQP uint8 = 0
	ProtocolTLS  uint8 = 2
	ProtocolSASL uint8 = 3
)

// ProtocolHeader returns the 8-byte protocol header for protocol id
// (version 1.0.0).
func ProtocolHeader(id uint8) [8]byte {
	return [8]byte{'A', 'M', 'Q', 'P', id, 1, 0, 0}
}

// ParseProtocolHeader returns the protocol id of an AMQP 1.0.0 protocol header.
func ParseProtocolHeader(h [8]byte) (uint8, error) {
	if h[0] != 'A' || h[1] != 'M' || h[2] != 'Q' || h[3] != 'P' {
		return 0, fmt.Errorf("%w: not an AMQP protocol header: % x", ErrMalformed, h)
	}
	if h[5] != 1 || h[6] != 0 || h[7] != 0 {
		return h[4], fmt.Errorf("%w: unsupported AMQP version %d.%d.%d", ErrMalformed, h[5], h[6], h[7])
	}
	return h[4], nil
}

// FrameHeader is the fixed part of a frame.
type FrameHeader struct {
	Size       uint32 // total frame size including the header
	DataOffset uint8  // offset of the body in 4-byte words, at least 2
	Type       uint8  // FrameTypeAMQP or FrameTypeSASL
	Channel    uint16 // the channel (AMQP frames)
}

// ParseFrameHeader decodes and checks a frame header against the largest frame
// size the receiver accepts.
func ParseFrameHeader(b []byte, maxFrameSize uint32) (FrameHeader, error) {
	if len(b) < FrameHeaderSize {
		return FrameHeader{}, fmt.Errorf("%w: frame header of %d bytes", ErrMalformed, len(b))
	}
	h := FrameHeader{
		Size:       binary.BigEndian.Uint32(b),
		DataOffset: b[4],
		Type:       b[5],
		Channel:    binary.BigEndian.Uint16(b[6:]),
	}
	switch {
	case h.Size < FrameHeaderSize:
		return h, fmt.Errorf("%w: frame size %d is below the header size", ErrMalformed, h.Size)
	case h.Size > maxFrameSize:
		return h, fmt.Errorf("%w: frame size %d exceeds the max-frame-size %d", ErrMalformed, h.Size, maxFrameSize)
	case h.DataOffset < 2:
		return h, fmt.Errorf("%w: data offset %d is below 2", ErrMalformed, h.DataOffset)
	case uint32(h.DataOffset)*4 > h.Size:
		return h, fmt.Errorf("%w: data offset %d beyond frame size %d", ErrMalformed, h.DataOffset, h.Size)
	case h.Type != FrameTypeAMQP && h.Type != FrameTypeSASL:
		return h, fmt.Errorf("%w: unknown frame type 0x%02x", ErrMalformed, h.Type)
	}
	return h, nil
}

// BodyOffset is the offset of the frame body from the start of the frame.
func (h FrameHeader) BodyOffset() int { return int(h.DataOffset) * 4 }

// Performative is a frame body that can be encoded.
type Performative interface {
	// Append appends the encoded performative (descriptor and field list).
	Append(b []byte) ([]byte, error)
}

// AppendFrame appends a complete frame with data offset 2: the header, the
// performative p (nil for an empty heartbeat frame) and payload.
func AppendFrame(b []byte, frameType uint8, channel uint16, p Performative, payload []byte) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 2, frameType, byte(channel>>8), byte(channel))
	if p != nil {
		var err error
		if b, err = p.Append(b); err != nil {
			return b[:start], err
		}
	}
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b, nil
}

// PerformativeCode returns the descriptor code of the performative that starts
// a frame body.
func PerformativeCode(body []byte) (uint64, error) {
	d := Decoder{b: body}
	code, sym, err := d.ReadDescriptor()
	if err != nil {
		return 0, err
	}
	if code == 0 {
		return 0, fmt.Errorf("%w: unknown descriptor %q", ErrMalformed, sym)
	}
	return code, nil
}

// Descriptor codes of the performatives and other composite types.
const (
	CodeOpen           = 0x10
	CodeBegin          = 0x11
	CodeAttach         = 0x12
	CodeFlow           = 0x13
	CodeTransfer       = 0x14
	CodeDisposition    = 0x15
	CodeDetach         = 0x16
	CodeEnd            = 0x17
	CodeClose          = 0x18
	CodeError          = 0x1d
	CodeReceived       = 0x23
	CodeAccepted       = 0x24
	CodeRejected       = 0x25
	CodeReleased       = 0x26
	CodeModified       = 0x27
	CodeSource         = 0x28
	CodeTarget         = 0x29
	CodeSASLMechanisms = 0x40
	CodeSASLInit       = 0x41
	CodeSASLChallenge  = 0x42
	CodeSASLResponse   = 0x43
	CodeSASLOutcome    = 0x44
)

// DecodeBody decodes any performative or SASL frame body into a freshly
// allocated value of the matching type and returns the transfer payload, if
// any. The connection's hot path decodes into reused values instead.
func DecodeBody(body []byte) (any, []byte, error) {
	code, err := PerformativeCode(body)
	if err != nil {
		return nil, nil, err
	}
	var v interface{ Unmarshal([]byte) error }
	switch code {
	case CodeOpen:
		v = new(Open)
	case CodeBegin:
		v = new(Begin)
	case CodeAttach:
		v = new(Attach)
	case CodeFlow:
		v = new(Flow)
	case CodeTransfer:
		t := new(Transfer)
		payload, err := t.UnmarshalPayload(body)
		return t, payload, err
	case CodeDisposition:
		v = new(Disposition)
	case CodeDetach:
		v = new(Detach)
	case CodeEnd:
		v = new(End)
	case CodeClose:
		v = new(Close)
	case CodeSASLMechanisms:
		v = new(SASLMechanisms)
	case CodeSASLInit:
		v = new(SASLInit)
	case CodeSASLOutcome:
		v = new(SASLOutcome)
	default:
		return nil, nil, fmt.Errorf("%w: unexpected frame body 0x%02x", ErrMalformed, code)
	}
	return v, nil, v.Unmarshal(body)
}
