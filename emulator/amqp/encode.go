package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// AppendNull appends the null value.
func AppendNull(b []byte) []byte { return append(b, codeNull) }

// AppendBool appends a boolean in its one-octet form (0x41 true, 0x42 false).
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, codeTrue)
	}
	return append(b, codeFalse)
}

// AppendUbyte appends a ubyte (0x50).
func AppendUbyte(b []byte, v uint8) []byte { return append(b, codeUbyte, v) }

// AppendUshort appends a ushort (0x60).
func AppendUshort(b []byte, v uint16) []byte {
	return binary.BigEndian.AppendUint16(append(b, codeUshort), v)
}

// AppendUint appends a uint in its smallest form (0x43, 0x52 or 0x70).
func AppendUint(b []byte, v uint32) []byte {
	switch {
	case v == 0:
		return append(b, codeUint0)
	case v <= math.MaxUint8:
		return append(b, codeSmallUint, byte(v))
	}
	return binary.BigEndian.AppendUint32(append(b, codeUint), v)
}

// AppendUlong appends a ulong in its smallest form (0x44, 0x53 or 0x80).
func AppendUlong(b []byte, v uint64) []byte {
	switch {
	case v == 0:
		return append(b, codeUlong0)
	case v <= math.MaxUint8:
		return append(b, codeSmallUlong, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, codeUlong), v)
}

// AppendByte appends a signed byte (0x51).
func AppendByte(b []byte, v int8) []byte { return append(b, codeByte, byte(v)) }

// AppendShort appends a short (0x61).
func AppendShort(b []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(append(b, codeShort), uint16(v))
}

// AppendInt appends an int in its smallest form (0x54 or 0x71).
func AppendInt(b []byte, v int32) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(b, codeSmallInt, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint32(append(b, codeInt), uint32(v))
}

// AppendLong appends a long in its smallest form (0x55 or 0x81).
func AppendLong(b []byte, v int64) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(b, codeSmallLong, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint64(append(b, codeLong), uint64(v))
}

// AppendFloat appends a float (0x72).
func AppendFloat(b []byte, v float32) []byte {
	return binary.BigEndian.AppendUint32(append(b, codeFloat), math.Float32bits(v))
}

// AppendDouble appends a double (0x82).
func AppendDouble(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, codeDouble), math.Float64bits(v))
}

// AppendChar appends a char (0x73).
func AppendChar(b []byte, v Char) []byte {
	return binary.BigEndian.AppendUint32(append(b, codeChar), uint32(v))
}

// AppendTimestampMillis appends a timestamp (0x83) given in milliseconds since
// the Unix epoch.
func AppendTimestampMillis(b []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(append(b, codeTimestamp), uint64(ms))
}

// AppendTimestamp appends t as a timestamp (0x83) with millisecond precision.
func AppendTimestamp(b []byte, t time.Time) []byte {
	return AppendTimestampMillis(b, t.UnixMilli())
}

// AppendUUID appends a uuid (0x98).
func AppendUUID(b []byte, v UUID) []byte { return append(append(b, codeUUID), v[:]...) }

// AppendBinary appends binary data (0xa0 or 0xb0).
func AppendBinary(b []byte, v []byte) []byte {
	return append(appendVariableHeader(b, codeVbin8, codeVbin32, len(v)), v...)
}

// AppendString appends a UTF-8 string (0xa1 or 0xb1).
func AppendString(b []byte, s string) []byte {
	return append(appendVariableHeader(b, codeStr8, codeStr32, len(s)), s...)
}

// AppendSymbol appends a symbol (0xa3 or 0xb3).
func AppendSymbol(b []byte, s string) []byte {
	return append(appendVariableHeader(b, codeSym8, codeSym32, len(s)), s...)
}

func appendVariableHeader(b []byte, short, long byte, n int) []byte {
	if n <= math.MaxUint8 {
		return append(b, short, byte(n))
	}
	return binary.BigEndian.AppendUint32(append(b, long), uint32(n))
}

