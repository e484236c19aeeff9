package mirror

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RecordFromEvent reverses [EventFor]: it rebuilds the Kafka record an event
// was made from, from its body and application properties. Verifiers and
// consumers use it to check provenance and drop duplicates.
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
		r.Time = ts
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
	type indexed struct {
		key string
		n   int
		val []byte
	}
	var hs []indexed
	for name, v := range props {
		rest, ok := strings.CutPrefix(name, PropHeaderPrefix)
		if !ok {
			continue
		}
		val, _ := v.([]byte)
		key, n := rest, 0
		if i := strings.LastIndexByte(rest, '#'); i >= 0 {
			if k, err := strconv.Atoi(rest[i+1:]); err == nil && k > 0 {
				key, n = rest[:i], k
			}
		}
		hs = append(hs, indexed{key, n, val})
	}
	// Header order across different keys is not kept by a property map;
	// order by key, then by repetition, which keeps repeated keys in order.
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].key != hs[j].key {
			return hs[i].key < hs[j].key
		}
		return hs[i].n < hs[j].n
	})
	for _, h := range hs {
		r.Headers = append(r.Headers, Header{Key: h.key, Value: h.val})
	}
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
