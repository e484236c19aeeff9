package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// ErrMalformed is wrapped by every error that reports bytes that are not a
// valid AMQP encoding (truncated, unknown constructor, wrong type, too deep).
var ErrMalformed = errors.New("amqp: malformed encoding")

// MaxDepth bounds the nesting of described types, lists, maps and arrays the
// decoder follows, so hostile input cannot exhaust the stack.
const MaxDepth = 32

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// Decoder consumes AMQP-encoded values from a byte slice. Values that refer to
// bytes (binary, and the raw forms) alias the input; nothing is copied unless
// a method says so.
type Decoder struct {
	b     []byte
	depth int
}

// NewDecoder returns a decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Len returns the number of bytes not yet consumed.
func (d *Decoder) Len() int { return len(d.b) }

// Rest returns the bytes not yet consumed.
func (d *Decoder) Rest() []byte { return d.b }

// Next returns the constructor of the next value without consuming it.
func (d *Decoder) Next() (byte, error) {
	if len(d.b) == 0 {
		return 0, malformed("unexpected end of data")
	}
	return d.b[0], nil
}

// ReadNull consumes a null and reports whether the next value was null.
func (d *Decoder) ReadNull() bool {
	if len(d.b) > 0 && d.b[0] == codeNull {
		d.b = d.b[1:]
		return true
	}
	return false
}

