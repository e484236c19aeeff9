package faults

// The duplicate bound: which drains count as faulted, and the ledger of the
// records in flight during them.

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/mirror"
)

// inject counts one fault injection; drains overlapping it count against
// the duplicate bound.
func (e *env) inject(what string) {
	e.injected.Add(1)
	e.log.Info("fault injected", "fault", what)
}

// accounted runs one drain-like unit of work (a drain, an invocation) and,
// when it was faulted (by its own account, or because a fault was injected
// while it ran), adds the records in flight during it to the duplicate
// bound.
func (e *env) accounted(work func() (faulted bool, err error)) error {
	e.drains.Add(1)
	before := e.ledger.open(e)
	injected := e.injected.Load()
	faulted, err := work()
	if e.injected.Load() != injected {
		faulted = true
	}
	e.ledger.close(e, before, faulted)
	return err
}

// partitionOffsets are one partition's log bounds and the group's commit.
type partitionOffsets struct {
	start, end int64
	committed  int64 // mirror.NoOffset when none
}

// offsets reads, at the broker, every scenario partition's log bounds and
// the group's committed offsets; ok is false when the broker is down.
func (e *env) offsets() (map[mirror.TopicPartition]partitionOffsets, bool) {
	out := map[mirror.TopicPartition]partitionOffsets{}
	ok := e.withKafka(func(c *kfake.Cluster) {
		var commits map[string]map[int32]kfake.GroupCommit
		if gi := c.GroupInfo(e.group); gi != nil {
			commits = gi.Commits
		}
		for _, topic := range e.cfg.Topics {
			for _, pi := range c.PartitionInfos(topic) {
				po := partitionOffsets{start: pi.LogStartOffset, end: pi.HighWatermark, committed: mirror.NoOffset}
				if gc, ok := commits[topic][pi.Partition]; ok {
					po.committed = gc.Offset
				}
				out[mirror.TopicPartition{Topic: topic, Partition: pi.Partition}] = po
			}
		}
	})
	return out, ok
}

// boundLedger accumulates the duplicate bound: for every faulted drain, the
// records that were in flight during it, i.e. for each partition the records
// between the group's committed offset when the drain started (or the log
// start) and the log end when it finished. Only those records can have been
// handed to Event Hubs without their offset being committed, so only they
// can be sent again, once per faulted drain.
type boundLedger struct {
	mu      sync.Mutex
	total   int64
	faulted int
	last    map[mirror.TopicPartition]partitionOffsets // last snapshot taken while the broker was up
	pending []map[mirror.TopicPartition]partitionOffsets
}

// open snapshots the offsets before a drain (the last good snapshot when the
// broker is down, which is older and so conservative).
func (l *boundLedger) open(e *env) map[mirror.TopicPartition]partitionOffsets {
	snap, ok := e.offsets()
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.last = snap
		return snap
	}
	return l.last
}

// close adds the drain's in-flight records when it was faulted. When the
// broker is down the end offsets are taken at the next snapshot that
// succeeds (later, so conservative).
func (l *boundLedger) close(e *env, before map[mirror.TopicPartition]partitionOffsets, faulted bool) {
	after, ok := e.offsets()
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.last = after
		for _, p := range l.pending {
			l.total += inFlight(p, after)
		}
		l.pending = nil
	}
	if !faulted || before == nil {
		return
	}
	l.faulted++
	if !ok {
		l.pending = append(l.pending, before)
		return
	}
	l.total += inFlight(before, after)
}

// addWindow adds the records in flight between two snapshots (a fault that
// spans several drains, or a kill).
func (l *boundLedger) addWindow(before, after map[mirror.TopicPartition]partitionOffsets) {
	l.addWindows(before, after, 1)
}

// addWindows adds the records in flight between two snapshots once for
// each of n faulted drains that ran between them (a catch-up run's drains).
func (l *boundLedger) addWindows(before, after map[mirror.TopicPartition]partitionOffsets, n int) {
	if n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faulted += n
	l.total += int64(n) * inFlight(before, after)
}

func inFlight(before, after map[mirror.TopicPartition]partitionOffsets) int64 {
	var n int64
	for tp, a := range after {
		b, ok := before[tp]
		from := a.start
		if ok {
			from = max(b.committed, b.start)
		}
		n += max(a.end-from, 0)
	}
	return n
}

func (l *boundLedger) bound() (int64, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.faulted
}
