package kafka

import (
	"bytes"
	"io"
	"testing"

	"github.com/segmentio/kafka-go/protocol"

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

// A batch's records cost the same two allocations whatever their number:
// one for the keys, values and header values, one for the Header structs.
// Header values keep nil apart from empty.
func TestAppendRecordsAllocatesPerBatch(t *testing.T) {
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
			t.Errorf("%d records: %.0f allocations, want 2 (one per batch for bytes, one for headers)", n, allocs)
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
