package functions

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeInvocation checks that decoding never panics, that every error
// is one line, and that whatever decodes re-encodes to something that
// decodes the same way. Its seed corpus (testdata/fuzz) holds the exact
// reference payloads and variants, so it runs as a normal test.
func FuzzDecodeInvocation(f *testing.F) {
	f.Add([]byte(`{"Data":{"timer":{"Schedule":{"AdjustForDST":true},"ScheduleStatus":null,"IsPastDue":false}},"Metadata":{"sys":{"MethodName":"MirrorTimer","UtcNow":"2026-01-10T10:05:00Z","RandGuid":"g"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		inv, err := DecodeInvocation(bytes.NewReader(body), 1<<20)
		if err != nil {
			oneLine(t, err)
			return
		}
		for name := range inv.Data {
			if tm, err := inv.Timer(name); err != nil {
				oneLine(t, err)
			} else {
				roundTrip(t, name, tm, func(inv *Invocation) (any, error) { return inv.Timer(name) })
			}
			if req, err := inv.HTTP(name); err != nil {
				oneLine(t, err)
			} else {
				roundTrip(t, name, req, func(inv *Invocation) (any, error) { return inv.HTTP(name) })
			}
			var v any
			if err := inv.Input(name, &v); err != nil {
				oneLine(t, err)
			}
		}
		if _, err := inv.Sys(); err != nil {
			oneLine(t, err)
		}
		if _, err := inv.RetryContext(); err != nil {
			oneLine(t, err)
		}
		if _, err := inv.Timer("no such binding"); err == nil {
			t.Error("missing binding decoded")
		}
	})
}

func oneLine(t *testing.T, err error) {
	t.Helper()
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "invocation body: ") {
		t.Errorf("error not one line starting with %q: %q", "invocation body: ", msg)
	}
}

// roundTrip re-encodes a decoded value as Data.<name> and decodes it again.
func roundTrip(t *testing.T, name string, v any, decode func(*Invocation) (any, error)) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	again, err := decode(&Invocation{Data: map[string]json.RawMessage{name: raw}})
	if err != nil {
		t.Fatalf("re-decode %s: %v", raw, err)
	}
	raw2, _ := json.Marshal(again)
	if !bytes.Equal(raw, raw2) {
		t.Errorf("round trip changed %T\n first: %s\nsecond: %s", v, raw, raw2)
	}
}
