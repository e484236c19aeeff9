package mirror

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// partitionState tracks one Kafka partition during one drain: which of the
// records handed to Event Hubs have been acknowledged, and so which offset
// may be committed. The commit point is the offset of the first record not
// yet acknowledged (or one past the last record read when all are), so an
// offset is never committed before every record below it was accepted.
type partitionState struct {
	tp  TopicPartition
	hub string

	// Fixed when the drain starts.
	startCommitted int64 // committed offset when the drain started, or NoOffset
	start          int64 // first offset this drain reads
	lagBefore      int64
	gap            int64
	note           string // what the drain decided at its start, for the report

	mu        sync.Mutex
	pending   []pendingRecord // handed to senders, not yet popped; offset order
	head      int             // pending[:head] are done and popped
	next      int64           // commit point once every pending record is done
	committed int64           // last offset committed by this drain, or startCommitted
	end       int64           // latest known end offset
	// failed is set, with err, under mu; senders read it for every
	// record without taking mu.
	failed atomic.Bool
	err    error
	// changedLog is set when the topic was deleted and recreated during
	// the drain: nothing more is committed.
	changedLog bool
	held       bool // reading stopped before a record it must not pass
	// pausedNow: the topic was paused during the drain; reading stopped.
	pausedNow bool
	// carried are offsets above the start that an earlier drain of this
	// process had Event Hubs acknowledge (acked.go); carriedCount counts
	// those not sent again.
	carried      map[int64]struct{}
	carriedCount int64
	// verified is the read position below which every record was fetched
	// before a topic listing confirmed the topic's id: nothing at or past
	// it is committed (a recreated topic reuses offsets).
	verified int64
	records  int64
	bytes    int64
	// lastAck is when Event Hubs last acknowledged one of its records;
	// priorAck the time an earlier drain stored with the committed offset
	// (commit metadata "ack"), carried into this drain's commits.
	lastAck  time.Time
	priorAck time.Time
	skipped  []int64
	first    int64
	last     int64
	// sentMax is the highest offset whose event was part of a send, -1
	// if none; tracked with deduplication on.
	sentMax int64
}

// pendingRecord is a record handed over, in 8 bytes: its offset, and in
// the two top bits whether it is done and whether it is done because Event
// Hubs accepted it (not skipped). A drain of 100 B records tracks hundreds
// of thousands of them: as a struct of 16 bytes they were 17 MB of a 134 MB
// heap (profile of the 100 B keyed bench case, 2026-12-04). Kafka offsets
// stay far below 2^62.
type pendingRecord uint64

const (
	pendingDone   pendingRecord = 1 << 63
	pendingAcked  pendingRecord = 1 << 62
	pendingOffset               = pendingAcked - 1
)

// offset is the record's offset.
func (r pendingRecord) offset() int64 { return int64(r & pendingOffset) }

// done reports whether the record needs nothing more.
func (r pendingRecord) done() bool { return r&pendingDone != 0 }

// acked reports whether Event Hubs accepted the record.
func (r pendingRecord) acked() bool { return r&pendingAcked != 0 }

func newPartitionState(tp TopicPartition, hub string, committed int64) *partitionState {
	return &partitionState{tp: tp, hub: hub, startCommitted: committed, committed: committed, first: -1, last: -1, sentMax: -1}
}

// begin sets the first offset to read.
func (p *partitionState) begin(start, end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start, p.next, p.end, p.verified = start, start, end, start
	p.lagBefore = max(end-start, 0)
}

// add records that r was handed to a sender.
func (p *partitionState) add(r *Record) {
	p.mu.Lock()
	p.pending = append(p.pending, pendingRecord(r.Offset))
	p.next = r.Offset + 1
	p.mu.Unlock()
}

// addRun records that the records at offsets, in order, were handed to
// senders.
func (p *partitionState) addRun(offsets []int64) {
	p.mu.Lock()
	for _, o := range offsets {
		p.pending = append(p.pending, pendingRecord(o))
	}
	p.next = offsets[len(offsets)-1] + 1
	p.mu.Unlock()
}

// addDone records that r needs no sending: its event was found in the hub.
func (p *partitionState) addDone(r *Record) {
	p.mu.Lock()
	p.pending = append(p.pending, pendingRecord(r.Offset)|pendingDone)
	p.next = r.Offset + 1
	p.mu.Unlock()
}

// advance moves the commit point past records the fetch skipped (control
// records, aborted transactions) or past a gap the policy accepted.
func (p *partitionState) advance(next int64) {
	p.mu.Lock()
	p.next = max(p.next, next)
	p.mu.Unlock()
}

