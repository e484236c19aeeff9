package mirror

// A drain that ends with a batch still refused (Event Hubs throttling at
// the namespace's quota, a send that failed) commits each partition below
// that batch, although the other hub partitions may have stored records
// above it. Without deduplication the next drain would publish those again;
// at the quota with hash partitioning a drain then spends most of its
// budget on records Event Hubs already holds, and the commit barely moves.
// So a process remembers, per partition, which records above its last
// commit Event Hubs acknowledged, and its next drain of that partition does
// not send them again when it starts at exactly that commit (nobody else
// moved the offset since) of the same topic (same id). With deduplication
// on, the read-back after the unclean end does this across processes.

// ackedKept bounds the offsets a Mirror remembers in all.
const ackedKept = 1 << 20

// ackedAbove are the offsets of one partition Event Hubs acknowledged
// above the group's commit when a drain of this process ended.
type ackedAbove struct {
	topicID   string
	committed int64
	offsets   map[int64]struct{}
}

// keepAcked remembers, at the end of a drain, the records of its
// partitions that Event Hubs acknowledged above their commit (deduplication
// off only; see the comment above).
func (d *drain) keepAcked() {
	if d.m.opts.Deduplicate {
		return
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	total := 0
	for _, a := range d.m.acked {
		total += len(a.offsets)
	}
	for _, ps := range d.order {
		if ps.isRecreated() || d.released[ps.tp] {
			delete(d.m.acked, ps.tp)
			continue
		}
		committed, offsets := ps.ackedAboveCommit()
		if old := d.m.acked[ps.tp]; old != nil {
			total -= len(old.offsets)
			delete(d.m.acked, ps.tp)
		}
		if len(offsets) == 0 || committed < 0 || total+len(offsets) > ackedKept {
			continue
		}
		total += len(offsets)
		d.m.acked[ps.tp] = &ackedAbove{topicID: d.ids[ps.tp.Topic], committed: committed, offsets: offsets}
	}
}

// takeAcked hands a partition that starts at its commit the records an
// earlier drain of this process had acknowledged above it.
func (d *drain) takeAcked(ps *partitionState) {
	d.m.mu.Lock()
	a := d.m.acked[ps.tp]
	delete(d.m.acked, ps.tp)
	d.m.mu.Unlock()
	if a == nil || d.m.opts.Deduplicate || a.topicID != d.ids[ps.tp.Topic] || ps.startCommitted != a.committed || ps.start != a.committed {
		return
	}
	ps.mu.Lock()
	ps.carried = a.offsets
	ps.mu.Unlock()
}

// forgetAcked drops what the process remembers of tps (an offset reset
// moved them).
func (m *Mirror) forgetAcked(tps []TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tp := range tps {
		delete(m.acked, tp)
	}
}

// carriedDone reports whether r was acknowledged by an earlier drain of
// this process (see ackedAbove) and, if so, marks it done without sending.
func (p *partitionState) carriedDone(r *Record) bool {
	// carried is set before the partition's reader starts and only that
	// reader deletes from it, so the reader may look at its length
	// without the lock, which the senders take to acknowledge.
	if len(p.carried) == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.carried[r.Offset]; !ok {
		return false
	}
	delete(p.carried, r.Offset)
	p.pending = append(p.pending, pendingRecord(r.Offset)|pendingDone|pendingAcked)
	p.next = r.Offset + 1
	p.carriedCount++
	return true
}

// ackedAboveCommit returns the partition's last commit and the offsets
// above it that Event Hubs acknowledged (in this drain, or in an earlier
// one and not reached by this drain).
func (p *partitionState) ackedAboveCommit() (int64, map[int64]struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]struct{})
	for _, r := range p.pending[p.head:] {
		if r.acked() && r.offset() >= p.committed {
			out[r.offset()] = struct{}{}
		}
	}
	for off := range p.carried {
		if off >= p.committed {
			out[off] = struct{}{}
		}
	}
	return p.committed, out
}

// carriedTotal is the number of records not sent again because an earlier
// drain of this process had them acknowledged.
func (p *partitionState) carriedTotal() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.carriedCount
}
