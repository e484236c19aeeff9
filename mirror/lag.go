package mirror

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// PartitionLag is how far the consumer group is behind on one partition.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Hub       string `json:"hub"`
	// Committed is the group's committed offset, NoOffset when none.
	Committed int64 `json:"committed"`
	// Start and End are the partition's log start and end offsets.
	Start int64 `json:"log_start"`
	End   int64 `json:"log_end"`
	// Lag counts the records between the committed offset (or, with no
	// commit, the configured start) and the end.
	Lag int64 `json:"lag"`
	// Gap counts records removed by retention below the committed offset's
	// position that were never mirrored.
	Gap int64 `json:"gap,omitempty"`
	// Paused is set when the topic is paused.
	Paused bool `json:"paused,omitempty"`
	// BeyondEnd flags a committed offset past the log end (a topic
	// recreated or truncated): Lag then counts the whole log, which is what
	// the mirror has still to read (MIRROR_GAP_POLICY=resume-earliest) or
	// cannot read (fail).
	BeyondEnd bool `json:"beyond_end,omitempty"`
	// Oldest is the Kafka timestamp of the oldest record not yet mirrored
	// (the record at the committed offset), zero without lag or when it
	// could not be read; BehindBy is its age, as of the report's time.
	Oldest   time.Time     `json:"oldest_unmirrored,omitzero"`
	BehindBy time.Duration `json:"behind_by_ns,omitempty"`
	// LastDelivered is when Event Hubs last acknowledged one of the
	// partition's records: the later of what a drain of this instance saw
	// and what the last commit stored with the offset (commit metadata
	// "ack", written by whichever instance drained), so every instance
	// shows the same; zero when unknown.
	LastDelivered time.Time `json:"last_delivered,omitzero"`
}

// committedMetadataReader is implemented by sources that read the
// metadata stored with the committed offsets with them.
type committedMetadataReader interface {
	CommittedMetadata(ctx context.Context, tps []TopicPartition) (map[TopicPartition]CommitOffset, error)
}

// LagReport is the group's lag over every mirrored partition.
type LagReport struct {
	Time       time.Time      `json:"time"`
	Total      int64          `json:"total"`
	Partitions []PartitionLag `json:"partitions"`
	// Paused are the paused topics with who paused them, when and why.
	Paused []Pause `json:"paused"`
	// BehindBy is the age of the oldest record not yet mirrored over the
	// partitions of topics that are not paused (see PartitionLag.Oldest).
	BehindBy time.Duration `json:"behind_by_ns"`
	// LastDelivered is the latest of the partitions' LastDelivered.
	LastDelivered time.Time `json:"last_delivered,omitzero"`
}

