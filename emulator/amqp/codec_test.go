package amqp

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValueRoundTrip(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_123).UTC()
	values := []any{
		nil, true, false, uint8(7), uint16(65535), uint32(0), uint32(200), uint32(1 << 30),
		uint64(0), uint64(255), uint64(math.MaxUint64), int8(-5), int16(-300), int32(-1), int32(1 << 20),
		int64(-128), int64(math.MinInt64), float32(1.5), 2.25, Char('€'), ts,
		UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, []byte{}, []byte("bin"),
		"", "héllo", strings.Repeat("x", 300), Symbol("sym"), Symbol(strings.Repeat("s", 256)),
		[]any{}, []any{"a", int64(1), nil}, Map{{Key: Symbol("k"), Value: "v"}, {Key: "n", Value: int64(5)}},
		Array{"0", "1"}, Array{int64(1), int64(2)}, Array{Symbol("a")}, Array{},
		Described{Descriptor: uint64(0x468C00000004), Value: "amqp.annotation.x-opt-offset > '-1'"},
		Decimal32{1, 2, 3, 4}, Decimal64{1}, Decimal128{2},
	}
	for _, v := range values {
		b, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("AppendValue(%#v): %v", v, err)
		}
		n, err := ValueLen(b)
		if err != nil || n != len(b) {
			t.Fatalf("ValueLen(%x) = %d, %v; want %d", b, n, err, len(b))
		}
		d := NewDecoder(b)
		got, err := d.Value()
		if err != nil {
			t.Fatalf("Value(%x): %v", b, err)
		}
		if d.Len() != 0 {
			t.Fatalf("Value(%x) left %d bytes", b, d.Len())
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("round trip of %#v gave %#v (%x)", v, got, b)
		}
	}
}

func TestDecoderAcceptsEveryEncoding(t *testing.T) {
	cases := []struct {
		hex  string
		read func(*Decoder) (any, error)
		want any
	}{
		{"43", func(d *Decoder) (any, error) { return d.ReadUint() }, uint32(0)},
		{"5207", func(d *Decoder) (any, error) { return d.ReadUint() }, uint32(7)},
		{"7000010000", func(d *Decoder) (any, error) { return d.ReadUint() }, uint32(65536)},
		{"44", func(d *Decoder) (any, error) { return d.ReadUlong() }, uint64(0)},
		{"5309", func(d *Decoder) (any, error) { return d.ReadUlong() }, uint64(9)},
		{"800000000000100000", func(d *Decoder) (any, error) { return d.ReadUlong() }, uint64(1 << 20)},
		{"5401", func(d *Decoder) (any, error) { return d.ReadInteger() }, int64(1)},
		{"71ffffffff", func(d *Decoder) (any, error) { return d.ReadInteger() }, int64(-1)},
		{"55fb", func(d *Decoder) (any, error) { return d.ReadInteger() }, int64(-5)},
		{"41", func(d *Decoder) (any, error) { return d.ReadBool() }, true},
		{"5600", func(d *Decoder) (any, error) { return d.ReadBool() }, false},
		{"a30141", func(d *Decoder) (any, error) { return d.ReadString() }, "A"},
		{"b30000000141", func(d *Decoder) (any, error) { return d.ReadString() }, "A"},
		{"b10000000141", func(d *Decoder) (any, error) { return d.ReadString() }, "A"},
		{"a3054e414d4531", func(d *Decoder) (any, error) { return d.ReadSymbols() }, []Symbol{"NAME1"}},
		{"e00602a301410142", func(d *Decoder) (any, error) { return d.ReadSymbols() }, []Symbol{"A", "B"}},
	}
	for _, tc := range cases {
		b, _ := hex.DecodeString(tc.hex)
		got, err := tc.read(NewDecoder(b))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, %v; want %#v", tc.hex, got, err, tc.want)
		}
	}
}

// The bytes of the contract's examples, as the SDK sends them.
func TestDecodeSDKFrames(t *testing.T) {
	saslInit, _ := hex.DecodeString("0000002a02010000005341d00000001a00000002a309414e4f4e594d4f5553a009616e6f6e796d6f7573")
	fh, err := ParseFrameHeader(saslInit, 512)
	if err != nil || fh.Type != FrameTypeSASL || int(fh.Size) != len(saslInit) {
		t.Fatalf("header %+v, %v", fh, err)
	}
	v, _, err := DecodeBody(saslInit[fh.BodyOffset():])
	if err != nil {
		t.Fatal(err)
	}
	if in := v.(*SASLInit); in.Mechanism != "ANONYMOUS" || string(in.InitialResponse) != "anonymous" {
		t.Fatalf("sasl-init %+v", in)
	}
	closeFrame, _ := hex.DecodeString("0000000c02000000005318" + "45")
	if v, _, err := DecodeBody(closeFrame[8:]); err != nil || v.(*Close).Error != nil {
		t.Fatalf("close: %+v %v", v, err)
	}
}

