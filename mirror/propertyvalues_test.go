package mirror

import (
	"testing"
	"time"
)

// The SDK keeps a batch's first properties map as the batch's envelope and
// encodes it again when the batch is sent, after the engine changed the
// values the map's pointers point at: the sink gives it PropertyValues,
// which hold the values as they were.
func TestPropertyValuesKeepValuesNotPointers(t *testing.T) {
	n, at, key := int64(7), time.UnixMilli(1.7e12), []byte("k")
	props := map[string]any{"topic": "orders", "n": &n, "at": &at, "key": &key, "tomb": true}
	vals := PropertyValues(props)
	n, at, key = 8, time.UnixMilli(0), []byte("changed")
	stamp, _ := vals["at"].(time.Time)
	k, _ := vals["key"].([]byte)
	if vals["topic"] != "orders" || vals["n"] != int64(7) || !stamp.Equal(time.UnixMilli(1.7e12)) || string(k) != "k" || vals["tomb"] != true || len(vals) != 5 {
		t.Errorf("values %v: want the values as they were at the copy", vals)
	}
}