// AppendDescriptor appends the described-type constructor 0x00 followed by the
// numeric descriptor code (as smallulong when it fits, as go-amqp requires for
// performatives).
func AppendDescriptor(b []byte, code uint64) []byte {
	return AppendUlong(append(b, codeDescribed), code)
}

// AppendSymbolArray appends syms as an array of symbols (0xe0/0xf0 with
// element constructor 0xa3 or 0xb3).
func AppendSymbolArray(b []byte, syms []string) []byte {
	return appendStringArray(b, codeSym8, codeSym32, syms)
}

// AppendStringArray appends strs as an array of strings (0xe0/0xf0 with
// element constructor 0xa1 or 0xb1).
func AppendStringArray(b []byte, strs []string) []byte {
	return appendStringArray(b, codeStr8, codeStr32, strs)
}

func appendStringArray(b []byte, short, long byte, strs []string) []byte {
	wide := false
	size := 0
	for _, s := range strs {
		if len(s) > math.MaxUint8 {
			wide = true
		}
		size += 1 + len(s)
	}
	if wide {
		size = 0
		for _, s := range strs {
			size += 4 + len(s)
		}
	}
	// size counts the count field and the element constructor.
	if !wide && size+2 <= math.MaxUint8 && len(strs) <= math.MaxUint8 {
		b = append(b, codeArray8, byte(size+2), byte(len(strs)), short)
		for _, s := range strs {
			b = append(append(b, byte(len(s))), s...)
		}
		return b
	}
	ctor := short
	if wide {
		ctor = long
	}
	b = append(b, codeArray32)
	b = binary.BigEndian.AppendUint32(b, uint32(size+5))
	b = binary.BigEndian.AppendUint32(b, uint32(len(strs)))
	b = append(b, ctor)
	for _, s := range strs {
		if wide {
			b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		} else {
			b = append(b, byte(len(s)))
		}
		b = append(b, s...)
	}
	return b
}

// AppendValue appends v, which must be nil or one of the Go types the
// [Decoder] produces (bool, uint8, uint16, uint32, uint64, int8, int16, int32,
// int64, float32, float64, [Char], time.Time, [UUID], []byte, string, [Symbol],
// []any, [Map], [Array], [Described], the decimals) or int/uint, which become
// long/ulong. It also accepts map[string]any (string keys, sorted order is not
// guaranteed) for convenience.
func AppendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return AppendNull(b), nil
	case bool:
		return AppendBool(b, v), nil
	case uint8:
		return AppendUbyte(b, v), nil
	case uint16:
		return AppendUshort(b, v), nil
	case uint32:
		return AppendUint(b, v), nil
	case uint64:
		return AppendUlong(b, v), nil
	case uint:
		return AppendUlong(b, uint64(v)), nil
	case int8:
		return AppendByte(b, v), nil
	case int16:
		return AppendShort(b, v), nil
	case int32:
		return AppendInt(b, v), nil
	case int64:
		return AppendLong(b, v), nil
	case int:
		return AppendLong(b, int64(v)), nil
	case float32:
		return AppendFloat(b, v), nil
	case float64:
		return AppendDouble(b, v), nil
	case Char:
		return AppendChar(b, v), nil
	case time.Time:
		return AppendTimestamp(b, v), nil
	case UUID:
		return AppendUUID(b, v), nil
	case []byte:
		return AppendBinary(b, v), nil
	case string:
		return AppendString(b, v), nil
	case Symbol:
		return AppendSymbol(b, string(v)), nil
	case Decimal32:
		return append(append(b, codeDecimal32), v[:]...), nil
	case Decimal64:
		return append(append(b, codeDecimal64), v[:]...), nil
	case Decimal128:
		return append(append(b, codeDecimal128), v[:]...), nil
	case []any:
		return AppendList(b, v)
	case Map:
		return AppendMap(b, v)
	case map[string]any:
		m := make(Map, 0, len(v))
		for k, x := range v {
			m = append(m, MapEntry{Key: k, Value: x})
		}
		return AppendMap(b, m)
	case Array:
		return AppendArray(b, v)
	case Described:
		var err error
		b = append(b, codeDescribed)
		if b, err = AppendValue(b, v.Descriptor); err != nil {
			return b, err
		}
		return AppendValue(b, v.Value)
	}
	return b, fmt.Errorf("amqp: cannot encode value of type %T", v)
}

