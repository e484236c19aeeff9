package eventhubs

import (
	"testing"
	"time"
)

// The SDK keeps a batch's first properties map as the batch's envelope and
// encodes it again when the batch is sent, after the engine changed the
// values the map's pointers point at: the envelope holds the values.
func TestEnvelopeKeepsValuesNotPointers(t *testing.T) {
	n, at, key := int64(7), time.UnixMilli(1.7e12), []byte("k")
	props := map[string]any{"topic": "orders", "n": &n, "at": &at, "key": &key, "tomb": true}
	env := envelopeProperties(props)
	n, at, key = 8, time.UnixMilli(0), []byte("changed")
	stamp, _ := env["at"].(time.Time)
	k, _ := env["key"].([]byte)
	if env["topic"] != "orders" || env["n"] != int64(7) || !stamp.Equal(time.UnixMilli(1.7e12)) || string(k) != "k" || env["tomb"] != true || len(env) != 5 {
		t.Errorf("envelope %v: want the values as they were at the copy", env)
	}
}
