package mirror

import (
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
	"sync"
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
	failed    bool
	err       error
	// changedLog is set when the topic was deleted and recreated during
	// the drain: nothing more is committed.
	changedLog bool
	lastAcked  *ackedRecord // last acknowledged record popped, for the commit guard
	records    int64
	bytes      int64
	skipped    []int64
	first      int64
	last       int64
}

type pendingRecord struct {
	offset int64
	done   bool
	acked  bool // done because Event Hubs accepted it (not skipped)
	fp     fingerprint
}

// fingerprint identifies a record's content, so that a commit can check that
// the record at an offset is still the one that was mirrored: a topic
// deleted and recreated under the same name reuses offsets, and Kafka
// commits name topics, not topic ids.
type fingerprint struct {
	timestamp int64
	size      int
	crc       uint32
}

func fingerprintOf(r *Record) fingerprint {
	h := crc32.NewIEEE()
	h.Write(r.Key)
	h.Write([]byte{0})
	h.Write(r.Value)
	return fingerprint{timestamp: r.Time.UnixMilli(), size: len(r.Value), crc: h.Sum32()}
}

// commitMetadataPrefix starts the metadata the mirror stores with each
// commit: the fingerprint of the last record mirrored below the committed
// offset. The next drain checks it, so a commit that landed on a topic
// deleted and recreated under the same name is recognised.
const commitMetadataPrefix = "ehmirror/1 "

// commitMetadata encodes the last acknowledged record for the commit.
func (a *ackedRecord) commitMetadata() string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%slast=%d ts=%d size=%d crc=%08x", commitMetadataPrefix, a.offset, a.fp.timestamp, a.fp.size, a.fp.crc)
}

// parseCommitMetadata decodes commitMetadata; ok is false for metadata the
// mirror did not write.
func parseCommitMetadata(s string) (a ackedRecord, ok bool) {
	rest, found := strings.CutPrefix(s, commitMetadataPrefix)
	if !found {
		return a, false
	}
	n, err := fmt.Sscanf(rest, "last=%d ts=%d size=%d crc=%x", &a.offset, &a.fp.timestamp, &a.fp.size, &a.fp.crc)
	return a, err == nil && n == 4
}

// acked is the last acknowledged record below the commit point; the commit
// guard checks that it is still in the log.
type ackedRecord struct {
	offset int64
	fp     fingerprint
}

func newPartitionState(tp TopicPartition, hub string, committed int64) *partitionState {
	return &partitionState{tp: tp, hub: hub, startCommitted: committed, committed: committed, first: -1, last: -1}
}

// begin sets the first offset to read.
func (p *partitionState) begin(start, end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start, p.next, p.end = start, start, end
	p.lagBefore = max(end-start, 0)
}

// add records that r was handed to a sender.
func (p *partitionState) add(r *Record) {
	p.mu.Lock()
	p.pending = append(p.pending, pendingRecord{offset: r.Offset, fp: fingerprintOf(r)})
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
	i := sort.Search(len(rest), func(i int) bool { return rest[i].offset >= offset })
	if i < len(rest) && rest[i].offset == offset {
		return &rest[i]
	}
	return nil
}

// ack marks the record at offset accepted by Event Hubs.
func (p *partitionState) ack(offset int64, size int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.find(offset); r != nil {
		r.done, r.acked = true, true
	}
	p.records++
	p.bytes += int64(size)
	if p.first < 0 || offset < p.first {
		p.first = offset
	}
	p.last = max(p.last, offset)
}

// skip marks the record at offset left out under the skip policy.
func (p *partitionState) skip(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.find(offset); r != nil {
		r.done = true
	}
	p.skipped = append(p.skipped, offset)
}

// fail stops the partition: nothing at or after the failed record will be
// committed by this drain. The first error is kept.
func (p *partitionState) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.failed {
		p.failed, p.err = true, err
	}
}

// recreated fails the partition because its log changed under the drain;
// it is never committed again by this drain.
func (p *partitionState) recreated(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changedLog = true
	if !p.failed {
		p.failed, p.err = true, err
	}
}

func (p *partitionState) isRecreated() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changedLog
}

func (p *partitionState) isFailed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// commitPoint pops acknowledged records and returns the offset that may be
// committed now, with the last acknowledged record below it (nil if none).
func (p *partitionState) commitPoint() (int64, *ackedRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.head < len(p.pending) && p.pending[p.head].done {
		if r := p.pending[p.head]; r.acked {
			p.lastAcked = &ackedRecord{offset: r.offset, fp: r.fp}
		}
		p.head++
	}
	if p.head == len(p.pending) {
		p.pending, p.head = p.pending[:0], 0
		return p.next, p.lastAcked
	}
	if p.head > 1024 && p.head > len(p.pending)/2 {
		p.pending = append(p.pending[:0], p.pending[p.head:]...)
		p.head = 0
	}
	return p.pending[p.head].offset, p.lastAcked
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
