// Package amqp is the AMQP 1.0 framing and type codec used by the Event Hubs
// emulator. It follows the OASIS AMQP 1.0 specification (types, transport,
// messaging and security parts).
//
// Encoding is append-style: every Append* function appends one encoded value to
// a byte slice and returns the extended slice, so callers can reuse buffers and
// avoid allocations. Decoding goes through a [Decoder], which consumes values
// from a byte slice, accepts every encoding the specification allows for a type
// and never allocates more than the input's length justifies.
package amqp

import (
	"bytes"
	"encoding/hex"
	"time"
)

// Type codes of the AMQP 1.0 primitive encodings (types §1.6).
const (
	codeDescribed  = 0x00
	codeNull       = 0x40
	codeTrue       = 0x41
	codeFalse      = 0x42
	codeUint0      = 0x43
	codeUlong0     = 0x44
	codeList0      = 0x45
	codeUbyte      = 0x50
	codeByte       = 0x51
	codeSmallUint  = 0x52
	codeSmallUlong = 0x53
	codeSmallInt   = 0x54
	codeSmallLong  = 0x55
	codeBool       = 0x56
	codeUshort     = 0x60
	codeShort      = 0x61
	codeUint       = 0x70
	codeInt        = 0x71
	codeFloat      = 0x72
	codeChar       = 0x73
	codeDecimal32  = 0x74
	codeUlong      = 0x80
	codeLong       = 0x81
	codeDouble     = 0x82
	codeTimestamp  = 0x83
	codeDecimal64  = 0x84
	codeDecimal128 = 0x94
	codeUUID       = 0x98
	codeVbin8      = 0xa0
	codeStr8       = 0xa1
	codeSym8       = 0xa3
	codeVbin32     = 0xb0
	codeStr32      = 0xb1
	codeSym32      = 0xb3
	codeList8      = 0xc0
	codeMap8       = 0xc1
	codeList32     = 0xd0
	codeMap32      = 0xd1
	codeArray8     = 0xe0
	codeArray32    = 0xf0
)

// Symbol is an AMQP symbol: an ASCII string from a constrained domain.
type Symbol string

// UUID is an AMQP uuid (RFC 4122, 16 octets).
type UUID [16]byte

// String formats u in the canonical 8-4-4-4-12 hexadecimal form.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Char is an AMQP char: a single UTF-32 code point.
type Char rune

// Decimal32 is an AMQP decimal32, kept as its raw IEEE 754 octets.
type Decimal32 [4]byte

// Decimal64 is an AMQP decimal64, kept as its raw IEEE 754 octets.
type Decimal64 [8]byte

// Decimal128 is an AMQP decimal128, kept as its raw IEEE 754 octets.
type Decimal128 [16]byte

// Described is a described value whose descriptor the decoder does not know:
// Descriptor is a uint64 code or a Symbol.
type Described struct {
	Descriptor any
	Value      any
}

// MapEntry is one key/value pair of a [Map].
type MapEntry struct {
	Key   any
	Value any
}

// Map is an AMQP map in wire order. It is a slice because AMQP keys may be of
// types Go cannot use as map keys (binary) and because order matters when
// re-encoding.
type Map []MapEntry

// Get returns the value stored under key and whether the key is present.
// Binary keys are compared by content.
func (m Map) Get(key any) (any, bool) {
	for _, e := range m {
		if keysEqual(e.Key, key) {
			return e.Value, true
		}
	}
	return nil, false
}

// Array is an AMQP array: values that all share one encoding.
type Array []any

// Timestamp converts milliseconds since the Unix epoch into a UTC time.Time.
func Timestamp(ms int64) time.Time {
	return time.UnixMilli(ms).UTC()
}

func keysEqual(a, b any) bool {
	ab, aok := a.([]byte)
	bb, bok := b.([]byte)
	if aok || bok {
		return aok && bok && bytes.Equal(ab, bb)
	}
	switch a.(type) {
	case []any, Map, Array, Described:
		return false
	}
	switch b.(type) {
	case []any, Map, Array, Described:
		return false
	}
	return a == b
}