func (d *Decoder) take(n int) ([]byte, error) {
	if n < 0 || n > len(d.b) {
		return nil, malformed("need %d bytes, have %d", n, len(d.b))
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p, nil
}

func (d *Decoder) code() (byte, error) {
	if len(d.b) == 0 {
		return 0, malformed("unexpected end of data")
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c, nil
}

// ValueLen returns the length in bytes of the complete encoded value at the
// start of b, checking lengths but not the contents of compound values.
func ValueLen(b []byte) (int, error) { return valueLen(b, 0) }

func valueLen(b []byte, depth int) (int, error) {
	if len(b) == 0 {
		return 0, malformed("unexpected end of data")
	}
	c := b[0]
	if c == codeDescribed {
		if depth >= MaxDepth {
			return 0, malformed("nesting deeper than %d", MaxDepth)
		}
		n1, err := valueLen(b[1:], depth+1)
		if err != nil {
			return 0, err
		}
		n2, err := valueLen(b[1+n1:], depth+1)
		if err != nil {
			return 0, err
		}
		return 1 + n1 + n2, nil
	}
	n, err := encodedLen(c, b[1:])
	if err != nil {
		return 0, err
	}
	if 1+n > len(b) {
		return 0, malformed("value of %d bytes, have %d", 1+n, len(b))
	}
	return 1 + n, nil
}

// encodedLen returns the number of bytes after the constructor c, given the
// bytes that follow it.
func encodedLen(c byte, rest []byte) (int, error) {
	switch c {
	case codeNull, codeTrue, codeFalse, codeUint0, codeUlong0, codeList0:
		return 0, nil
	case codeUbyte, codeByte, codeSmallUint, codeSmallUlong, codeSmallInt, codeSmallLong, codeBool:
		return 1, nil
	case codeUshort, codeShort:
		return 2, nil
	case codeUint, codeInt, codeFloat, codeChar, codeDecimal32:
		return 4, nil
	case codeUlong, codeLong, codeDouble, codeTimestamp, codeDecimal64:
		return 8, nil
	case codeDecimal128, codeUUID:
		return 16, nil
	case codeVbin8, codeStr8, codeSym8, codeList8, codeMap8, codeArray8:
		if len(rest) < 1 {
			return 0, malformed("missing size of 0x%02x", c)
		}
		return 1 + int(rest[0]), nil
	case codeVbin32, codeStr32, codeSym32, codeList32, codeMap32, codeArray32:
		if len(rest) < 4 {
			return 0, malformed("missing size of 0x%02x", c)
		}
		n := uint64(binary.BigEndian.Uint32(rest))
		if n > uint64(len(rest)-4) {
			return 0, malformed("size %d of 0x%02x exceeds the %d bytes left", n, c, len(rest)-4)
		}
		return 4 + int(n), nil
	}
	return 0, malformed("unknown constructor 0x%02x", c)
}

// Raw consumes the next complete value and returns its encoded bytes.
func (d *Decoder) Raw() ([]byte, error) {
	n, err := valueLen(d.b, d.depth)
	if err != nil {
		return nil, err
	}
	return d.take(n)
}

// Skip consumes the next complete value.
func (d *Decoder) Skip() error {
	_, err := d.Raw()
	return err
}

// ReadBool reads a boolean (0x41, 0x42 or 0x56).
func (d *Decoder) ReadBool() (bool, error) {
	c, err := d.code()
	if err != nil {
		return false, err
	}
	switch c {
	case codeTrue:
		return true, nil
	case codeFalse:
		return false, nil
	case codeBool:
		p, err := d.take(1)
		if err != nil {
			return false, err
		}
		switch p[0] {
		case 0:
			return false, nil
		case 1:
			return true, nil
		}
		return false, malformed("boolean octet 0x%02x", p[0])
	}
	return false, malformed("constructor 0x%02x is not a boolean", c)
}

// ReadUbyte reads a ubyte (0x50).
func (d *Decoder) ReadUbyte() (uint8, error) {
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	if c != codeUbyte {
		return 0, malformed("constructor 0x%02x is not a ubyte", c)
	}
	p, err := d.take(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// ReadUshort reads a ushort (0x60).
func (d *Decoder) ReadUshort() (uint16, error) {
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	if c != codeUshort {
		return 0, malformed("constructor 0x%02x is not a ushort", c)
	}
	p, err := d.take(2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(p), nil
}

// ReadUint reads a uint in any of its encodings (0x43, 0x52, 0x70).
func (d *Decoder) ReadUint() (uint32, error) {
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	switch c {
	case codeUint0:
		return 0, nil
	case codeSmallUint:
		p, err := d.take(1)
		if err != nil {
			return 0, err
		}
		return uint32(p[0]), nil
	case codeUint:
		p, err := d.take(4)
		if err != nil {
			return 0, err
		}
		return binary.BigEndian.Uint32(p), nil
	}
	return 0, malformed("constructor 0x%02x is not a uint", c)
}

// ReadUlong reads a ulong in any of its encodings (0x44, 0x53, 0x80).
func (d *Decoder) ReadUlong() (uint64, error) {
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	switch c {
	case codeUlong0:
		return 0, nil
	case codeSmallUlong:
		p, err := d.take(1)
		if err != nil {
			return 0, err
		}
		return uint64(p[0]), nil
	case codeUlong:
		p, err := d.take(8)
		if err != nil {
			return 0, err
		}
		return binary.BigEndian.Uint64(p), nil
	}
	return 0, malformed("constructor 0x%02x is not a ulong", c)
}

// ReadInteger reads any signed or unsigned integer encoding and returns it as
// an int64; ulong values above math.MaxInt64 are an error.
func (d *Decoder) ReadInteger() (int64, error) {
	c, err := d.Next()
	if err != nil {
		return 0, err
	}
	switch c {
	case codeUint0, codeSmallUint, codeUint:
		v, err := d.ReadUint()
		return int64(v), err
	case codeUlong0, codeSmallUlong, codeUlong:
		v, err := d.ReadUlong()
		if err == nil && v > math.MaxInt64 {
			return 0, malformed("ulong %d overflows int64", v)
		}
		return int64(v), err
	case codeUbyte:
		v, err := d.ReadUbyte()
		return int64(v), err
	case codeUshort:
		v, err := d.ReadUshort()
		return int64(v), err
	}
	d.b = d.b[1:]
	switch c {
	case codeByte, codeSmallInt, codeSmallLong:
		p, err := d.take(1)
		if err != nil {
			return 0, err
		}
		return int64(int8(p[0])), nil
	case codeShort:
		p, err := d.take(2)
		if err != nil {
			return 0, err
		}
		return int64(int16(binary.BigEndian.Uint16(p))), nil
	case codeInt:
		p, err := d.take(4)
		if err != nil {
			return 0, err
		}
		return int64(int32(binary.BigEndian.Uint32(p))), nil
	case codeLong:
		p, err := d.take(8)
		if err != nil {
			return 0, err
		}
		return int64(binary.BigEndian.Uint64(p)), nil
	}
	return 0, malformed("constructor 0x%02x is not an integer", c)
}

// ReadTimestamp reads a timestamp (0x83) as milliseconds since the Unix epoch.
func (d *Decoder) ReadTimestamp() (int64, error) {
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	if c != codeTimestamp {
		return 0, malformed("constructor 0x%02x is not a timestamp", c)
	}
	p, err := d.take(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(p)), nil
}

// ReadBinary reads binary data (0xa0, 0xb0). The result aliases the input.
func (d *Decoder) ReadBinary() ([]byte, error) {
	c, err := d.code()
	if err != nil {
		return nil, err
	}
	switch c {
	case codeVbin8, codeVbin32:
		return d.variable(c)
	}
	return nil, malformed("constructor 0x%02x is not binary", c)
}

// ReadStringBytes reads a string or a symbol (0xa1, 0xb1, 0xa3, 0xb3) and
// returns its bytes, aliasing the input.
func (d *Decoder) ReadStringBytes() ([]byte, error) {
	c, err := d.code()
	if err != nil {
		return nil, err
	}
	switch c {
	case codeStr8, codeStr32, codeSym8, codeSym32:
		return d.variable(c)
	}
	return nil, malformed("constructor 0x%02x is not a string or symbol", c)
}

// ReadString reads a string or a symbol (0xa1, 0xb1, 0xa3, 0xb3).
func (d *Decoder) ReadString() (string, error) {
	p, err := d.ReadStringBytes()
	return string(p), err
}

func (d *Decoder) variable(c byte) ([]byte, error) {
	var n int
	if c&0xf0 == 0xa0 {
		p, err := d.take(1)
		if err != nil {
			return nil, err
		}
		n = int(p[0])
	} else {
		p, err := d.take(4)
		if err != nil {
			return nil, err
		}
		u := binary.BigEndian.Uint32(p)
		if uint64(u) > uint64(len(d.b)) {
			return nil, malformed("length %d exceeds the %d bytes left", u, len(d.b))
		}
		n = int(u)
	}
	return d.take(n)
}

// ReadSymbols reads a multiple-symbol field: a single symbol or an array of
// symbols (null gives nil).
func (d *Decoder) ReadSymbols() ([]Symbol, error) {
	if d.ReadNull() {
		return nil, nil
	}
	c, err := d.Next()
	if err != nil {
		return nil, err
	}
	if c == codeArray8 || c == codeArray32 {
		v, err := d.Value()
		if err != nil {
			return nil, err
		}
		arr := v.(Array)
		out := make([]Symbol, 0, len(arr))
		for _, x := range arr {
			s, ok := x.(Symbol)
			if !ok {
				return nil, malformed("array element %T is not a symbol", x)
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := d.ReadString()
	if err != nil {
		return nil, err
	}
	return []Symbol{Symbol(s)}, nil
}

// compound reads the header of a list or map (constructor, size, count) and
// returns a decoder over its elements and the element count.
func (d *Decoder) compound(list bool) (Decoder, int, error) {
	c, err := d.code()
	if err != nil {
		return Decoder{}, 0, err
	}
	var size, count int
	switch {
	case list && c == codeList0:
		return Decoder{depth: d.depth + 1}, 0, nil
	case (list && c == codeList8) || (!list && c == codeMap8):
		p, err := d.take(2)
		if err != nil {
			return Decoder{}, 0, err
		}
		size, count = int(p[0]), int(p[1])
		if size < 1 {
			return Decoder{}, 0, malformed("compound size %d", size)
		}
		size--
	case (list && c == codeList32) || (!list && c == codeMap32):
		p, err := d.take(8)
		if err != nil {
			return Decoder{}, 0, err
		}
		s, n := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		if s < 4 || uint64(s-4) > uint64(len(d.b)) || uint64(n) > uint64(s) {
			return Decoder{}, 0, malformed("compound size %d count %d with %d bytes left", s, n, len(d.b))
		}
		size, count = int(s-4), int(n)
	default:
		if list {
			return Decoder{}, 0, malformed("constructor 0x%02x is not a list", c)
		}
		return Decoder{}, 0, malformed("constructor 0x%02x is not a map", c)
	}
	body, err := d.take(size)
	if err != nil {
		return Decoder{}, 0, err
	}
	if count > size {
		return Decoder{}, 0, malformed("%d elements in %d bytes", count, size)
	}
	if !list && count%2 != 0 {
		return Decoder{}, 0, malformed("map with an odd element count %d", count)
	}
	if d.depth+1 > MaxDepth {
		return Decoder{}, 0, malformed("nesting deeper than %d", MaxDepth)
	}
	return Decoder{b: body, depth: d.depth + 1}, count, nil
}

// ReadList reads a list header and returns a decoder over its items and the
// item count.
func (d *Decoder) ReadList() (Decoder, int, error) { return d.compound(true) }

// ReadMapHeader reads a map header and returns a decoder over its keys and
// values (alternating) and the number of key/value pairs.
func (d *Decoder) ReadMapHeader() (Decoder, int, error) {
	body, n, err := d.compound(false)
	return body, n / 2, err
}

// ReadMap reads a map into a [Map].
func (d *Decoder) ReadMap() (Map, error) {
	body, n, err := d.ReadMapHeader()
	if err != nil {
		return nil, err
	}
	m := make(Map, 0, n)
	for range n {
		k, err := body.Value()
		if err != nil {
			return nil, err
		}
		v, err := body.Value()
		if err != nil {
			return nil, err
		}
		m = append(m, MapEntry{Key: k, Value: v})
	}
	return m, nil
}

// ReadDescriptor reads the constructor 0x00 and the descriptor of a described
// value. Symbolic descriptors of the standard AMQP types are translated to
// their numeric codes; other symbolic descriptors are returned as sym with
// code 0.
func (d *Decoder) ReadDescriptor() (code uint64, sym Symbol, err error) {
	c, err := d.code()
	if err != nil {
		return 0, "", err
	}
	if c != codeDescribed {
		return 0, "", malformed("constructor 0x%02x is not a described type", c)
	}
	c, err = d.Next()
	if err != nil {
		return 0, "", err
	}
	switch c {
	case codeUlong0, codeSmallUlong, codeUlong:
		code, err = d.ReadUlong()
		return code, "", err
	case codeSym8, codeSym32:
		s, err := d.ReadString()
		if err != nil {
			return 0, "", err
		}
		return descriptorCodes[s], Symbol(s), nil
	}
	return 0, "", malformed("descriptor constructor 0x%02x", c)
}

// descriptorCodes maps the symbolic descriptors of the standard types to
// their numeric codes.
var descriptorCodes = map[string]uint64{
	"amqp:open:list": 0x10, "amqp:begin:list": 0x11, "amqp:attach:list": 0x12,
	"amqp:flow:list": 0x13, "amqp:transfer:list": 0x14, "amqp:disposition:list": 0x15,
	"amqp:detach:list": 0x16, "amqp:end:list": 0x17, "amqp:close:list": 0x18,
	"amqp:error:list": 0x1d, "amqp:received:list": 0x23, "amqp:accepted:list": 0x24,
	"amqp:rejected:list": 0x25, "amqp:released:list": 0x26, "amqp:modified:list": 0x27,
	"amqp:source:list": 0x28, "amqp:target:list": 0x29,
	"amqp:delete-on-close:list": 0x2b, "amqp:delete-on-no-links:list": 0x2c,
	"amqp:delete-on-no-messages:list": 0x2d, "amqp:delete-on-no-links-or-messages:list": 0x2e,
	"amqp:sasl-mechanisms:list": 0x40, "amqp:sasl-init:list": 0x41, "amqp:sasl-challenge:list": 0x42,
	"amqp:sasl-response:list": 0x43, "amqp:sasl-outcome:list": 0x44,
	"amqp:header:list": 0x70, "amqp:delivery-annotations:map": 0x71, "amqp:message-annotations:map": 0x72,
	"amqp:properties:list": 0x73, "amqp:application-properties:map": 0x74, "amqp:data:binary": 0x75,
	"amqp:amqp-sequence:list": 0x76, "amqp:amqp-value:*": 0x77, "amqp:footer:map": 0x78,
	"apache.org:selector-filter:string": SelectorFilterCode,
}

// SelectorFilterCode is the descriptor code of apache.org:selector-filter:string.
const SelectorFilterCode = 0x0000468C00000004

// Value reads the next value into its Go representation: nil, bool, uint8,
// uint16, uint32, uint64, int8, int16, int32, int64, float32, float64, [Char],
// time.Time (timestamp, UTC), [UUID], []byte (aliasing the input), string,
// [Symbol], []any (list), [Map], [Array], [Described] or a decimal type.
func (d *Decoder) Value() (any, error) {
	c, err := d.Next()
	if err != nil {
		return nil, err
	}
	switch c {
	case codeDescribed:
		if d.depth+1 > MaxDepth {
			return nil, malformed("nesting deeper than %d", MaxDepth)
		}
		d.b = d.b[1:]
		d.depth++
		defer func() { d.depth-- }()
		desc, err := d.Value()
		if err != nil {
			return nil, err
		}
		v, err := d.Value()
		if err != nil {
			return nil, err
		}
		return Described{Descriptor: desc, Value: v}, nil
	case codeNull:
		d.b = d.b[1:]
		return nil, nil
	case codeTrue, codeFalse, codeBool:
		return d.ReadBool()
	case codeUbyte:
		return d.ReadUbyte()
	case codeUshort:
		return d.ReadUshort()
	case codeUint0, codeSmallUint, codeUint:
		return d.ReadUint()
	case codeUlong0, codeSmallUlong, codeUlong:
		return d.ReadUlong()
	case codeByte:
		v, err := d.ReadInteger()
		return int8(v), err
	case codeShort:
		v, err := d.ReadInteger()
		return int16(v), err
	case codeSmallInt, codeInt:
		v, err := d.ReadInteger()
		return int32(v), err
	case codeSmallLong, codeLong:
		return d.ReadInteger()
	case codeTimestamp:
		ms, err := d.ReadTimestamp()
		return Timestamp(ms), err
	case codeVbin8, codeVbin32:
		return d.ReadBinary()
	case codeStr8, codeStr32:
		p, err := d.ReadStringBytes()
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(p) {
			return nil, malformed("string is not valid UTF-8")
		}
		return string(p), nil
	case codeSym8, codeSym32:
		s, err := d.ReadString()
		return Symbol(s), err
	case codeList0, codeList8, codeList32:
		body, n, err := d.ReadList()
		if err != nil {
			return nil, err
		}
		l := make([]any, 0, n)
		for range n {
			v, err := body.Value()
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case codeMap8, codeMap32:
		return d.ReadMap()
	case codeArray8, codeArray32:
		return d.readArray()
	}
	d.b = d.b[1:]
	n, err := encodedLen(c, d.b)
	if err != nil {
		return nil, err
	}
	p, err := d.take(n)
	if err != nil {
		return nil, err
	}
	switch c {
	case codeFloat:
		return math.Float32frombits(binary.BigEndian.Uint32(p)), nil
	case codeDouble:
		return math.Float64frombits(binary.BigEndian.Uint64(p)), nil
	case codeChar:
		return Char(binary.BigEndian.Uint32(p)), nil
	case codeUUID:
		return UUID(p), nil
	case codeDecimal32:
		return Decimal32(p), nil
	case codeDecimal64:
		return Decimal64(p), nil
	case codeDecimal128:
		return Decimal128(p), nil
	}
	return nil, malformed("unknown constructor 0x%02x", c)
}

func (d *Decoder) readArray() (Array, error) {
	c, _ := d.code()
	var size, count int
	if c == codeArray8 {
		p, err := d.take(2)
		if err != nil {
			return nil, err
		}
		size, count = int(p[0])-1, int(p[1])
	} else {
		p, err := d.take(8)
		if err != nil {
			return nil, err
		}
		s, n := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		if s < 4 || uint64(s-4) > uint64(len(d.b)) || uint64(n) > uint64(s) {
			return nil, malformed("array size %d count %d with %d bytes left", s, n, len(d.b))
		}
		size, count = int(s-4), int(n)
	}
	body, err := d.take(size)
	if err != nil {
		return nil, err
	}
	if d.depth+1 > MaxDepth {
		return nil, malformed("nesting deeper than %d", MaxDepth)
	}
	// An element constructor without data (null, true, uint0, ...) would let a
	// 4-octet count ask for billions of elements: cap it by the array's size.
	if count > size {
		return nil, malformed("%d array elements in %d bytes", count, size)
	}
	if count == 0 {
		return Array{}, nil
	}
	ed := Decoder{b: body, depth: d.depth + 1}
	// The element constructor, possibly a described one.
	var descriptor []byte
	if len(ed.b) > 0 && ed.b[0] == codeDescribed {
		ed.b = ed.b[1:]
		if descriptor, err = ed.Raw(); err != nil {
			return nil, err
		}
	}
	ctor, err := ed.code()
	if err != nil {
		return nil, err
	}
	if ctor == codeDescribed {
		return nil, malformed("nested described array constructor")
	}
	out := make(Array, 0, count)
	elem := make([]byte, 0, 16)
	for range count {
		n, err := encodedLen(ctor, ed.b)
		if err != nil {
			return nil, err
		}
		p, err := ed.take(n)
		if err != nil {
			return nil, err
		}
		// Decode the element by rebuilding "constructor + data". The element
		// bytes are copied so that the result does not alias elem.
		elem = append(append(elem[:0], ctor), p...)
		sub := Decoder{b: append([]byte(nil), elem...), depth: d.depth + 1}
		v, err := sub.Value()
		if err != nil {
			return nil, err
		}
		if descriptor != nil {
			dd := Decoder{b: descriptor, depth: d.depth + 1}
			dv, err := dd.Value()
			if err != nil {
				return nil, err
			}
			v = Described{Descriptor: dv, Value: v}
		}
		out = append(out, v)
	}
	return out, nil
}