func TestPerformativeRoundTrip(t *testing.T) {
	one, two := uint32(1), uint32(2)
	settled := SenderSettleSettled
	ch := uint16(3)
	perfs := []Performative{
		&Open{ContainerID: "c", Hostname: "h", MaxFrameSize: 65536, ChannelMax: 100, IdleTimeout: 30000},
		&Begin{RemoteChannel: &ch, NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 10},
		&Attach{Name: "l", Handle: 1, Role: RoleReceiver, SndSettleMode: &settled,
			Source: &Source{Address: "hub/ConsumerGroups/$Default/Partitions/0", Filter: Map{{Key: Symbol("f"),
				Value: Described{Descriptor: uint64(SelectorFilterCode), Value: "amqp.annotation.x-opt-offset > '-1'"}}}},
			Target: &Target{Address: "t"}, InitialDeliveryCount: &one, MaxMessageSize: 1 << 20,
			DesiredCapabilities: []Symbol{"com.microsoft:georeplication"}, Properties: Map{{Key: Symbol("com.microsoft:epoch"), Value: int64(7)}}},
		&Flow{NextIncomingID: &one, IncomingWindow: 5000, NextOutgoingID: 2, OutgoingWindow: 5000, Handle: &two, DeliveryCount: &one, LinkCredit: &two, Drain: true},
		&Transfer{Handle: 1, DeliveryID: 5, HasDeliveryID: true, DeliveryTag: []byte{0, 1}, MessageFormat: MessageFormatBatch, HasMessageFormat: true, More: true},
		&Disposition{Role: RoleReceiver, First: 4, Last: &two, Settled: true, State: AppendAccepted(nil)},
		&Detach{Handle: 2, Closed: true, Error: &Error{Condition: "amqp:link:stolen", Description: "d", Info: Map{{Key: Symbol("k"), Value: "v"}}}},
		&End{}, &Close{Error: &Error{Condition: "amqp:internal-error"}},
		&SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS", "PLAIN"}}, &SASLOutcome{Code: SASLCodeOK},
	}
	for _, p := range perfs {
		frame, err := AppendFrame(nil, FrameTypeAMQP, 3, p, []byte("payload"))
		if err != nil {
			t.Fatal(err)
		}
		fh, err := ParseFrameHeader(frame, 1<<20)
		if err != nil || fh.Channel != 3 || fh.DataOffset != 2 || int(fh.Size) != len(frame) {
			t.Fatalf("%T: header %+v %v", p, fh, err)
		}
		body := frame[fh.BodyOffset():]
		if !bytes.HasPrefix(body, []byte{0x00, 0x53}) {
			t.Fatalf("%T: body does not start with a smallulong descriptor: %x", p, body[:3])
		}
		got, payload, err := DecodeBody(body)
		if err != nil {
			t.Fatalf("%T: %v", p, err)
		}
		if _, ok := p.(*Transfer); ok && string(payload) != "payload" {
			t.Fatalf("transfer payload %q", payload)
		}
		again, err := got.(Performative).Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := p.Append(nil)
		if !bytes.Equal(again, want) {
			t.Fatalf("%T: re-encoding differs\n got %x\nwant %x", p, again, want)
		}
	}
}

