package mirror

import (
	"fmt"
	"time"
)

// RecordFromEvent reverses [EventFor]: it rebuilds the Kafka record an event
// was made from, from its body and application properties. Verifiers and
// consumers use it to check provenance and drop duplicates. Headers come back
// in their Kafka order, names and values byte for byte. When only the
// header properties cannot be read, the error wraps [ErrHeaderProperties]
// and the record has everything else.
func RecordFromEvent(body []byte, props map[string]any) (Record, error) {
	var r Record
	var ok bool
	if r.Topic, ok = props[PropTopic].(string); !ok {
		return r, fmt.Errorf("event has no %s property", PropTopic)
	}
	p, err := toInt64(props[PropPartition])
	if err != nil {
		return r, fmt.Errorf("%s: %w", PropPartition, err)
	}
	r.Partition = int32(p)
	if r.Offset, err = toInt64(props[PropOffset]); err != nil {
		return r, fmt.Errorf("%s: %w", PropOffset, err)
	}
	if ts, ok := props[PropTimestamp].(time.Time); ok {
		r.Timestamp = ts.UnixMilli()
	}
	if k, ok := props[PropKey].([]byte); ok {
		r.Key = k
	}
	if tomb, _ := props[PropTombstone].(bool); !tomb {
		r.Value = body
		if r.Value == nil {
			r.Value = []byte{}
		}
	}
	hs, err := headersFromProperties(props)
	if err != nil {
		return r, fmt.Errorf("event %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	r.Headers = hs
	return r, nil
}

func toInt64(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case int32:
		return int64(n), nil
	case int:
		return int64(n), nil
	case uint64:
		return int64(n), nil
	case nil:
		return 0, fmt.Errorf("missing")
	}
	return 0, fmt.Errorf("unexpected type %T", v)
}
