package emulator

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// hub is one event hub: its configuration and partitions.
type hub struct {
	cfg            HubConfig
	createdAt      time.Time
	consumerGroups map[string]string // lower-case name → name
	partitions     []*partition
	nextPartition  atomic.Uint64 // round-robin cursor
}

func newHub(cfg HubConfig, now time.Time) *hub {
	h := &hub{
		cfg:            cfg,
		createdAt:      now,
		consumerGroups: map[string]string{strings.ToLower(DefaultConsumerGroup): DefaultConsumerGroup},
	}
	for _, cg := range cfg.ConsumerGroups {
		h.consumerGroups[strings.ToLower(cg)] = cg
	}
	for i := range cfg.PartitionCount {
		h.partitions = append(h.partitions, &partition{
			id:        i,
			retention: cfg.Retention,
			maxBytes:  cfg.MaxPartitionBytes,
			signal:    make(chan struct{}),
			lastSeq:   -1,
			lastOff:   -1,
			receivers: map[string][]*link{},
		})
	}
	return h
}

// record is one stored event. msg is the event's encoded AMQP message exactly
// as the producer sent it; it aliases the delivery's buffer and is never
// modified. maStart/maEnd locate the message-annotations section (equal when
// there is none: then they mark where one must be inserted).
type record struct {
	seq      int64
	offset   int64
	enqueued int64 // milliseconds since the Unix epoch
	msg      []byte
	key      string
	maStart  int32
	maEnd    int32
}

// partition stores the events of one partition in sequence order.
type partition struct {
	id        int
	retention time.Duration
	maxBytes  int64

	mu            sync.Mutex
	events        []record // events[head:] are retained
	head          int
	nextSeq       int64
	nextOffset    int64
	retainedBytes int64
	lastSeq       int64 // -1 until the first event
	lastOff       int64
	lastEnqueued  int64
	storedEvents  int64
	storedBytes   int64
	signal        chan struct{} // closed and replaced on every append
	log           *partitionLog // the data directory's log, or nil

	// receivers are the open consumer links per lower-case consumer group,
	// guarded by rmu (owner-level bookkeeping).
	rmu       sync.Mutex
	receivers map[string][]*link
}

// appendEvents stores msgs (sections located in locs) with the same enqueued
// time and partition key and wakes waiting consumers. With a data directory
// the events are written to the partition's log first; if that fails nothing
// is stored.
func (p *partition) appendEvents(msgs [][]byte, locs [][2]int32, key string, now time.Time) error {
	if len(msgs) == 0 {
		return nil
	}
	ms := now.UnixMilli()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trimLocked(ms)
	start := len(p.events)
	seq, off := p.nextSeq, p.nextOffset
	for i, m := range msgs {
		p.events = append(p.events, record{
			seq:      seq,
			offset:   off,
			enqueued: ms,
			msg:      m,
			key:      key,
			maStart:  locs[i][0],
			maEnd:    locs[i][1],
		})
		seq++
		off += int64(len(m))
	}
	if p.log != nil {
		if err := p.log.write(p.events[start:]); err != nil {
			clear(p.events[start:])
			p.events = p.events[:start]
			return fmt.Errorf("partition %d: write to the data directory: %w", p.id, err)
		}
	}
	p.lastSeq, p.lastOff, p.lastEnqueued = seq-1, p.events[len(p.events)-1].offset, ms
	p.nextSeq, p.nextOffset = seq, off
	p.retainedBytes += off - p.events[start].offset
	p.storedBytes += off - p.events[start].offset
	p.storedEvents += int64(len(msgs))
	p.trimBytesLocked()
	close(p.signal)
	p.signal = make(chan struct{})
	return nil
}

// trimLocked drops events older than the retention period.
func (p *partition) trimLocked(nowMs int64) {
	cutoff := nowMs - p.retention.Milliseconds()
	for p.head < len(p.events) && p.events[p.head].enqueued < cutoff {
		p.dropHeadLocked()
	}
	p.compactLocked()
}

func (p *partition) trimBytesLocked() {
	if p.maxBytes <= 0 {
		return
	}
	for p.head < len(p.events) && p.retainedBytes > p.maxBytes {
		p.dropHeadLocked()
	}
	p.compactLocked()
}

