package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchapi "github.com/segmentio/kafka-go/protocol/fetch"

	"github.com/ehmirror/ehmirror/mirror"
)

// controlTypeAbort is the control record type of a transaction abort marker
// (key version 0, type 0 = ABORT, 1 = COMMIT).
const controlTypeAbort = 0

// requestMaxBytesSlack is added to the caller's maxBytes for the
// request-level limit of a single-partition fetch.
const requestMaxBytesSlack = 64 << 20

// Fetch reads records of tp from offset on, at most about maxBytes
// (DefaultFetchMaxBytes when maxBytes <= 0; the broker still returns one
// whole batch when the first is larger), under read_committed isolation.
//
// It sends the same Fetch request as kafka-go's Client.Fetch (MinBytes 1,
// MaxWait = Options.FetchMaxWait, longer for an idle partition up to
// Options.FetchIdleMaxWait; no fetch session) through the Source's
// Transport, but keeps what Client.Fetch drops: the list of aborted
// transactions, so records of aborted transactions are filtered out exactly
// as the Java consumer does; control batches (transaction markers) are
// skipped. Next is one past the last offset the response covered, data,
// aborted or marker, so a partition whose remaining entries are only markers
// or aborted records is passed over and never re-fetched forever.
//
// Keys, values and headers are copied out of kafka-go's reused buffers. A nil
// key (no key) stays nil and an empty key stays empty; a nil value
// (tombstone) stays nil and an empty value stays empty. Header values keep
// nil versus empty as kafka-go decodes them.
//
// Watermarks are those reported with the fetch: Start is the log start
// offset and End the last stable offset (the high watermark when the broker
// does not report an LSO).
//
// An offset below the log start or above the end yields an error wrapping
// mirror.ErrOffsetOutOfRange; the returned Fetched then carries Next = offset
// and the partition's Watermarks when they could be learnt.
func (s *Source) Fetch(ctx context.Context, tp mirror.TopicPartition, offset int64, maxBytes int) (mirror.Fetched, error) {
	fetched := mirror.Fetched{Next: offset}
	if s.isClosed() {
		return fetched, fmt.Errorf("kafka: fetch %s at %d: %w", tp, offset, ErrClosed)
	}
	if offset < 0 {
		return fetched, fmt.Errorf("kafka: fetch %s at %d: negative offset", tp, offset)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultFetchMaxBytes
	}
	maxWait := s.pollWait(tp)
	if d, ok := ctx.Deadline(); ok {
		if half := time.Until(d) / 2; half < maxWait {
			maxWait = max(half, 0)
		}
	}
	req := &fetchapi.Request{
		ReplicaID:   -1,
		MaxWaitTime: int32(maxWait / time.Millisecond),
		MinBytes:    1,
		// The partition limit below is what binds. The request limit is
		// set well above it (like the Java consumer's 50 MiB
		// fetch.max.bytes) because kfake drops a partition's list of
		// aborted transactions when the request limit, rather than the
		// partition limit, cuts the response.
		MaxBytes:       int32(min(int64(maxBytes)+requestMaxBytesSlack, math.MaxInt32)),
		IsolationLevel: int8(kafkago.ReadCommitted),
		SessionID:      0,
		SessionEpoch:   -1, // full fetch, no fetch session
		Topics: []fetchapi.RequestTopic{{
			Topic: tp.Topic,
			Partitions: []fetchapi.RequestPartition{{
				Partition:          tp.Partition,
				CurrentLeaderEpoch: -1,
				FetchOffset:        offset,
				LogStartOffset:     -1,
				PartitionMaxBytes:  int32(maxBytes),
			}},
		}},
	}

	var part *fetchapi.ResponsePartition
	err := s.withRetry(ctx, func(ctx context.Context) error {
		rctx, cancel := s.requestCtx(ctx, maxWait)
		defer cancel()
		m, err := s.transport.RoundTrip(rctx, s.addr, req)
		if err != nil {
			return err
		}
		res := m.(*fetchapi.Response)
		if res.ErrorCode != 0 {
			return kafkago.Error(res.ErrorCode)
		}
		if len(res.Topics) == 0 || len(res.Topics[0].Partitions) == 0 {
			return errors.New("broker answered without the partition")
		}
		part = &res.Topics[0].Partitions[0]
		if part.ErrorCode != 0 && kafkago.Error(part.ErrorCode) != kafkago.OffsetOutOfRange {
			return kafkago.Error(part.ErrorCode)
		}
		return nil
	})
	if err != nil {
		return fetched, fmt.Errorf("kafka: fetch %s at %d: %w", tp, offset, err)
	}

	fetched.Watermarks = responseWatermarks(part)
	if kafkago.Error(part.ErrorCode) == kafkago.OffsetOutOfRange {
		wm := fetched.Watermarks
		if wm.Start < 0 || wm.End < 0 {
			// Kafka answers OFFSET_OUT_OF_RANGE with -1 watermarks; ask.
			if w, werr := s.Watermarks(ctx, []mirror.TopicPartition{tp}); werr == nil {
				wm = w[tp]
			}
		}
		fetched.Watermarks = wm
		if wm.Start >= 0 && wm.End >= 0 {
			return fetched, fmt.Errorf("kafka: fetch %s at %d (log start %d, end %d): %w", tp, offset, wm.Start, wm.End, mirror.ErrOffsetOutOfRange)
		}
		return fetched, fmt.Errorf("kafka: fetch %s at %d (watermarks unknown): %w", tp, offset, mirror.ErrOffsetOutOfRange)
	}

	buf, _ := s.batchRecords.Get().(*[]protocol.Record)
	if buf == nil {
		buf = new([]protocol.Record)
	}
	recs, next, err := decodeRecords(tp, offset, part, buf)
	all := (*buf)[:cap(*buf)]
	clear(all) // the records' page references
	*buf = all[:0]
	s.batchRecords.Put(buf)
	if err != nil {
		return fetched, fmt.Errorf("kafka: fetch %s at %d: decode: %w", tp, offset, err)
	}
	fetched.Records = recs
	fetched.Next = next
	s.polled(tp, len(recs) == 0 && next == offset)
	return fetched, nil
}

