package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// Layout of the benchmark's Kafka cluster and Event Hubs namespace: the
// seed's five topics (matched by the handler's default include pattern
// prod\..*), each with four partitions, mirrored into hubs of the same name
// with four partitions.
const (
	NumTopics     = 5
	NumPartitions = 4
)

// DistinctKeys is how many distinct keys the keyed cases draw from, per
// topic. Each key lives in one Kafka partition, as Kafka's own partitioner
// would have it.
const DistinctKeys = 1_000_000

// baseTime is the timestamp of offset 0 in Unix milliseconds
// (2026-01-01T00:00:00Z); offset o is o milliseconds later.
const baseTime int64 = 1_767_225_600_000

// TopicName is the name of topic ti (0-based) and of its hub.
func TopicName(ti int) string { return "prod.test" + strconv.Itoa(ti+1) }

// Shape is what one case's records look like.
type Shape struct {
	// Name identifies the case, e.g. "1KiB-keyed".
	Name string `json:"name"`
	// Size is the value size in bytes.
	Size int `json:"size"`
	// Keyed records carry one of DistinctKeys keys; keyless ones a nil key.
	Keyed bool `json:"keyed"`
	// Headers: every record carries the three headers of a traced event
	// (see gen.headers); otherwise none.
	Headers bool `json:"headers,omitempty"`
}

// DefaultShapes are the six cases: 100 B, 1 KiB and 10 KiB values,
// keyless and keyed.
func DefaultShapes() []Shape {
	var out []Shape
	for _, s := range []struct {
		label string
		size  int
	}{{"100B", 100}, {"1KiB", 1 << 10}, {"10KiB", 10 << 10}} {
		out = append(out,
			Shape{Name: s.label + "-keyless", Size: s.size},
			Shape{Name: s.label + "-keyed", Size: s.size, Keyed: true})
	}
	return out
}

// HeaderShapes are the cases with headers, run on request only
// (-cases): 100 B and 1 KiB keyless values with three headers each.
func HeaderShapes() []Shape {
	return []Shape{
		{Name: "100B-headers", Size: 100, Headers: true},
		{Name: "1KiB-headers", Size: 1 << 10, Headers: true},
	}
}

// gen produces the records of a shape deterministically from their
// coordinates, so the loader and the send-limit phase (which has no Kafka)
// agree on every key, value and timestamp without keeping them.
type gen struct {
	shape  Shape
	pool   []byte   // random bytes that values are cut from
	topics []string // TopicName of each topic, made once
	// keys are the DistinctKeys keys of a keyed shape, keyBytes each, made
	// once: formatting a key per record cost the send limit a fifteenth
	// of its CPU in the 100 B keyed case, work the mirror, which reads its
	// keys from Kafka, never does.
	keys []byte
	// contentType and tenants ("t0t1…t7") are header values, made once;
	// they must not be modified.
	contentType, tenants []byte
}

// keyBytes is the length of a key: "key-" and seven digits.
const keyBytes = 11

// poolSize is the size of the random pool values are sliced from.
const poolSize = 4 << 20

func newGen(shape Shape) *gen {
	r := rand.New(rand.NewChaCha8([32]byte{'e', 'h', 'm', 'i', 'r', 'r', 'o', 'r'}))
	pool := make([]byte, poolSize)
	for i := 0; i+8 <= len(pool); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			pool[i+j] = byte(v >> (8 * j))
		}
	}
	topics := make([]string, NumTopics)
	for ti := range topics {
		topics[ti] = TopicName(ti)
	}
	g := &gen{shape: shape, pool: pool, topics: topics, contentType: []byte("application/json"), tenants: []byte("t0t1t2t3t4t5t6t7")}
	if shape.Keyed {
		g.keys = make([]byte, 0, DistinctKeys*keyBytes)
		for id := range DistinctKeys {
			g.keys = fmt.Appendf(g.keys, "key-%07d", id)
		}
	}
	return g
}

