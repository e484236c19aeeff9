package kafka

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// rewindBytes is a protocol.Bytes that can be read again.
type rewindBytes struct {
	b []byte
	r int
}

func (b *rewindBytes) Read(p []byte) (int, error) {
	if b.r == len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.r:])
	b.r += n
	return n, nil
}

func (b *rewindBytes) Close() error { return nil }
func (b *rewindBytes) Len() int     { return len(b.b) - b.r }

// A fetch's records cost the same two allocations whatever their number
// (besides the records themselves): one for the keys, values and header
// values, one for the Header structs. Header values keep nil apart from
// empty.
func TestAppendRecordsAllocatesPerFetch(t *testing.T) {
	tp := mirror.TopicPartition{Topic: "t", Partition: 2}
	for _, n := range []int{1, 100} {
		raw := make([]protocol.Record, n)
		var readers []*rewindBytes
		for i := range raw {
			k, v := &rewindBytes{b: []byte{'k', byte(i)}}, &rewindBytes{b: bytes.Repeat([]byte{byte(i)}, 100)}
			readers = append(readers, k, v)
			raw[i] = protocol.Record{Offset: int64(i), Key: k, Value: v, Headers: []protocol.Header{
				{Key: "trace", Value: []byte{'t', byte(i)}}, {Key: "empty", Value: []byte{}}, {Key: "null"},
			}}
		}
		out := make([]mirror.Record, 0, n)
		var err error
		allocs := testing.AllocsPerRun(20, func() {
			for _, r := range readers {
				r.r = 0
			}
			out, err = appendRecords(out[:0], tp, 0, raw)
		})
		if err != nil {
			t.Fatal(err)
		}
		if allocs > 2 {
			t.Errorf("%d records: %.0f allocations, want 2 (one for the bytes, one for the headers)", n, allocs)
		}
		if len(out) != n {
			t.Fatalf("%d records: got %d", n, len(out))
		}
		for i, r := range out {
			hs := r.Headers
			if r.Offset != int64(i) || !bytes.Equal(r.Key, []byte{'k', byte(i)}) || !bytes.Equal(r.Value, bytes.Repeat([]byte{byte(i)}, 100)) ||
				len(hs) != 3 || hs[0].Key != "trace" || !bytes.Equal(hs[0].Value, []byte{'t', byte(i)}) ||
				hs[1].Key != "empty" || hs[1].Value == nil || len(hs[1].Value) != 0 || hs[2].Key != "null" || hs[2].Value != nil {
				t.Fatalf("record %d of %d: %+v", i, n, r)
			}
		}
	}
}

// A fetch that returns several batches returns their records in one slice
// of the exact size, from the offset asked for, and so does the next fetch,
// which reads its batches into the buffer the first one left.
func TestFetchAcrossBatchesAllocatesOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	s := newTestSource(t, addrs, "g-batches")
	p := newProducer(t, addrs)
	ctx := ctxT(t, 10*time.Second)
	const batches, per = 5, 7
	for b := range batches {
		var recs []*kgo.Record
		for i := range per {
			recs = append(recs, &kgo.Record{Topic: "prod.test1", Partition: 2, Value: fmt.Appendf(nil, "b%d-%d", b, i),
				Headers: []kgo.RecordHeader{{Key: "b", Value: []byte{byte(b)}}}})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil { // one batch
			t.Fatal(err)
		}
	}
	tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 2}
	for _, from := range []int64{3, 10, 0} {
		f, err := s.Fetch(ctx, tp, from, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := int64(len(f.Records)); n != batches*per-from || f.Next != batches*per {
			t.Fatalf("fetch at %d: %d records, next %d; want %d, %d", from, n, f.Next, batches*per-from, batches*per)
		}
		if cap(f.Records) != len(f.Records) {
			t.Errorf("fetch at %d: %d records in a slice of %d", from, len(f.Records), cap(f.Records))
		}
		for i, r := range f.Records {
			off := from + int64(i)
			b, j := off/per, off%per
			if r.Offset != off || string(r.Value) != fmt.Sprintf("b%d-%d", b, j) || len(r.Headers) != 1 || r.Headers[0].Value[0] != byte(b) {
				t.Fatalf("fetch at %d, record %d: %+v", from, i, r)
			}
		}
	}
}
