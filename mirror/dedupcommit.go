package mirror

// The commit side of deduplication: what a drain stores with each commit
// (the hub partitions' floors, the clean mark) so that the next drain knows
// how far to read back. docs/delivery-contract.md says what a mark promises.

import (
	"context"
	"fmt"
)

// candidates are the ids of the hub partitions ps's records may go to.
func (d *drain) candidates(ps *partitionState) []string {
	ids := d.hubs[ps.hub].PartitionIDs
	if d.m.opts.Partitioning == PartitionPreserve && len(ids) > 0 {
		return []string{ids[int(ps.tp.Partition)%len(ids)]}
	}
	return ids
}

// floorsFor returns the floors to store with a commit of ps at offset p, or
// nil when one is unknown, and the lowest offset a read-back from them may
// count (see commitMeta.From).
func (d *drain) floorsFor(ps *partitionState, p int64) (map[string]int64, int64) {
	dd := d.dd
	floors := make(map[string]int64)
	for _, id := range d.candidates(ps) {
		f, ok := dd.floors[ps.hub][id]
		if !ok {
			return nil, 0
		}
		floors[id] = f
	}
	dd.mu.Lock()
	defer dd.mu.Unlock()
	var from int64
	if dp := dd.parts[ps]; dp != nil && dp.inherited != nil && p <= dp.presentMax {
		// Records found in the hub above p were published before this
		// drain's floors: keep the older floors until they are committed.
		for id, f := range dp.inherited {
			if cur, ok := floors[id]; !ok || f < cur {
				floors[id] = f
			}
		}
		if dp.from > p && ps.nothingSentFrom(p) {
			// Nothing of this drain above p is unacknowledged: only
			// what was there before this drain is read back.
			from = dp.from
		}
	}
	return floors, from
}

// commitMetaFor returns the metadata to store with a commit of ps at p.
func (d *drain) commitMetaFor(ctx context.Context, ps *partitionState, p int64) (string, bool, error) {
	ps.mu.Lock()
	cm := commitMeta{TopicID: d.ids[ps.tp.Topic], Writer: d.writer.own(), Acked: ps.lastAck}
	if ps.priorAck.After(cm.Acked) {
		cm.Acked = ps.priorAck
	}
	ps.mu.Unlock()
	if d.dd == nil {
		s, err := cm.encode()
		return s, false, err
	}
	cm.Hub = ps.hub
	if d.dd.final.Load() && ps.nothingSentFrom(p) && p > d.dd.presentMax(ps) {
		// Nothing this drain sent is unacknowledged (records left unsent
		// at its end were never published), and no event found in the
		// hub (published by an earlier drain) lies above p.
		cm.Clean = true
	} else {
		cm.Floors, cm.From = d.floorsFor(ps, p)
	}
	s, err := cm.encode()
	if err != nil && cm.Floors != nil {
		if !d.dd.warned.Swap(true) {
			d.logger.WarnContext(ctx, "deduplication: too many event hub partitions to store their sequence numbers with the commit; a drain after an unclean end sends records again", "hub", ps.hub, "partitions", len(cm.Floors), "err", err)
		}
		cm.Floors = nil
		s, err = cm.encode()
	}
	return s, cm.Clean, err
}

// presentMax is the highest offset of ps found in the hub, -1 if none.
func (dd *dedup) presentMax(ps *partitionState) int64 {
	dd.mu.Lock()
	defer dd.mu.Unlock()
	if dp := dd.parts[ps]; dp != nil {
		return dp.presentMax
	}
	return -1
}

// needsCleanMark reports whether ps must be committed again at p although
// p did not advance: the stored metadata is not clean and now can be.
func (d *drain) needsCleanMark(ps *partitionState, p int64) bool {
	if d.dd == nil || !d.dd.final.Load() || p < 0 || p != ps.lastCommitted() || !ps.nothingSentFrom(p) {
		return false
	}
	d.dd.mu.Lock()
	defer d.dd.mu.Unlock()
	dp := d.dd.parts[ps]
	return dp != nil && !dp.metaClean && !dp.unresolved && p > dp.presentMax
}

// committedMeta records whether the metadata just committed for ps is clean.
func (d *drain) committedMeta(ps *partitionState, clean bool) {
	if d.dd == nil {
		return
	}
	d.dd.mu.Lock()
	if dp := d.dd.parts[ps]; dp != nil {
		dp.metaClean = clean
	}
	d.dd.mu.Unlock()
}

// intentCommit commits, before anything is sent, each partition that has
// records to read (every partition when the drain follows) at its start
// offset with this drain's floors, so that a
// drain killed before its first commit is reconciled by the next one.
func (d *drain) intentCommit(ctx context.Context, problem func(string)) {
	offsets := make(map[TopicPartition]CommitOffset)
	for _, ps := range d.order {
		ps.mu.Lock()
		// A following drain may send on any partition, even one caught
		// up now.
		active := !ps.failed.Load() && (ps.start < ps.end || d.following())
		start := ps.start
		ps.mu.Unlock()
		if !active {
			continue
		}
		meta, _, err := d.commitMetaFor(ctx, ps, start)
		if err != nil {
			problem(fmt.Sprintf("%s: %v", ps.tp, err))
			continue
		}
		offsets[ps.tp] = CommitOffset{Offset: start, Metadata: meta}
	}
	if len(offsets) == 0 {
		return
	}
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	err := d.claim.CommitWithMetadata(ctx, offsets)
	if err != nil && ctx.Err() == nil {
		// Once more: without it, a drain whose every commit fails leaves
		// the previous clean mark, and its records are sent twice.
		err = d.claim.CommitWithMetadata(ctx, offsets)
	}
	if err != nil {
		// Sending without the floors stored would leave the previous
		// commit's metadata (perhaps a clean mark) for the next drain, which
		// would then not read back what this one sent: send nothing.
		err = fmt.Errorf("deduplication: storing the hub's sequence numbers before sending: %w; nothing sent, the next drain tries again", err)
		for tp := range offsets {
			d.states[tp].fail(err)
		}
		return
	}
	for tp, off := range offsets {
		ps := d.states[tp]
		ps.committedAt(off.Offset)
		d.committedMeta(ps, false)
		d.writer.wrote(tp)
	}
}

// foundCount is the number of records of ps not sent again because they
// were found in the hub.
func (d *drain) foundCount(ps *partitionState) int64 {
	if d.dd == nil {
		return 0
	}
	d.dd.mu.Lock()
	defer d.dd.mu.Unlock()
	if dp := d.dd.parts[ps]; dp != nil {
		return dp.found
	}
	return 0
}