// Lag reports, for every partition of the mirrored topics (narrowed by
// narrow when set), the committed offset, the log end and the lag: the same
// figures `kafka-consumer-groups.sh --describe` shows for the group.
func (m *Mirror) Lag(ctx context.Context, narrow *TopicFilter) (*LagReport, error) {
	topics, err := m.selectTopics(ctx, narrow)
	if err != nil {
		return nil, err
	}
	var tps []TopicPartition
	for _, t := range topics {
		for p := range t.Partitions {
			tps = append(tps, TopicPartition{Topic: t.Name, Partition: int32(p)})
		}
	}
	rep := &LagReport{Time: time.Now(), Partitions: []PartitionLag{}, Paused: []Pause{}}
	if len(tps) == 0 {
		return rep, nil
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	pauses, err := m.Pauses(ctx, names)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if p, ok := pauses[name]; ok {
			rep.Paused = append(rep.Paused, p)
		}
	}
	wms, err := m.source.Watermarks(ctx, tps)
	if err != nil {
		return nil, fmt.Errorf("reading Kafka watermarks: %w", err)
	}
	var committed map[TopicPartition]int64
	var meta map[TopicPartition]string
	if r, ok := m.source.(committedMetadataReader); ok {
		var cms map[TopicPartition]CommitOffset
		if cms, err = r.CommittedMetadata(ctx, tps); err == nil {
			committed = make(map[TopicPartition]int64, len(cms))
			meta = make(map[TopicPartition]string, len(cms))
			for tp, c := range cms {
				committed[tp], meta[tp] = c.Offset, c.Metadata
			}
		}
	} else {
		committed, err = m.source.Committed(ctx, tps)
	}
	if err != nil {
		return nil, fmt.Errorf("reading committed offsets: %w", err)
	}
	// KAFKA_START_OFFSET=latest applies only while the group has
	// committed nothing at all (its first deployment).
	first := m.opts.StartOffset == StartLatest
	for _, c := range committed {
		if c != NoOffset {
			first = false
		}
	}
	for _, tp := range tps {
		wm := wms[tp]
		c, ok := committed[tp]
		if !ok {
			c = NoOffset
		}
		_, paused := pauses[tp.Topic]
		pl := PartitionLag{Topic: tp.Topic, Partition: tp.Partition, Hub: m.router.Hub(tp.Topic), Committed: c, Start: wm.Start, End: wm.End, Paused: paused}
		switch {
		case c == NoOffset && first:
			pl.Lag = 0
		case c == NoOffset:
			pl.Lag = wm.End - wm.Start
		case c > wm.End:
			pl.Lag = wm.End - wm.Start
			pl.BeyondEnd = true
		default:
			pl.Lag = max(wm.End-c, 0)
			pl.Gap = max(wm.Start-c, 0)
		}
		rep.Total += pl.Lag
		rep.Partitions = append(rep.Partitions, pl)
	}
	from := map[TopicPartition]int64{}
	for _, pl := range rep.Partitions {
		if pl.Lag > 0 && !pl.BeyondEnd {
			from[TopicPartition{Topic: pl.Topic, Partition: pl.Partition}] = max(pl.Committed, pl.Start)
		}
	}
	oldest := m.oldestUnmirrored(ctx, from)
	delivered := m.live.deliveredAt()
	for i := range rep.Partitions {
		pl := &rep.Partitions[i]
		pl.LastDelivered = delivered[TopicPartition{Topic: pl.Topic, Partition: pl.Partition}]
		if cm, ok := parseCommitMeta(meta[TopicPartition{Topic: pl.Topic, Partition: pl.Partition}]); ok && cm.Acked.After(pl.LastDelivered) {
			pl.LastDelivered = cm.Acked
		}
		if pl.LastDelivered.After(rep.LastDelivered) {
			rep.LastDelivered = pl.LastDelivered
		}
		if t, ok := oldest[TopicPartition{Topic: pl.Topic, Partition: pl.Partition}]; ok {
			pl.Oldest, pl.BehindBy = t, max(rep.Time.Sub(t), 0)
			if !pl.Paused {
				rep.BehindBy = max(rep.BehindBy, pl.BehindBy)
			}
		}
	}
	if narrow == nil {
		m.live.noteLag(rep)
	}
	return rep, nil
}

// backlogFetchTimeout bounds the reads of the oldest unmirrored records.
const backlogFetchTimeout = 3 * time.Second

// oldestUnmirrored reads, for each partition, the timestamp of the record
// at its offset in from (the first record not yet mirrored). Partitions
// whose record cannot be read in time are left out: their age is unknown.
func (m *Mirror) oldestUnmirrored(ctx context.Context, from map[TopicPartition]int64) map[TopicPartition]time.Time {
	out := make(map[TopicPartition]time.Time, len(from))
	if len(from) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, backlogFetchTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	limit := make(chan struct{}, 8)
	for tp, offset := range from {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			f, err := m.source.Fetch(ctx, tp, offset, 1)
			if err != nil {
				return
			}
			for _, r := range f.Records {
				if r.Offset >= offset && r.Timestamp >= 0 {
					mu.Lock()
					out[tp] = r.Time()
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// Unpaused is the total lag of the partitions of topics that are not
// paused: what a catch-up can bring to zero.
func (r *LagReport) Unpaused() int64 {
	var n int64
	for _, p := range r.Partitions {
		if !p.Paused {
			n += p.Lag
		}
	}
	return n
}

// TopicPartitions returns the partitions of the report.
func (l *LagReport) TopicPartitions() []TopicPartition {
	out := make([]TopicPartition, len(l.Partitions))
	for i, p := range l.Partitions {
		out[i] = TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	return out
}
