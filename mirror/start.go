package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
)

// prepare decides where each partition starts, applying the start-offset and
// gap policies.
// early is the watermark read the drain started beside its claim
// (startWatermarks).
func (d *drain) prepare(ctx context.Context, got []TopicPartition, assigned map[TopicPartition]int64, early *watermarkRead) error {
	wms, err := d.startWatermarks(ctx, got, assigned, early)
	if err != nil {
		return fmt.Errorf("reading Kafka watermarks: %w", err)
	}
	meta := d.claim.AssignedMetadata()
	d.firstDeployment = d.m.firstDeployment(ctx, assigned, d.logger)
	d.parts = make(map[string]*partitioner)
	d.fits = make(map[string]*atomic.Int64)
	for _, tp := range got {
		hubName := d.m.router.Hub(tp.Topic)
		hub := d.hubs[hubName]
		if d.senders[hubName] == nil {
			d.parts[hubName] = &partitioner{strategy: d.m.opts.Partitioning, n: len(hub.PartitionIDs)}
			ss := make([]*sender, len(hub.PartitionIDs))
			for i, id := range hub.PartitionIDs {
				ss[i] = &sender{d: d, hub: hubName, partitionID: id, in: newItemQueue(senderQueue)}
			}
			d.senders[hubName] = ss
			d.fits[hubName] = new(atomic.Int64)
		}
		committed := assigned[tp]
		wm, ok := wms[tp]
		if !ok {
			ps := d.addState(tp, hubName, committed)
			ps.begin(max(committed, 0), max(committed, 0))
			ps.fail(fmt.Errorf("no watermarks for %s", tp))
			continue
		}
		cm, _ := parseCommitMeta(meta[tp])
		d.writer.found(tp, cm.Writer)
		now := d.ids[tp.Topic]
		sp := d.m.startPosition(committed, meta[tp], now, wm, d.firstDeployment)
		switch {
		case sp.unchecked:
			// Fail closed: the check that protects this position cannot run.
			ps := d.addState(tp, hubName, committed)
			ps.begin(committed, wm.End)
			ps.fail(fmt.Errorf("the committed offset %d carries topic id %s but the broker now reports no topic ids, so it cannot be checked; partition skipped (reset the group's offset for it to go on)", committed, cm.TopicID))
			continue
		case sp.recreated:
			ps := d.addState(tp, hubName, NoOffset)
			ps.begin(sp.from, wm.End)
			ps.note = fmt.Sprintf("committed offset %d belongs to an earlier topic of the same name (topic id %s, now %s: deleted and recreated); mirroring this one from its earliest offset %d", committed, cm.TopicID, now, wm.Start)
			d.logger.WarnContext(ctx, "topic recreated since the last commit; starting over at the earliest offset",
				"topic", tp.Topic, "partition", tp.Partition, "stale_committed", committed, "old_topic_id", cm.TopicID, "topic_id", now, "log_start", wm.Start)
			continue
		}
		ps := d.addState(tp, hubName, committed)
		ps.priorAck = cm.Acked
		d.begin(ps, committed, sp.from, wm)
		d.takeAcked(ps)
	}
	d.startDedup(ctx, meta)
	return nil
}

// firstDeployment reports whether KAFKA_START_OFFSET=latest applies: the
// group has committed nothing on any partition of any mirrored topic (not
// only the topics a narrowed drain or a reset names). Partitions and topics
// that appear later start at their earliest offset. known are committed
// offsets already read. When the group's offsets cannot be read, it answers
// false (earliest: nothing is lost).
func (m *Mirror) firstDeployment(ctx context.Context, known map[TopicPartition]int64, logger *slog.Logger) bool {
	if m.opts.StartOffset != StartLatest {
		return false
	}
	for _, off := range known {
		if off != NoOffset {
			return false
		}
	}
	topics, err := m.selectTopics(ctx, nil)
	if err != nil {
		logger.WarnContext(ctx, "cannot tell whether the group committed before; new partitions start at their earliest offset", "err", err)
		return false
	}
	var all []TopicPartition
	for _, t := range topics {
		for p := range t.Partitions {
			all = append(all, TopicPartition{Topic: t.Name, Partition: int32(p)})
		}
	}
	committed, err := m.source.Committed(ctx, all)
	if err != nil {
		logger.WarnContext(ctx, "cannot tell whether the group committed before; new partitions start at their earliest offset", "err", err)
		return false
	}
	for _, off := range committed {
		if off != NoOffset {
			return false
		}
	}
	return true
}

// startPoint is where the next drain starts a partition, as
// startPosition decides it.
type startPoint struct {
	// from is where reading starts (a partition failed at the start
	// stays at its commit).
	from int64
	// recreated: the stored commit carries the id of an earlier topic of
	// the same name (deleted and created again; a late commit of the old
	// topic may have landed on the new one): the new one starts at its
	// earliest offset.
	recreated bool
	// unchecked: the stored commit carries a topic id but the broker
	// reports none, so it cannot be checked: the partition fails closed.
	unchecked bool
}