// pollWait is the long-poll wait of tp's next fetch: FetchMaxWait, or
// longer after fetches that found nothing new (see
// Options.FetchIdleMaxWait).
func (s *Source) pollWait(tp mirror.TopicPartition) time.Duration {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if w, ok := s.idleWaits[tp]; ok {
		return w
	}
	return s.opts.FetchMaxWait
}

// polled records whether a fetch of tp found nothing new: its next wait
// doubles, up to FetchIdleMaxWait; otherwise it is FetchMaxWait again.
func (s *Source) polled(tp mirror.TopicPartition, idle bool) {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if !idle || s.opts.FetchIdleMaxWait <= s.opts.FetchMaxWait {
		delete(s.idleWaits, tp)
		return
	}
	w, ok := s.idleWaits[tp]
	if !ok {
		w = s.opts.FetchMaxWait
	}
	s.idleWaits[tp] = min(2*w, s.opts.FetchIdleMaxWait)
}

// responseWatermarks extracts Start/End from a fetch response partition,
// preferring the last stable offset as End.
func responseWatermarks(p *fetchapi.ResponsePartition) mirror.Watermarks {
	end := p.LastStableOffset
	if end < 0 {
		end = p.HighWatermark
	}
	return mirror.Watermarks{Start: p.LogStartOffset, End: end}
}

// abortedTxns tracks, while walking batches in offset order, which producers'
// transactions were aborted (the read_committed algorithm of KIP-98: an
// aborted transaction of producer P starts at FirstOffset and ends at P's next
// ABORT marker).
type abortedTxns struct {
	pending []fetchapi.ResponseTransaction // sorted by FirstOffset, not yet active
	active  map[int64]struct{}             // producers inside an aborted txn
}

func newAbortedTxns(list []fetchapi.ResponseTransaction) *abortedTxns {
	a := &abortedTxns{pending: append([]fetchapi.ResponseTransaction(nil), list...), active: make(map[int64]struct{})}
	sort.Slice(a.pending, func(i, j int) bool { return a.pending[i].FirstOffset < a.pending[j].FirstOffset })
	return a
}

// upTo activates the aborted transactions starting at or before lastOffset.
func (a *abortedTxns) upTo(lastOffset int64) {
	for len(a.pending) > 0 && a.pending[0].FirstOffset <= lastOffset {
		a.active[a.pending[0].ProducerID] = struct{}{}
		a.pending = a.pending[1:]
	}
}