// AppendList appends items as a list (0x45 when empty, otherwise 0xd0).
func AppendList(b []byte, items []any) ([]byte, error) {
	if len(items) == 0 {
		return append(b, codeList0), nil
	}
	start := len(b)
	b = append(b, codeList32, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	for _, it := range items {
		if b, err = AppendValue(b, it); err != nil {
			return b, err
		}
	}
	binary.BigEndian.PutUint32(b[start+1:], uint32(len(b)-start-5))
	binary.BigEndian.PutUint32(b[start+5:], uint32(len(items)))
	return b, nil
}

// AppendMap appends m as a map32 (0xd1).
func AppendMap(b []byte, m Map) ([]byte, error) {
	start := len(b)
	b = append(b, codeMap32, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	for _, e := range m {
		if b, err = AppendValue(b, e.Key); err != nil {
			return b, err
		}
		if b, err = AppendValue(b, e.Value); err != nil {
			return b, err
		}
	}
	binary.BigEndian.PutUint32(b[start+1:], uint32(len(b)-start-5))
	binary.BigEndian.PutUint32(b[start+5:], uint32(2*len(m)))
	return b, nil
}

// AppendArray appends a as an array32 (0xf0). Every element must have the
// same Go type; numbers use their full-width encodings.
func AppendArray(b []byte, a Array) ([]byte, error) {
	start := len(b)
	b = append(b, codeArray32, 0, 0, 0, 0, 0, 0, 0, 0)
	if len(a) == 0 {
		b = append(b, codeNull)
	} else {
		ctor, err := arrayConstructor(a[0])
		if err != nil {
			return b, err
		}
		b = append(b, ctor)
		for i, v := range a {
			if c, err := arrayConstructor(v); err != nil || c != ctor {
				return b, fmt.Errorf("amqp: array element %d has type %T, want the type of element 0", i, v)
			}
			b = appendArrayElement(b, v)
		}
	}
	binary.BigEndian.PutUint32(b[start+1:], uint32(len(b)-start-5))
	binary.BigEndian.PutUint32(b[start+5:], uint32(len(a)))
	return b, nil
}

func arrayConstructor(v any) (byte, error) {
	switch v.(type) {
	case bool:
		return codeBool, nil
	case uint8:
		return codeUbyte, nil
	case uint16:
		return codeUshort, nil
	case uint32:
		return codeUint, nil
	case uint64:
		return codeUlong, nil
	case int8:
		return codeByte, nil
	case int16:
		return codeShort, nil
	case int32:
		return codeInt, nil
	case int64:
		return codeLong, nil
	case float32:
		return codeFloat, nil
	case float64:
		return codeDouble, nil
	case Char:
		return codeChar, nil
	case time.Time:
		return codeTimestamp, nil
	case UUID:
		return codeUUID, nil
	case []byte:
		return codeVbin32, nil
	case string:
		return codeStr32, nil
	case Symbol:
		return codeSym32, nil
	}
	return 0, fmt.Errorf("amqp: cannot encode %T as an array element", v)
}

func appendArrayElement(b []byte, v any) []byte {
	switch v := v.(type) {
	case bool:
		if v {
			return append(b, 1)
		}
		return append(b, 0)
	case uint8:
		return append(b, v)
	case uint16:
		return binary.BigEndian.AppendUint16(b, v)
	case uint32:
		return binary.BigEndian.AppendUint32(b, v)
	case uint64:
		return binary.BigEndian.AppendUint64(b, v)
	case int8:
		return append(b, byte(v))
	case int16:
		return binary.BigEndian.AppendUint16(b, uint16(v))
	case int32:
		return binary.BigEndian.AppendUint32(b, uint32(v))
	case int64:
		return binary.BigEndian.AppendUint64(b, uint64(v))
	case float32:
		return binary.BigEndian.AppendUint32(b, math.Float32bits(v))
	case float64:
		return binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	case Char:
		return binary.BigEndian.AppendUint32(b, uint32(v))
	case time.Time:
		return binary.BigEndian.AppendUint64(b, uint64(v.UnixMilli()))
	case UUID:
		return append(b, v[:]...)
	case []byte:
		return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
	case string:
		return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
	case Symbol:
		return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
	}
	return b
}

// fieldList encodes a described list of fields (a composite type) with every
// field the specification defines, trailing nulls included, as the service
// does: the specification allows trimming them, but the Python SDK's AMQP
// stack reads attach and transfer fields by index (max-message-size, the
// transfer payload after the eleventh field) and breaks on a shorter list.
// Never more fields than defined: go-amqp refuses those ("invalid field
// count").
type fieldList struct {
	buf []byte
	hdr int // index of the list constructor
	n   int // fields appended
}

func beginFields(b []byte, code uint64) fieldList {
	b = AppendDescriptor(b, code)
	hdr := len(b)
	b = append(b, codeList32, 0, 0, 0, 0, 0, 0, 0, 0)
	return fieldList{buf: b, hdr: hdr}
}

// null appends an absent field.
func (f *fieldList) null() {
	f.buf = append(f.buf, codeNull)
	f.n++
}

// done records that a non-null field was appended directly to f.buf.
func (f *fieldList) done() {
	f.n++
}

func (f *fieldList) uint(v uint32)      { f.buf = AppendUint(f.buf, v); f.done() }
func (f *fieldList) ulong(v uint64)     { f.buf = AppendUlong(f.buf, v); f.done() }
func (f *fieldList) ubyte(v uint8)      { f.buf = AppendUbyte(f.buf, v); f.done() }
func (f *fieldList) ushort(v uint16)    { f.buf = AppendUshort(f.buf, v); f.done() }
func (f *fieldList) bool(v bool)        { f.buf = AppendBool(f.buf, v); f.done() }
func (f *fieldList) binary(v []byte)    { f.buf = AppendBinary(f.buf, v); f.done() }
func (f *fieldList) string(v string)    { f.buf = AppendString(f.buf, v); f.done() }
func (f *fieldList) symbol(v Symbol)    { f.buf = AppendSymbol(f.buf, string(v)); f.done() }
func (f *fieldList) raw(v []byte)       { f.buf = append(f.buf, v...); f.done() }
func (f *fieldList) timestamp(ms int64) { f.buf = AppendTimestampMillis(f.buf, ms); f.done() }

func (f *fieldList) optUint(v *uint32) {
	if v == nil {
		f.null()
		return
	}
	f.uint(*v)
}

func (f *fieldList) optUbyte(v *uint8) {
	if v == nil {
		f.null()
		return
	}
	f.ubyte(*v)
}

// flag appends a boolean field whose default is false, omitting false values.
func (f *fieldList) flag(v bool) {
	if !v {
		f.null()
		return
	}
	f.bool(true)
}

func (f *fieldList) optString(v string) {
	if v == "" {
		f.null()
		return
	}
	f.string(v)
}

func (f *fieldList) optSymbol(v Symbol) {
	if v == "" {
		f.null()
		return
	}
	f.symbol(v)
}

func (f *fieldList) symbols(v []Symbol) {
	if len(v) == 0 {
		f.null()
		return
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = string(x)
	}
	f.buf = AppendSymbolArray(f.buf, s)
	f.done()
}

func (f *fieldList) optMap(m Map) error {
	if m == nil {
		f.null()
		return nil
	}
	var err error
	if f.buf, err = AppendMap(f.buf, m); err != nil {
		return err
	}
	f.done()
	return nil
}

func (f *fieldList) optRaw(v []byte) {
	if len(v) == 0 {
		f.null()
		return
	}
	f.raw(v)
}

// finish fills in size and count and returns the buffer; a composite
// without fields is an empty list.
func (f *fieldList) finish() []byte {
	b := f.buf
	if f.n == 0 {
		return append(b[:f.hdr], codeList0)
	}
	binary.BigEndian.PutUint32(b[f.hdr+1:], uint32(len(b)-f.hdr-5))
	binary.BigEndian.PutUint32(b[f.hdr+5:], uint32(f.n))
	return b
}