// setEnd records the latest end offset seen.
func (p *partitionState) setEnd(end int64) {
	p.mu.Lock()
	p.end = end
	p.mu.Unlock()
}

func (p *partitionState) find(offset int64) *pendingRecord {
	rest := p.pending[p.head:]
	i := sort.Search(len(rest), func(i int) bool { return rest[i].offset() >= offset })
	if i < len(rest) && rest[i].offset() == offset {
		return &rest[i]
	}
	return nil
}

// ack marks the records of evs, all of p's and in offset order, accepted
// by Event Hubs at now.
func (p *partitionState) ack(evs []batched, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rest := p.pending[p.head:]
	i := sort.Search(len(rest), func(i int) bool { return rest[i].offset() >= evs[0].offset })
	for _, ev := range evs {
		offset := ev.offset
		for i < len(rest) && rest[i].offset() < offset {
			i++
		}
		if i < len(rest) && rest[i].offset() == offset {
			rest[i] |= pendingDone | pendingAcked
		}
		p.records++
		p.bytes += ev.size
		if p.first < 0 || offset < p.first {
			p.first = offset
		}
		p.last = max(p.last, offset)
	}
	p.lastAck = now
}

// skip marks the record at offset left out under the skip policy.
func (p *partitionState) skip(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.find(offset); r != nil {
		*r |= pendingDone
	}
	p.skipped = append(p.skipped, offset)
}

// fail stops the partition: nothing at or after the failed record will be
// committed by this drain. The first error is kept.
func (p *partitionState) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.failed.Load() {
		p.err = err
		p.failed.Store(true)
	}
}

// recreated stops reading the partition because its topic changed under
// the drain; it is never committed again by this drain. Records already
// queued are still sent (they are valid records of the topic they were
// read from), so the error is kept without failing the queued records.
func (p *partitionState) recreated(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.changedLog && p.err == nil {
		p.err = err
	}
	p.changedLog = true
}

// hold stops reading the partition before a record it must not pass (an
// oversized record under the fail policy); records queued before it are
// still sent and committed.
func (p *partitionState) hold(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	p.held = true
}

// halted reports whether reading the partition must stop: it failed, its
// topic changed, or it is held.
func (p *partitionState) halted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed.Load() || p.changedLog || p.held || p.pausedNow
}

func (p *partitionState) isRecreated() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changedLog
}

func (p *partitionState) isFailed() bool { return p.failed.Load() }

// sending records that the event of the record at offset is being sent.
func (p *partitionState) sending(offset int64) {
	p.mu.Lock()
	p.sentMax = max(p.sentMax, offset)
	p.mu.Unlock()
}

// nothingSentFrom reports whether no event of a record at or above offset
// was ever sent: each was acknowledged below it, or left unsent.
func (p *partitionState) nothingSentFrom(offset int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return offset >= p.next || p.sentMax < offset
}

// readMark returns the read position: every record below it was fetched
// before this call.
func (p *partitionState) readMark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// confirm records that the topic's identity was confirmed after every record
// below mark had been fetched.
func (p *partitionState) confirm(mark int64) {
	p.mu.Lock()
	p.verified = max(p.verified, mark)
	p.mu.Unlock()
}

// commitPoint pops acknowledged records and returns the offset that may be
// committed now: the first record not yet done, capped at the verified read
// position.
func (p *partitionState) commitPoint() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.head < len(p.pending) && p.pending[p.head].done() {
		p.head++
	}
	point := p.next
	if p.head == len(p.pending) {
		p.pending, p.head = p.pending[:0], 0
	} else {
		if p.head > 1024 && p.head > len(p.pending)/2 {
			p.pending = append(p.pending[:0], p.pending[p.head:]...)
			p.head = 0
		}
		point = p.pending[p.head].offset()
	}
	return min(point, p.verified)
}

// unverified reports whether acknowledged work past the verified position
// waits for a topic identity check.
func (p *partitionState) unverified() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next > p.verified
}

// committedAt records a successful commit.
func (p *partitionState) committedAt(offset int64) {
	p.mu.Lock()
	p.committed = max(p.committed, offset)
	p.mu.Unlock()
}

func (p *partitionState) lastCommitted() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.committed
}

func (p *partitionState) lastVerified() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.verified
}

// resetCommitted forgets the committed offset the drain started with (it
// belongs to no log the drain reads), so the next commit replaces it.
func (p *partitionState) resetCommitted() {
	p.mu.Lock()
	p.committed = NoOffset
	p.mu.Unlock()
}