// decodeRecords copies the visible records at or after offset out of p and
// returns them with the offset to fetch next. It reads the records of
// every batch into *batch first, growing it as needed and leaving it grown.
func decodeRecords(tp mirror.TopicPartition, offset int64, p *fetchapi.ResponsePartition, batch *[]protocol.Record) ([]mirror.Record, int64, error) {
	next := offset
	rr := p.RecordSet.Records
	if rr == nil {
		return nil, next, nil
	}
	var batches []protocol.RecordReader
	if st, ok := rr.(*protocol.RecordStream); ok {
		batches = st.Records
	} else {
		batches = []protocol.RecordReader{rr}
	}
	aborted := newAbortedTxns(p.AbortedTransactions)
	raw := (*batch)[:0]
	defer func() { *batch = raw[:0] }()
	for _, b := range batches {
		// Read the whole batch first: its last offset decides which
		// aborted transactions apply (kafka-go does not expose the
		// batch header's lastOffsetDelta).
		from := len(raw)
		for {
			r, err := b.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				closeRecords(raw)
				return nil, next, err
			}
			raw = append(raw, *r) // the reader reuses *r
		}
		if len(raw) == from {
			continue
		}
		read := raw[from:]
		last := read[len(read)-1].Offset
		if last+1 > next {
			next = last + 1
		}
		switch batch := b.(type) {
		case *protocol.ControlBatch:
			aborted.upTo(last)
			for i := range read {
				if cr, err := protocol.ReadControlRecord(&read[i]); err == nil && cr.Type == controlTypeAbort {
					delete(aborted.active, batch.ProducerID)
				}
			}
			closeRecords(read)
			raw = raw[:from]
		case *protocol.RecordBatch:
			if batch.ProducerID >= 0 {
				aborted.upTo(last)
			}
			if batch.Attributes.Transactional() {
				if _, ok := aborted.active[batch.ProducerID]; ok {
					closeRecords(read)
					raw = raw[:from]
				}
			}
		}
	}
	// Every batch's visible records at once: one allocation each for the
	// records, their bytes and their headers, of the exact size.
	out, err := appendRecords(nil, tp, offset, raw)
	if err != nil {
		return nil, next, err
	}
	return out, next, nil
}

// appendRecords copies the records in raw at or after offset (a batch
// starts at its base offset, which may precede the one asked for) into out.
// Their keys, values and header values share one allocation, and so do
// their Header structs: no allocation per record.
func appendRecords(out []mirror.Record, tp mirror.TopicPartition, offset int64, raw []protocol.Record) ([]mirror.Record, error) {
	defer closeRecords(raw)
	size, n, nh := 0, 0, 0
	for i := range raw {
		r := &raw[i]
		if r.Offset < offset {
			continue
		}
		n++
		if r.Key != nil {
			size += r.Key.Len()
		}
		if r.Value != nil {
			size += r.Value.Len()
		}
		nh += len(r.Headers)
		for _, h := range r.Headers {
			size += len(h.Value)
		}
	}
	if n == 0 {
		return out, nil
	}
	slab := make([]byte, size)
	carve := func(l int) []byte {
		dst := slab[:l:l]
		slab = slab[l:]
		return dst
	}
	take := func(b protocol.Bytes) ([]byte, error) {
		if b == nil {
			return nil, nil
		}
		dst := carve(b.Len())
		_, err := io.ReadFull(b, dst)
		return dst, err
	}
	var headers []mirror.Header
	if nh > 0 {
		headers = make([]mirror.Header, nh)
	}
	if out == nil {
		out = make([]mirror.Record, 0, n)
	} else {
		out = slices.Grow(out, n)
	}
	for i := range raw {
		r := &raw[i]
		if r.Offset < offset {
			continue
		}
		key, err := take(r.Key)
		if err != nil {
			return out, fmt.Errorf("key at offset %d: %w", r.Offset, err)
		}
		val, err := take(r.Value)
		if err != nil {
			return out, fmt.Errorf("value at offset %d: %w", r.Offset, err)
		}
		var hs []mirror.Header
		if l := len(r.Headers); l > 0 {
			hs, headers = headers[:l:l], headers[l:]
			for j, h := range r.Headers {
				var v []byte
				if h.Value != nil {
					v = carve(len(h.Value))
					copy(v, h.Value)
				}
				hs[j] = mirror.Header{Key: h.Key, Value: v}
			}
		}
		out = append(out, mirror.Record{
			Topic:     tp.Topic,
			Partition: tp.Partition,
			Offset:    r.Offset,
			Key:       key,
			Value:     val,
			Headers:   hs,
			Timestamp: r.Time.UnixMilli(),
		})
	}
	return out, nil
}

func closeRecords(rs []protocol.Record) {
	for i := range rs {
		closeRecord(&rs[i])
	}
}

// closeRecord releases kafka-go's page references of r's key and value.
func closeRecord(r *protocol.Record) {
	if r.Key != nil {
		_ = r.Key.Close()
	}
	if r.Value != nil {
		_ = r.Value.Close()
	}
}
