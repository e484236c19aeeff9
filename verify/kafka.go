package verify

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/ehmirror/ehmirror/mirror"
)

// recInfo is what the verifier keeps of one Kafka record, and what it saw of
// the record in Event Hubs.
type recInfo struct {
	value, key, headers uint64
	present             bool
	// seen counts the events carrying this record's provenance.
	seen int32
	// firstPart is the Event Hubs partition of the first such event.
	firstPart int32
}

// partState is one Kafka partition: its watermarks and committed offset when
// the snapshot was taken, and its records indexed by offset-start.
type partState struct {
	tp        mirror.TopicPartition
	hub       string
	start     int64
	end       int64
	committed int64
	recs      []recInfo
	read      int64
	// stoppedAt is the offset the read stopped at when the partition
	// delivered nothing for IdleTimeout before its end (transaction
	// markers or aborted records can do that); -1 when read to the end.
	stoppedAt int64
}

func (p *partState) rec(offset int64) *recInfo {
	if offset < p.start || offset >= p.end {
		return nil
	}
	return &p.recs[offset-p.start]
}

// snapshot is what the selected Kafka topics held when the read began.
type snapshot struct {
	seed   maphash.Seed
	topics []string // sorted
	parts  map[mirror.TopicPartition]*partState
	// lagKnown says whether Group was set (the committed offsets are read).
	lagKnown bool
}

// digests of one record or event, comparable across the two sides. Null and
// empty keys, values and header values compare equal: kafka-go reads both as
// nil, so the Kafka side cannot tell them apart.
func (s *snapshot) digestValue(b []byte) uint64 { return maphash.Bytes(s.seed, b) }

func (s *snapshot) digestHeaders(hs []mirror.Header) uint64 {
	// The header mapping keeps every name and the order (see
	// mirror.RecordFromEvent): compare the exact sequence.
	var h maphash.Hash
	h.SetSeed(s.seed)
	var n [8]byte
	for _, hd := range hs {
		putLen(&n, len(hd.Key))
		h.Write(n[:])
		h.WriteString(hd.Key)
		putLen(&n, len(hd.Value))
		h.Write(n[:])
		h.Write(hd.Value)
	}
	return h.Sum64()
}

func putLen(b *[8]byte, n int) {
	for i := range b {
		b[i] = byte(n >> (8 * i))
	}
}

// readKafka lists the selected topics, takes their watermarks and the
// group's committed offsets, and reads every record up to the end offsets.
func readKafka(ctx context.Context, cfg Config, router *mirror.Router) (*snapshot, error) {
	transport, err := cfg.Kafka.Transport()
	if err != nil {
		return nil, err
	}
	defer transport.CloseIdleConnections()
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Kafka.Brokers...), Transport: transport, Timeout: 30 * time.Second}

	counts, err := listTopics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	snap := &snapshot{seed: maphash.MakeSeed(), parts: make(map[mirror.TopicPartition]*partState), lagKnown: cfg.Group != ""}
	req := &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{}, IsolationLevel: kafkago.ReadCommitted}
	groupReq := &kafkago.OffsetFetchRequest{GroupID: cfg.Group, Topics: map[string][]int{}}
	for topic, n := range counts {
		if !cfg.Topics.Match(topic) {
			continue
		}
		snap.topics = append(snap.topics, topic)
		for p := range n {
			req.Topics[topic] = append(req.Topics[topic], kafkago.FirstOffsetOf(p), kafkago.LastOffsetOf(p))
			groupReq.Topics[topic] = append(groupReq.Topics[topic], p)
		}
	}
	sort.Strings(snap.topics)
	if len(snap.topics) == 0 {
		return snap, nil
	}
	res, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("kafka: listing offsets: %w", err)
	}
	var total int64
	for topic, pos := range res.Topics {
		for _, po := range pos {
			if po.Error != nil {
				return nil, fmt.Errorf("kafka: offsets of %s/%d: %w", topic, po.Partition, po.Error)
			}
			tp := mirror.TopicPartition{Topic: topic, Partition: int32(po.Partition)}
			ps := &partState{tp: tp, hub: router.Hub(topic), start: po.FirstOffset, end: po.LastOffset, committed: mirror.NoOffset, stoppedAt: -1}
			if ps.end < ps.start {
				ps.end = ps.start
			}
			total += ps.end - ps.start
			snap.parts[tp] = ps
		}
	}
	if total > cfg.MaxRecords {
		return nil, fmt.Errorf("kafka: the selected topics hold %d records, more than the limit of %d; narrow the topics", total, cfg.MaxRecords)
	}
	if cfg.Group != "" {
		gres, err := client.OffsetFetch(ctx, groupReq)
		if err == nil {
			err = gres.Error
		}
		if errors.Is(err, kafkago.GroupIdNotFound) {
			// The group has never committed: nothing is claimed.
			err, gres = nil, &kafkago.OffsetFetchResponse{}
		}
		if err != nil {
			return nil, fmt.Errorf("kafka: committed offsets of group %q: %w", cfg.Group, err)
		}
		for topic, pos := range gres.Topics {
			for _, po := range pos {
				if ps, ok := snap.parts[mirror.TopicPartition{Topic: topic, Partition: int32(po.Partition)}]; ok && po.Error == nil && po.CommittedOffset >= 0 {
					ps.committed = po.CommittedOffset
				}
			}
		}
	}
	for _, ps := range snap.parts {
		ps.recs = make([]recInfo, ps.end-ps.start)
	}
	if err := snap.readRecords(ctx, cfg, total); err != nil {
		return nil, err
	}
	return snap, nil
}

