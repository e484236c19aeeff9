package mirror_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
)

// distantSource puts a fixed delay in front of every fetch and watermark
// request of the real Kafka source (a Kafka that far away) and records what
// the fetches ask for.
type distantSource struct {
	mirror.Source
	delay time.Duration

	mu sync.Mutex
	// asked is every fetch's maxBytes and askedBy its partition,
	// byPartition the same per partition in order; inFlight and maxInFlight are the bytes asked by the fetches
	// running now and the most of them at once.
	asked                 []int
	askedBy               []mirror.TopicPartition
	byPartition           map[mirror.TopicPartition][]int
	inFlight, maxInFlight int
}

func (s *distantSource) Fetch(ctx context.Context, tp mirror.TopicPartition, offset int64, maxBytes int) (mirror.Fetched, error) {
	s.mu.Lock()
	s.asked = append(s.asked, maxBytes)
	s.askedBy = append(s.askedBy, tp)
	if s.byPartition == nil {
		s.byPartition = make(map[mirror.TopicPartition][]int)
	}
	s.byPartition[tp] = append(s.byPartition[tp], maxBytes)
	s.inFlight += maxBytes
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight -= maxBytes
		s.mu.Unlock()
	}()
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return mirror.Fetched{Next: offset}, ctx.Err()
	case <-t.C:
	}
	return s.Source.Fetch(ctx, tp, offset, maxBytes)
}

func (s *distantSource) Watermarks(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]mirror.Watermarks, error) {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return s.Source.Watermarks(ctx, tps)
}

// DescribeTopics passes the source's mirror.TopicDescriber on.
func (s *distantSource) DescribeTopics(ctx context.Context, names []string) ([]mirror.Topic, error) {
	if td, ok := s.Source.(mirror.TopicDescriber); ok {
		return td.DescribeTopics(ctx, names)
	}
	return s.Source.Topics(ctx)
}

// firstSecondFetch returns the index in asked of the first fetch that was
// its partition's second.
func (s *distantSource) firstSecondFetch() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[mirror.TopicPartition]bool)
	for i, tp := range s.askedBy {
		if seen[tp] {
			return i, true
		}
		seen[tp] = true
	}
	return 0, false
}

func (s *distantSource) largestAsk() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.asked {
		n = max(n, a)
	}
	return n
}

// drainFrom drains 4 partitions of 1,500 records of 1 KiB each through src
// with opts and checks that every record arrived once, in its partition's
// order, and that the group committed the end of every partition.
func drainFrom(t *testing.T, delay time.Duration, opts mirror.Options) *distantSource {
	t.Helper()
	e := newEnv(t)
	const topic, perPartition = "prod.test1", 1500
	var recs []*kgo.Record
	for i := range perPartition {
		for p := range 4 {
			v := make([]byte, 1<<10)
			rand.Read(v) // not compressible: a fetch brings what it asks for
			copy(v, fmt.Sprintf("p%d-o%d-", p, i))
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: v})
		}
	}
	// Batches of a few records, as a producer that lingers little makes:
	// a fetch brings about what it asks for (one batch larger than the ask
	// would make the fetches after it ask for less, fetchbudget.go).
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(4<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src := &distantSource{Source: e.newSource(), delay: delay}
	sink := e.newSink()
	opts.Logger, opts.CommitInterval = testLogger(), 100*time.Millisecond
	m, err := mirror.New(src, sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	rep := e.drain(m, mirror.Limits{MaxDuration: time.Minute})
	if rep.Failed() || rep.Records != 4*perPartition || !rep.CaughtUp() || rep.LagAfter != 0 {
		t.Fatalf("drain: %s\n%s", rep.Summary(), strings.Join(rep.Lines(), "\n"))
	}
	// Keyless records go to the hub partition of their Kafka partition.
	for p, evs := range e.mirrored(topic, 4) {
		if len(evs) != perPartition {
			t.Errorf("hub partition %d holds %d events, want %d", p, len(evs), perPartition)
		}
		for i, r := range evs {
			if int(r.Partition) != p || r.Offset != int64(i) || !strings.HasPrefix(string(r.Value), fmt.Sprintf("p%d-o%d-", p, i)) {
				t.Fatalf("hub partition %d event %d is %s/%d/%d, want offset %d of partition %d in order", p, i, r.Topic, r.Partition, r.Offset, i, p)
			}
		}
	}
	for p, off := range e.committed(m, topic) {
		if off != perPartition {
			t.Errorf("partition %d committed %d, want %d", p, off, perPartition)
		}
	}
	return src
}

// A Kafka 100 ms away makes the readers prefetch more bytes per round trip,
// within their share of the in-flight bound, and the drain stays correct:
// every record once, in order, every offset committed.
func TestFarKafkaPrefetchesMorePerRoundTrip(t *testing.T) {
	const fetchBytes, inflight = 16 << 10, 4 << 20
	src := drainFrom(t, 100*time.Millisecond, mirror.Options{FetchBytes: fetchBytes, InFlightBytes: inflight})
	// The drain reads the 20 partitions of the five seed topics; the
	// fetches may take half the bound (the fetch budget).
	share := (inflight / 2) / 20
	// Every fetch takes at least 100 ms, and each of the 20 partitions
	// hands 16 KiB over in 1.3 ms at prefetchRate: 8 times FetchBytes (the
	// most), capped at the share.
	want := min(8*fetchBytes, share)
	if got := src.largestAsk(); got < want || got > max(share, fetchBytes) {
		t.Errorf("largest fetch asked for %d bytes, want between %d (8 × FetchBytes, within the share) and %d (one partition's share of the fetch budget)", got, want, share)
	}
	// The drain's watermark request measured the distance before any
	// fetch, and a partition's first fetch is not measured: so the first
	// fetch that is a partition's second, the drain's first prefetch
	// (sent while the bound was still empty), already asks for more. A
	// later partition's second fetch may find the bound full of the
	// events handed over meanwhile and then fetch FetchBytes.
	if i, ok := src.firstSecondFetch(); !ok || src.asked[i] < want {
		t.Errorf("the drain's first prefetch asked for %d bytes (fetch %d of %v), want at least %d", src.asked[i], i, src.asked, want)
	}
	// Every fetch is charged to the fetch budget before it is sent.
	if budget := inflight / 2; src.maxInFlight > budget {
		t.Errorf("fetches in flight asked for %d bytes at once, more than the fetch budget (%d)", src.maxInFlight, budget)
	}
}

// On a near Kafka the drain is as correct, and the fetches keep within a
// partition's share of the fetch budget. (How much more than FetchBytes
// they ask depends on how long this machine's fetches take; see
// TestPrefetchBytesFollowsTheRoundTrip.)
func TestNearKafkaPrefetchesWithinTheShare(t *testing.T) {
	const fetchBytes, inflight = 16 << 10, 4 << 20
	src := drainFrom(t, 0, mirror.Options{FetchBytes: fetchBytes, InFlightBytes: inflight})
	if got, share := src.largestAsk(), (inflight/2)/20; got > share {
		t.Errorf("largest fetch asked for %d bytes, more than one partition's share %d", got, share)
	}
}
