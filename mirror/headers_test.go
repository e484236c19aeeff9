package mirror

import (
	"bytes"
	"errors"
	"testing"
)

// headersEqual compares names, values and order; nil and empty values are
// equal (kafka-go cannot tell them apart either).
func headersEqual(a, b []Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func roundTrip(t *testing.T, hs []Header) []Header {
	t.Helper()
	ev := EventFor(&Record{Topic: "t", Partition: 1, Offset: 2, Value: []byte("v"), Headers: hs})
	back, err := RecordFromEvent(ev.Body, ev.Properties)
	if err != nil {
		t.Fatalf("headers %q: %v (properties %v)", hs, err, ev.Properties)
	}
	return back.Headers
}

// TestHeaderNamesRoundTrip covers the names the old "#N" mapping lost or
// confused: a name ending in "#1" next to a repeated name, empty names,
// escapes, invalid UTF-8, and order between different names.
func TestHeaderNamesRoundTrip(t *testing.T) {
	for _, hs := range [][]Header{
		{{"a", []byte("1")}, {"a", []byte("2")}, {"a#1", []byte("3")}},
		{{"a#1", []byte("3")}, {"a", []byte("1")}, {"a", []byte("2")}},
		{{"z", []byte("1")}, {"a", []byte("2")}, {"z", []byte("3")}},
		{{"", []byte("e1")}, {"", nil}, {"x", []byte("x")}},
		{{"%23", []byte("p")}, {"#", []byte("h")}, {"%", nil}, {"a#b#", []byte("ab")}},
		{{"\xff\xfe", []byte("bad utf8")}, {"é#1", []byte("é")}, {"kafka.header-order", []byte("o")}},
		{{"only", []byte("one")}},
		nil,
	} {
		if got := roundTrip(t, hs); !headersEqual(got, hs) {
			t.Errorf("headers %q came back as %q", hs, got)
		}
	}
}

// TestPlainHeaderNamesStayReadable: unique plain names are properties as
// they are, with the order beside them only when there are two names.
func TestPlainHeaderNamesStayReadable(t *testing.T) {
	ev := EventFor(&Record{Topic: "t", Headers: []Header{{"trace-id", []byte("1")}, {"content-type", []byte("json")}}})
	p := ev.Properties
	if string(p["kafka.header.trace-id"].([]byte)) != "1" || string(p["kafka.header.content-type"].([]byte)) != "json" || p[PropHeaderOrder] != "trace-id#content-type" {
		t.Errorf("properties %v", p)
	}
	ev = EventFor(&Record{Topic: "t", Headers: []Header{{"a#1", []byte("x")}, {"a#1", nil}}})
	if _, ok := ev.Properties["kafka.header.a%231"]; !ok {
		t.Errorf("properties %v: want kafka.header.a%%231", ev.Properties)
	}
	if _, ok := ev.Properties["kafka.header.a%231#1"]; !ok {
		t.Errorf("properties %v: want kafka.header.a%%231#1", ev.Properties)
	}
	if _, ok := ev.Properties[PropHeaderOrder]; ok {
		t.Errorf("properties %v: no order property for one name", ev.Properties)
	}
}

// TestAlteredHeaderPropertiesAreReported: the decoder never guesses.
func TestAlteredHeaderPropertiesAreReported(t *testing.T) {
	ev := EventFor(&Record{Topic: "t", Headers: []Header{{"a", []byte("1")}, {"b", []byte("2")}}})
	for name, alter := range map[string]func(map[string]any){
		"missing header": func(p map[string]any) { delete(p, "kafka.header.b") },
		"extra header":   func(p map[string]any) { p["kafka.header.c"] = []byte("3") },
		"bad escape":     func(p map[string]any) { p["kafka.header.a%2"] = []byte("3"); p[PropHeaderOrder] = "a#b#a%2" },
		"bad suffix":     func(p map[string]any) { p["kafka.header.a#01"] = []byte("3") },
		"order type":     func(p map[string]any) { p[PropHeaderOrder] = int64(1) },
	} {
		p := make(map[string]any, len(ev.Properties))
		for k, v := range ev.Properties {
			p[k] = v
		}
		alter(p)
		r, err := RecordFromEvent(ev.Body, p)
		if !errors.Is(err, ErrHeaderProperties) {
			t.Errorf("%s: err %v, want ErrHeaderProperties", name, err)
		}
		if r.Topic != "t" {
			t.Errorf("%s: provenance lost: %+v", name, r)
		}
	}
}

// FuzzHeaderRoundTrip: any header sequence maps to properties and back.
// The input is split into headers at 0x00 and into name and value at 0x01.
func FuzzHeaderRoundTrip(f *testing.F) {
	f.Add([]byte("a\x011\x00a\x012\x00a#1\x013"))
	f.Add([]byte("\x01\x00\x01x\x00%23\x01#"))
	f.Add([]byte("\xff#\x01\x00z\x01\x00a\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var hs []Header
		for part := range bytes.SplitSeq(in, []byte{0}) {
			name, val, _ := bytes.Cut(part, []byte{1})
			hs = append(hs, Header{Key: string(name), Value: val})
		}
		if got := roundTrip(t, hs); !headersEqual(got, hs) {
			t.Fatalf("headers %q came back as %q", hs, got)
		}
	})
}