// mix hashes a record's coordinates (splitmix64 finaliser).
func mix(ti, p int, off int64) uint64 {
	z := uint64(ti)<<56 ^ uint64(p)<<48 ^ uint64(off) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// value returns the value of a record; it aliases the pool and must not be
// modified.
func (g *gen) value(ti, p int, off int64) []byte {
	start := int(mix(ti, p, off) % uint64(len(g.pool)-g.shape.Size))
	return g.pool[start : start+g.shape.Size : start+g.shape.Size]
}

// key returns the key of a record, nil for keyless shapes: "key-NNNNNNN",
// one of DistinctKeys per topic, each key confined to one partition. It
// aliases the keys made once and must not be modified.
func (g *gen) key(ti, p int, off int64) []byte {
	if !g.shape.Keyed {
		return nil
	}
	id := int((mix(ti, p, off)>>8)%(DistinctKeys/NumPartitions)*NumPartitions + uint64(p))
	return g.keys[id*keyBytes : (id+1)*keyBytes : (id+1)*keyBytes]
}

// headers returns the headers of a record, nil for shapes without: a W3C
// traceparent that differs per record, a content type and a tenant of
// eight, 102 bytes of names and values in all. Each call allocates them
// anew, as the loader needs (the producer keeps them until it sends).
func (g *gen) headers(ti, p int, off int64) []mirror.Header {
	hs, _ := g.appendHeaders(nil, nil, ti, p, off)
	return hs
}

// appendHeaders is headers written into hs[:0], with the traceparent's
// bytes in buf[:0]; it returns both, grown as needed. The send limit reuses
// them from record to record: a batch keeps none of an event's headers
// (mirror.Batch), and formatting and allocating them per record was work
// the mirror, which reads its headers from Kafka, never does.
func (g *gen) appendHeaders(hs []mirror.Header, buf []byte, ti, p int, off int64) ([]mirror.Header, []byte) {
	if !g.shape.Headers {
		return nil, buf
	}
	h := mix(ti, p, off)
	buf = append(buf[:0], "00-"...)
	buf = appendHex16(buf, h)
	buf = appendHex16(buf, h^uint64(off))
	buf = append(buf, '-')
	buf = appendHex16(buf, h>>7)
	buf = append(buf, "-01"...)
	tenant := 2 * int(h%8)
	return append(hs[:0],
		mirror.Header{Key: "traceparent", Value: buf},
		mirror.Header{Key: "content-type", Value: g.contentType},
		mirror.Header{Key: "tenant", Value: g.tenants[tenant : tenant+2 : tenant+2]},
	), buf
}

// appendHex16 appends v in 16 lower-case hexadecimal digits.
func appendHex16(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, digits[v>>uint(shift)&0xf])
	}
	return dst
}

// timestamp returns the timestamp of a record in Unix milliseconds.
func (g *gen) timestamp(off int64) int64 { return baseTime + off }

// record returns the record as the Kafka adapter would read it.
func (g *gen) record(ti, p int, off int64) mirror.Record {
	return g.recordWith(g.headers(ti, p, off), ti, p, off)
}

// recordWith is record with headers hs.
func (g *gen) recordWith(hs []mirror.Header, ti, p int, off int64) mirror.Record {
	return mirror.Record{
		Topic:     g.topics[ti],
		Partition: int32(p),
		Offset:    off,
		Key:       g.key(ti, p, off),
		Value:     g.value(ti, p, off),
		Headers:   hs,
		Timestamp: g.timestamp(off),
	}
}

// reusedHeaders are the headers and traceparent bytes the send limit's
// records share, one record at a time (gen.appendHeaders).
type reusedHeaders struct {
	hs  []mirror.Header
	buf []byte
}

// recordReusing is record with its headers written into rh: valid until
// the next call with rh.
func (g *gen) recordReusing(rh *reusedHeaders, ti, p int, off int64) mirror.Record {
	rh.hs, rh.buf = g.appendHeaders(rh.hs, rh.buf, ti, p, off)
	return g.recordWith(rh.hs, ti, p, off)
}

// kafkaRecord returns the record to produce at off of partition p of topic
// ti, stamped at (the loader's backlog is stamped as record stamps it;
// live records are stamped when produced).
func (g *gen) kafkaRecord(ti, p int, off int64, at time.Time) *kgo.Record {
	r := &kgo.Record{
		Topic:     g.topics[ti],
		Partition: int32(p),
		Key:       g.key(ti, p, off),
		Value:     g.value(ti, p, off),
		Timestamp: at,
	}
	for _, h := range g.headers(ti, p, off) {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return r
}
