package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mirror copies records from Kafka into Event Hubs in bounded drains. It is
// safe for concurrent use: drains running at the same time in one process
// never work on the same partition (a partition held by one drain is
// reported busy by the other), and across processes the consumer group's
// fencing keeps committed offsets from moving backwards.
type Mirror struct {
	source Source
	sink   Sink
	opts   Options
	router *Router

	mu   sync.Mutex
	held map[TopicPartition]string // partition -> name of the drain holding it
	// pausesRefreshed is when this process last re-wrote the pause records.
	pausesRefreshed time.Time
	// Drains of one process share one group generation, so the
	// coordinator cannot fence one from the other: a drain must not take a
	// partition another drain released after this drain read its committed
	// offsets (it would start below the other's final commit and commit
	// lower). releases counts releases; releasedAt is each partition's last.
	releases   uint64
	releasedAt map[TopicPartition]uint64
	// listen caches, per hub, whether the credentials can read it
	// (deduplication).
	listen map[string]listenCheck
	// readBacks keep the progress of read-backs that ran out of time
	// (deduplication), so the next drain goes on from there.
	readBacks map[readBackKey]*readBackKept
	// acked are, per partition, the records Event Hubs acknowledged above
	// the commit when this process's last drain of it ended (acked.go).
	acked map[TopicPartition]*ackedAbove
	// live follows the running drains and the throughput (status).
	live *liveTracker
	// liveDirty are the partitions whose last live record written by this
	// process holds outages (peers.go); under mu.
	liveDirty map[TopicPartition]bool
}

// New returns a Mirror reading from source and publishing to sink.
func New(source Source, sink Sink, opts Options) (*Mirror, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("mirror options: %w", err)
	}
	return &Mirror{
		source: source,
		sink:   sink,
		opts:   opts,
		router: NewRouter(opts.Routes),
		held:   make(map[TopicPartition]string),

		releasedAt: make(map[TopicPartition]uint64),
		listen:     make(map[string]listenCheck),
		readBacks:  make(map[readBackKey]*readBackKept),
		acked:      make(map[TopicPartition]*ackedAbove),
		live:       newLiveTracker(),
		liveDirty:  make(map[TopicPartition]bool),
	}, nil
}

// Options returns the options in effect, defaults filled in.
func (m *Mirror) Options() Options { return m.opts }

// holdMark returns the release count; a drain takes it before it claims
// (reads committed offsets) and passes it to hold.
func (m *Mirror) holdMark() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.releases
}

// hold marks partitions as drained by run and returns those it got; the
// others are held by another drain of this process, or were released by one
// after mark (the committed offsets the drain read for them may predate that
// drain's final commit): the next drain takes those.
func (m *Mirror) hold(run string, tps []TopicPartition, mark uint64) (got, busy []TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tp := range tps {
		if _, ok := m.held[tp]; ok || m.releasedAt[tp] > mark {
			busy = append(busy, tp)
			continue
		}
		m.held[tp] = run
		got = append(got, tp)
	}
	return got, busy
}

func (m *Mirror) release(tps []TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releases++
	for _, tp := range tps {
		delete(m.held, tp)
		m.releasedAt[tp] = m.releases
	}
}

// narrowed returns the topics that match narrow (all when nil).
func narrowed(topics []Topic, narrow *TopicFilter) []Topic {
	if narrow == nil {
		return topics
	}
	var out []Topic
	for _, t := range topics {
		if narrow.Match(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// topicNames returns the names of topics.
func topicNames(topics []Topic) []string {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	return names
}

// selectTopics lists the topics to mirror now, with their partition counts.
func (m *Mirror) selectTopics(ctx context.Context, narrow *TopicFilter) ([]Topic, error) {
	all, err := m.source.Topics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing Kafka topics: %w", err)
	}
	var selected []Topic
	for _, t := range all {
		if m.opts.Topics.Match(t.Name) && (narrow == nil || narrow.Match(t.Name)) {
			selected = append(selected, t)
		}
	}
	slices.SortFunc(selected, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	return selected, nil
}

func sortTopicPartitions(tps []TopicPartition) {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
}
