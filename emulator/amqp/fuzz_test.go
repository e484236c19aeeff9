package amqp

import (
	"bytes"
	"testing"
)

// The fuzz targets run their seed corpus (testdata/fuzz/<name>/ and the f.Add
// seeds) as normal tests; explore with e.g.
//
//	go test ./emulator/amqp -run '^$' -fuzz FuzzDecodeFrame -fuzztime 10s

// FuzzDecodeFrame decodes a frame header and body as the server does. Any
// input must either fail cleanly or decode into a performative that
// re-encodes stably.
func FuzzDecodeFrame(f *testing.F) {
	for _, p := range []Performative{
		&Open{ContainerID: "c", MaxFrameSize: 65536},
		&Begin{NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 5000},
		&Detach{Handle: 1, Closed: true, Error: &Error{Condition: "amqp:link:stolen"}},
		&SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous")},
	} {
		b, _ := AppendFrame(nil, FrameTypeAMQP, 0, p, nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fh, err := ParseFrameHeader(data, 65536)
		if err != nil || int(fh.Size) > len(data) {
			return
		}
		body := data[fh.BodyOffset():fh.Size]
		if len(body) == 0 {
			return
		}
		v, _, err := DecodeBody(body)
		if err != nil {
			return
		}
		p, ok := v.(Performative)
		if !ok {
			t.Fatalf("DecodeBody returned %T, not a Performative", v)
		}
		first, err := p.Append(nil)
		if err != nil {
			return // e.g. a properties map holding an array of described values
		}
		v2, _, err := DecodeBody(first)
		if err != nil {
			t.Fatalf("re-encoded %T does not decode: %v\n%x", v, err, first)
		}
		second, err := v2.(Performative).Append(nil)
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("%T re-encodes unstably (%v)\n%x\n%x", v, err, first, second)
		}
	})
}

// FuzzDecodeValue decodes one AMQP value. A value that decodes must re-encode
// to bytes that decode to the same encoding again, and ValueLen must agree
// with the bytes Value consumed.
func FuzzDecodeValue(f *testing.F) {
	for _, v := range []any{
		"amqp.annotation.x-opt-offset > '-1'", Symbol("com.microsoft:epoch"), int64(-7), uint64(1 << 40),
		Map{{Key: "k", Value: []any{int32(1), nil, true}}}, Array{"0", "1"},
		Described{Descriptor: uint64(SelectorFilterCode), Value: "x"},
	} {
		b, _ := AppendValue(nil, v)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(data)
		v, err := d.Value()
		if err != nil {
			return
		}
		consumed := len(data) - d.Len()
		if n, err := ValueLen(data); err != nil || n != consumed {
			t.Fatalf("ValueLen = %d, %v; Value consumed %d", n, err, consumed)
		}
		first, err := AppendValue(nil, v)
		if err != nil {
			return // arrays of described values are not re-encoded
		}
		v2, err := NewDecoder(first).Value()
		if err != nil {
			t.Fatalf("re-encoded %T does not decode: %v\n%x", v, err, first)
		}
		second, err := AppendValue(nil, v2)
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("%T re-encodes unstably (%v)\n%x\n%x", v, err, first, second)
		}
	})
}

// FuzzDecodeMessage decodes a message (a sequence of sections).
func FuzzDecodeMessage(f *testing.F) {
	m := &Message{
		MessageAnnotations:    Map{{Key: Symbol("x-opt-partition-key"), Value: "pk"}},
		Properties:            &Properties{MessageID: "id", ContentType: "text/plain"},
		ApplicationProperties: Map{{Key: "n", Value: int64(5)}},
		Data:                  [][]byte{[]byte("body")},
	}
	b, _ := m.Append(nil)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Message
		if m.Unmarshal(data) != nil {
			return
		}
		first, err := m.Append(nil)
		if err != nil {
			return
		}
		var m2 Message
		if err := m2.Unmarshal(first); err != nil {
			t.Fatalf("re-encoded message does not decode: %v\n%x", err, first)
		}
		second, err := m2.Append(nil)
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("message re-encodes unstably (%v)\n%x\n%x", err, first, second)
		}
	})
}
