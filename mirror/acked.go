package mirror

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
)

// A drain that ends with a batch still refused (Event Hubs throttling at
// the namespace's quota, a send that failed) commits each partition below
// that batch, although the other hub partitions may have stored records
// above it. Without deduplication the next drain would publish those again;
// at the quota with hash partitioning a drain then spends most of its
// budget on records Event Hubs already holds, and the commit barely moves.
// So a process remembers, per partition, which records above its last
// commit Event Hubs acknowledged, and its next drain of that partition does
// not send them again when it starts at that very commit: the same topic
// (same id), the same offset, and the commit still carries the writer
// token it had when the drain ended (commitMeta.Writer). Any other writer
// since (another process's drain, an offset reset, a tool) replaced the
// token, so an offset moved away and back (an A→B→A of the value, as a
// reset to earliest on another instance does) is not taken for it. With
// deduplication on, the read-back after the unclean end does this across
// processes.

// ackedKept bounds the offsets a Mirror remembers in all.
const ackedKept = 1 << 20

// ackedAbove are the offsets of one partition Event Hubs acknowledged
// above the group's commit when a drain of this process ended.
type ackedAbove struct {
	topicID   string
	committed int64
	// writer is the writer token of the commit at committed.
	writer  string
	offsets map[int64]struct{}
}

// commitWriter is a drain's writer token (drawn at its first use) and,
// per partition, the token of the commit that stands: the one read at the
// drain's start, replaced by the drain's own once it committed.
type commitWriter struct {
	once  sync.Once
	token string

	mu sync.Mutex
	at map[TopicPartition]string
}

// own returns the drain's token.
func (w *commitWriter) own() string {
	w.once.Do(func() {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		w.token = hex.EncodeToString(b[:])
	})
	return w.token
}

// found records the writer token of tp's commit read at the drain's start.
func (w *commitWriter) found(tp TopicPartition, token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = make(map[TopicPartition]string)
	}
	w.at[tp] = token
}

// wrote records that the drain committed tp.
func (w *commitWriter) wrote(tp TopicPartition) { w.found(tp, w.own()) }

// of returns the writer token of tp's commit that stands ("" unknown).
func (w *commitWriter) of(tp TopicPartition) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at[tp]
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
		writer := d.writer.of(ps.tp)
		if len(offsets) == 0 || committed < 0 || writer == "" || total+len(offsets) > ackedKept {
			continue
		}
		total += len(offsets)
		d.m.acked[ps.tp] = &ackedAbove{topicID: d.ids[ps.tp.Topic], committed: committed, writer: writer, offsets: offsets}
	}
}

// takeAcked hands a partition that starts at its commit the records an
// earlier drain of this process had acknowledged above it, when that
// commit is still the very one the earlier drain left (its writer token).
func (d *drain) takeAcked(ps *partitionState) {
	d.m.mu.Lock()
	a := d.m.acked[ps.tp]
	delete(d.m.acked, ps.tp)
	d.m.mu.Unlock()
	if a == nil || d.m.opts.Deduplicate || a.topicID != d.ids[ps.tp.Topic] || ps.startCommitted != a.committed || ps.start != a.committed || a.writer != d.writer.of(ps.tp) {
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