func (p *partition) dropHeadLocked() {
	p.retainedBytes -= int64(len(p.events[p.head].msg))
	p.events[p.head] = record{} // let the delivery buffer be collected
	p.head++
}

// compactLocked moves the retained events to the front once the dropped
// prefix is large, keeping the slice's capacity.
func (p *partition) compactLocked() {
	if p.head == 0 || (p.head < 1024 && p.head < len(p.events)) || p.head < len(p.events)-p.head {
		return
	}
	n := copy(p.events, p.events[p.head:])
	clear(p.events[n:])
	p.events = p.events[:n]
	p.head = 0
}

// beginSeqLocked is the sequence number of the oldest retained event, or the
// next sequence number when nothing is retained.
func (p *partition) beginSeqLocked() int64 {
	if p.head < len(p.events) {
		return p.events[p.head].seq
	}
	return p.nextSeq
}

// read copies up to max retained events starting at sequence number from
// into buf. It returns the events, the sequence number to read next, and a
// channel that is closed when new events arrive (useful when none were found).
func (p *partition) read(from int64, max int, buf []record, now time.Time) ([]record, int64, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trimLocked(now.UnixMilli())
	begin := p.beginSeqLocked()
	if from < begin {
		from = begin
	}
	i := p.head + int(from-begin)
	for ; i < len(p.events) && len(buf) < max; i++ {
		buf = append(buf, p.events[i])
	}
	if len(buf) > 0 {
		from = buf[len(buf)-1].seq + 1
	}
	return buf, from, p.signal
}

// runtimeInfo returns the partition's last enqueued event as receiver
// runtime metrics report it (sequence number -1 and offset -1 when empty).
func (p *partition) runtimeInfo() (lastSeq, lastOffset, lastEnqueued int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSeq, p.lastOff, p.lastEnqueued
}

// startPosition is a parsed selector filter: which field is compared, the
// operator and the value.
type startPosition struct {
	field     string // "offset", "sequence-number" or "enqueued-time"
	inclusive bool
	latest    bool  // '@latest'
	value     int64 // offset, sequence number or Unix milliseconds
}

// resolve returns the sequence number of the first event a consumer with
// start position sp receives.
func (p *partition) resolve(sp startPosition, now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trimLocked(now.UnixMilli())
	if sp.latest {
		return p.nextSeq
	}
	retained := p.events[p.head:]
	switch sp.field {
	case "sequence-number":
		if sp.inclusive {
			return sp.value
		}
		return sp.value + 1
	case "offset":
		i := sort.Search(len(retained), func(i int) bool {
			if sp.inclusive {
				return retained[i].offset >= sp.value
			}
			return retained[i].offset > sp.value
		})
		if i < len(retained) {
			return retained[i].seq
		}
		return p.nextSeq
	default: // enqueued-time
		i := sort.Search(len(retained), func(i int) bool {
			if sp.inclusive {
				return retained[i].enqueued >= sp.value
			}
			return retained[i].enqueued > sp.value
		})
		if i < len(retained) {
			return retained[i].seq
		}
		return p.nextSeq
	}
}

// partitionInfo is a snapshot of a partition for management and stats.
type partitionInfo struct {
	beginSeq       int64
	lastSeq        int64
	lastOffset     int64
	lastEnqueued   int64
	empty          bool
	storedEvents   int64
	storedBytes    int64
	retainedEvents int
	retainedBytes  int64
}

func (p *partition) info(now time.Time) partitionInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trimLocked(now.UnixMilli())
	return partitionInfo{
		beginSeq:       p.beginSeqLocked(),
		lastSeq:        p.lastSeq,
		lastOffset:     p.lastOff,
		lastEnqueued:   p.lastEnqueued,
		empty:          p.head == len(p.events),
		storedEvents:   p.storedEvents,
		storedBytes:    p.storedBytes,
		retainedEvents: len(p.events) - p.head,
		retainedBytes:  p.retainedBytes,
	}
}

// snapshot returns copies of the retained records.
func (p *partition) snapshot(now time.Time) []record {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trimLocked(now.UnixMilli())
	return append([]record(nil), p.events[p.head:]...)
}