// TestCompositesCarryEveryField: every composite the emulator sends lists
// all the fields the specification defines, trailing nulls included, as the
// service does (the Python SDK reads attach and transfer fields by index).
func TestCompositesCarryEveryField(t *testing.T) {
	enc := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	src, _ := (&Source{}).Append(nil)
	msg, _ := (&Message{Header: &Header{Priority: 4}, Properties: &Properties{}}).Append(nil)
	props := msg[bytes.Index(msg, []byte{0x00, 0x53, byte(SectionProperties)}):]
	for _, c := range []struct {
		name   string
		b      []byte
		fields uint32
	}{
		{"open", enc((&Open{ContainerID: "c"}).Append(nil)), 10},
		{"begin", enc((&Begin{}).Append(nil)), 8},
		{"attach", enc((&Attach{Name: "l"}).Append(nil)), 14},
		{"flow", enc((&Flow{}).Append(nil)), 11},
		{"transfer", enc((&Transfer{}).Append(nil)), 11},
		{"disposition", enc((&Disposition{}).Append(nil)), 6},
		{"detach", enc((&Detach{Handle: 1, Closed: true}).Append(nil)), 3},
		{"end", enc((&End{}).Append(nil)), 1},
		{"close", enc((&Close{}).Append(nil)), 1},
		{"error", enc((&Error{Condition: "c"}).Append(nil)), 3},
		{"source", src, 11},
		{"target", (&Target{}).Append(nil), 7},
		{"sasl-mechanisms", enc((&SASLMechanisms{}).Append(nil)), 1},
		{"sasl-outcome", enc((&SASLOutcome{}).Append(nil)), 2},
		{"header", msg, 5},
		{"properties", props, 13},
	} {
		// 00 53 code, list32 constructor, size, count
		if len(c.b) < 12 || c.b[3] != 0xd0 {
			t.Fatalf("%s = %x, want a list32", c.name, c.b)
		}
		if n := binary.BigEndian.Uint32(c.b[8:]); n != c.fields {
			t.Errorf("%s has %d fields, want %d: %x", c.name, n, c.fields, c.b)
		}
	}
	if b := AppendAccepted(nil); hex.EncodeToString(b) != "00532445" {
		t.Fatalf("accepted = %x", b)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	gs := uint32(3)
	m := &Message{
		Header:              &Header{Durable: true, Priority: 4, TTL: 1000},
		DeliveryAnnotations: Map{{Key: Symbol("x"), Value: "y"}},
		MessageAnnotations:  Map{{Key: Symbol("x-opt-partition-key"), Value: "pk"}},
		Properties: &Properties{MessageID: "id", UserID: []byte("u"), To: "to", Subject: "s", ReplyTo: "r",
			CorrelationID: uint64(9), ContentType: "text/plain", ContentEncoding: "gzip",
			AbsoluteExpiryTime: time.UnixMilli(5).UTC(), CreationTime: time.UnixMilli(6).UTC(), GroupID: "g", GroupSequence: &gs, ReplyToGroupID: "rg"},
		ApplicationProperties: Map{{Key: "n", Value: int64(5)}},
		Data:                  [][]byte{[]byte("a"), []byte("b")},
		Footer:                Map{{Key: Symbol("f"), Value: true}},
	}
	b, err := m.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got Message
	if err := got.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, m) {
		t.Fatalf("got %+v\nwant %+v", got, *m)
	}
	var codes []uint64
	ForEachSection(b, func(code uint64, _, _ []byte) error { codes = append(codes, code); return nil })
	if !reflect.DeepEqual(codes, []uint64{0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x75, 0x78}) {
		t.Fatalf("section order %x", codes)
	}
}

func TestDecoderRejectsHostileLengths(t *testing.T) {
	cases := map[string]string{
		"str32 longer than input":  "b1ffffffff41",
		"list32 count beyond size": "d000000004ffffffff",
		"array of nulls":           "f000000005ffffffff40",
		"map with odd count":       "c1030140",
		"unknown constructor":      "ff",
		"truncated ulong":          "800000",
		"list8 size zero":          "c00000",
	}
	for name, h := range cases {
		b, _ := hex.DecodeString(h)
		if _, err := NewDecoder(b).Value(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	deep := bytes.Repeat([]byte{0xc0, 0x02, 0x01}, 100)
	if _, err := NewDecoder(deep).Value(); !errors.Is(err, ErrMalformed) {
		t.Errorf("deep lists: got %v", err)
	}
	deepDescribed := bytes.Repeat([]byte{0x00, 0x53, 0x01}, 1000)
	if _, err := ValueLen(deepDescribed); !errors.Is(err, ErrMalformed) {
		t.Errorf("deep described: got %v", err)
	}
}

func TestFrameHeaderLimits(t *testing.T) {
	for _, h := range []string{"0000000402000000", "0001000102000000", "0000000801000000", "0000000c05000000", "0000000802030000"} {
		b, _ := hex.DecodeString(h)
		if _, err := ParseFrameHeader(b, 65536); err == nil {
			t.Errorf("%s accepted", h)
		}
	}
}