// startPosition is where a drain starts reading a partition whose stored
// commit is committed (NoOffset if none) with metadata meta, of the topic
// whose id is now topicID, whose log is wm: the topic-id check of the
// commit metadata, then the start-offset and gap policies (startFrom);
// first says whether latest applies (see firstDeployment). It is the one
// computation behind a drain's start and an offset reset's plan, so a
// reset's dry run says what a drain would do.
func (m *Mirror) startPosition(committed int64, meta, topicID string, wm Watermarks, first bool) startPoint {
	cm, _ := parseCommitMeta(meta)
	switch {
	case committed != NoOffset && cm.TopicID != "" && topicID == "":
		return startPoint{from: committed, unchecked: true}
	case committed != NoOffset && cm.TopicID != "" && cm.TopicID != topicID:
		return startPoint{from: wm.Start, recreated: true}
	}
	return startPoint{from: m.startFrom(committed, wm, first)}
}

// startFrom is where a drain starts reading a partition whose committed
// offset (of the topic there is now) is committed (NoOffset if none) and
// whose log is wm, under the start-offset and gap policies; first says
// whether latest applies (see firstDeployment). A gap or a position
// beyond the log end under the fail policy starts nowhere: the partition
// is failed where it is, so startFrom returns committed.
func (m *Mirror) startFrom(committed int64, wm Watermarks, first bool) int64 {
	switch {
	case committed == NoOffset && first:
		return wm.End
	case committed == NoOffset:
		return wm.Start
	case committed < wm.Start || committed > wm.End:
		if m.opts.GapPolicy == GapFail {
			return committed
		}
		return wm.Start
	default:
		return committed
	}
}

// addState creates the state of one partition of the drain.
func (d *drain) addState(tp TopicPartition, hub string, committed int64) *partitionState {
	ps := newPartitionState(tp, hub, committed)
	d.states[tp] = ps
	d.order = append(d.order, ps)
	return ps
}

// begin starts one partition at from (startFrom's answer for committed
// and wm), with what the start-offset and gap policies say about it: a
// gap or a commit past the log end fails the partition under the fail
// policy, and is reported under resume-earliest.
func (d *drain) begin(ps *partitionState, committed, from int64, wm Watermarks) {
	policy := d.m.opts.GapPolicy
	switch {
	case committed != NoOffset && committed < wm.Start:
		gap := wm.Start - committed
		ps.gap = gap
		ps.begin(from, wm.End)
		if policy == GapFail {
			ps.lagBefore = wm.End - committed
			ps.fail(fmt.Errorf("gap: %d records (offsets %d..%d) were removed by retention before they were mirrored; partition not advanced (MIRROR_GAP_POLICY=resume-earliest skips them)", gap, committed, wm.Start-1))
			return
		}
		d.logger.WarnContext(context.Background(), "records lost to retention before they were mirrored; resuming at the earliest record",
			"topic", ps.tp.Topic, "partition", ps.tp.Partition, "gap", gap, "committed", committed, "log_start", wm.Start)
	case committed > wm.End:
		ps.begin(from, wm.End)
		if policy == GapFail {
			ps.fail(fmt.Errorf("committed offset %d is beyond the log end %d (topic recreated or truncated); partition not advanced (MIRROR_GAP_POLICY=resume-earliest restarts it at offset %d)", committed, wm.End, wm.Start))
			return
		}
		d.logger.WarnContext(context.Background(), "committed offset beyond the log end; restarting at the earliest record",
			"topic", ps.tp.Topic, "partition", ps.tp.Partition, "committed", committed, "log_start", wm.Start, "log_end", wm.End)
		// The stale offset is replaced by the first commit of this drain.
		ps.resetCommitted()
		ps.note = fmt.Sprintf("committed offset %d was beyond the log end %d; restarted at the earliest offset %d (MIRROR_GAP_POLICY=resume-earliest)", committed, wm.End, wm.Start)
	default:
		ps.begin(from, wm.End)
	}
}

// outOfRange handles a fetch outside the log, which happens when retention
// removes records while the drain reads them. It returns the offset to go on
// from, or -1 to stop the partition.
func (d *drain) outOfRange(ctx context.Context, ps *partitionState, offset int64) int64 {
	wms, err := d.m.source.Watermarks(ctx, []TopicPartition{ps.tp})
	wm, ok := wms[ps.tp]
	if err != nil || !ok {
		ps.fail(fmt.Errorf("offset %d out of range and watermarks unavailable: %v", offset, err))
		return -1
	}
	ps.setEnd(wm.End)
	if offset >= wm.Start && offset <= wm.End {
		return offset // transient; try again
	}
	if offset > wm.End || d.m.opts.GapPolicy == GapFail {
		if offset < wm.Start {
			ps.mu.Lock()
			ps.gap += wm.Start - offset
			ps.mu.Unlock()
			ps.fail(fmt.Errorf("gap: %d records (offsets %d..%d) were removed by retention before they were mirrored; partition not advanced past them", wm.Start-offset, offset, wm.Start-1))
		} else {
			ps.fail(fmt.Errorf("offset %d is beyond the log end %d (topic recreated or truncated)", offset, wm.End))
		}
		return -1
	}
	ps.mu.Lock()
	ps.gap += wm.Start - offset
	ps.mu.Unlock()
	ps.advance(wm.Start)
	return wm.Start
}