// listTopics returns every topic of the cluster with its partition count.
func listTopics(ctx context.Context, cfg Config) (map[string]int, error) {
	dialer, err := cfg.Kafka.Dialer()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, b := range cfg.Kafka.Brokers {
		conn, err := dialer.DialContext(ctx, "tcp", b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		parts, err := conn.ReadPartitions()
		conn.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		counts := map[string]int{}
		for _, p := range parts {
			counts[p.Topic]++
		}
		return counts, nil
	}
	return nil, fmt.Errorf("kafka: listing topics: %w", errors.Join(errs...))
}

// readRecords reads every partition from its start to its end offset.
func (s *snapshot) readRecords(ctx context.Context, cfg Config, total int64) error {
	dialer, err := cfg.Kafka.Dialer()
	if err != nil {
		return err
	}
	var done atomic.Int64
	var progressMu sync.Mutex
	report := func(n int) {
		d := done.Add(int64(n))
		if cfg.Progress != nil {
			progressMu.Lock()
			cfg.Progress(Progress{Phase: "kafka", Done: d, Total: total})
			progressMu.Unlock()
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Parallelism)
	for _, ps := range s.parts {
		if ps.end == ps.start {
			continue
		}
		g.Go(func() error { return s.readPartition(ctx, cfg, dialer, ps, report) })
	}
	return g.Wait()
}

func (s *snapshot) readPartition(ctx context.Context, cfg Config, dialer *kafkago.Dialer, ps *partState, report func(int)) error {
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:        cfg.Kafka.Brokers,
		Topic:          ps.tp.Topic,
		Partition:      int(ps.tp.Partition),
		Dialer:         dialer,
		MinBytes:       1,
		MaxBytes:       1 << 20,
		MaxWait:        250 * time.Millisecond,
		IsolationLevel: kafkago.ReadCommitted,
		MaxAttempts:    5,
	})
	defer r.Close()
	if err := r.SetOffset(ps.start); err != nil {
		return fmt.Errorf("kafka: %s: seeking to %d: %w", ps.tp, ps.start, err)
	}
	next, pending := ps.start, 0
	for next < ps.end {
		rctx, cancel := context.WithTimeout(ctx, cfg.IdleTimeout)
		m, err := r.ReadMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				// Nothing readable before the end: the rest are
				// transaction markers or aborted records, or the
				// broker is stuck. Report what was read.
				ps.stoppedAt = next
				cfg.Logger.Warn("kafka partition delivered nothing before its end", "partition", ps.tp.String(), "offset", next, "end", ps.end)
				break
			}
			return fmt.Errorf("kafka: reading %s at %d: %w", ps.tp, next, err)
		}
		if m.Offset >= ps.end {
			break
		}
		if ri := ps.rec(m.Offset); ri != nil {
			hs := make([]mirror.Header, len(m.Headers))
			for i, h := range m.Headers {
				hs[i] = mirror.Header{Key: h.Key, Value: h.Value}
			}
			*ri = recInfo{value: s.digestValue(m.Value), key: s.digestValue(m.Key), headers: s.digestHeaders(hs), present: true, firstPart: -1}
			ps.read++
		}
		next = m.Offset + 1
		if pending++; pending == 1000 {
			report(pending)
			pending = 0
		}
	}
	report(pending)
	return nil
}
