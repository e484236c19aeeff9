package verify

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/ehmirror/ehmirror/mirror"
)

// maxExamples bounds the findings listed per kind.
const maxExamples = 5

// provenance names one Kafka record.
type provenance struct {
	tp     mirror.TopicPartition
	offset int64
}

// orderKey groups the events whose relative order the mirror keeps within
// one Event Hubs partition.
type orderKey struct {
	tp  mirror.TopicPartition
	key uint64
}

// partitionCheck is the state of one Event Hubs partition's read; it is
// used by one goroutine.
type partitionCheck struct {
	hub  string
	part int32
	// last is the highest offset seen per order group.
	last map[orderKey]int64
	// dups are records seen here more than once overall.
	dups map[provenance]struct{}
}

// checker compares events with the Kafka snapshot. Its methods are safe for
// concurrent use.
type checker struct {
	snap         *snapshot
	partitioning mirror.Partitioning

	mu       sync.Mutex
	topics   map[string]*TopicResult
	hubs     map[string]*HubResult // by lower-case name
	examples map[string][]string
	more     map[string]int
}

func newChecker(snap *snapshot, partitioning mirror.Partitioning) *checker {
	c := &checker{
		snap:         snap,
		partitioning: partitioning,
		topics:       make(map[string]*TopicResult),
		hubs:         make(map[string]*HubResult),
		examples:     make(map[string][]string),
		more:         make(map[string]int),
	}
	for _, ps := range snap.parts {
		tr := c.topics[ps.tp.Topic]
		if tr == nil {
			tr = &TopicResult{Topic: ps.tp.Topic, Hub: ps.hub, Lag: -1}
			if snap.lagKnown {
				tr.Lag = 0
			}
			c.topics[ps.tp.Topic] = tr
		}
		tr.Partitions++
		tr.KafkaRecords += ps.read
		if snap.lagKnown {
			if ps.committed == mirror.NoOffset {
				tr.Lag += ps.end - ps.start
			} else {
				tr.Lag += max(ps.end-ps.committed, 0)
			}
		}
		if ps.stoppedAt >= 0 {
			c.example("note", fmt.Sprintf("kafka %s: nothing readable from offset %d to the end offset %d (transaction markers or aborted records?)", ps.tp, ps.stoppedAt, ps.end))
		}
		if c.hubs[strings.ToLower(ps.hub)] == nil {
			c.hubs[strings.ToLower(ps.hub)] = &HubResult{Hub: ps.hub}
		}
	}
	return c
}

// hubNames returns the hubs to read, sorted.
func (c *checker) hubNames() []string {
	var names []string
	for _, h := range c.hubs {
		names = append(names, h.Hub)
	}
	sort.Strings(names)
	return names
}

func (c *checker) hub(name string) *HubResult { return c.hubs[strings.ToLower(name)] }

// example records a finding of kind, keeping the first maxExamples.
// c.mu must be held, or the checker not yet shared.
func (c *checker) example(kind, text string) {
	if len(c.examples[kind]) < maxExamples {
		c.examples[kind] = append(c.examples[kind], text)
		return
	}
	c.more[kind]++
}

func (c *checker) newPartition(hub string, part int32) *partitionCheck {
	return &partitionCheck{hub: hub, part: part, last: make(map[orderKey]int64), dups: make(map[provenance]struct{})}
}

func (c *checker) hubError(hub, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hub(hub).Error = msg
}

func (c *checker) incomplete(hub, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hub(hub)
	h.Incomplete = append(h.Incomplete, msg)
}

func (c *checker) hubPartitions(hub string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hub(hub).Partitions = n
}

// observe checks one event read from pc's partition, in sequence order.
func (c *checker) observe(pc *partitionCheck, seq int64, body []byte, props map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hr := c.hub(pc.hub)
	hr.Events++
	rec, err := mirror.RecordFromEvent(body, props)
	// Unreadable header properties are a header mismatch of an event
	// whose provenance is known, not a foreign event.
	badHeaders := errors.Is(err, mirror.ErrHeaderProperties)
	if err != nil && !badHeaders {
		hr.Foreign++
		return
	}
	tr := c.topics[rec.Topic]
	if tr == nil {
		hr.OtherTopics++
		return
	}
	tr.Events++
	at := fmt.Sprintf("%s/%d/%d", pc.hub, pc.part, seq)
	tp := rec.TopicPartition()
	if !strings.EqualFold(tr.Hub, pc.hub) {
		tr.Misrouted++
		c.example("misrouted", fmt.Sprintf("misrouted: %s/%d found in hub %s (event %s), want hub %s", tp, rec.Offset, pc.hub, at, tr.Hub))
		return
	}
	ps := c.snap.parts[tp]
	switch {
	case ps == nil:
		tr.Unexpected++
		c.example("unexpected", fmt.Sprintf("unexpected: event %s names %s/%d, a partition Kafka does not have", at, tp, rec.Offset))
		return
	case rec.Offset < ps.start:
		tr.BeforeLogStart++
		return
	case rec.Offset >= ps.end:
		tr.BeyondSnapshot++
		return
	}
	ri := ps.rec(rec.Offset)
	if !ri.present {
		tr.Unexpected++
		c.example("unexpected", fmt.Sprintf("unexpected: event %s names %s/%d, which Kafka did not return (aborted or compacted?)", at, tp, rec.Offset))
		return
	}
	prov := provenance{tp: tp, offset: rec.Offset}
	ri.seen++
	seenHere := false
	if ri.seen == 1 {
		ri.firstPart = pc.part
	} else {
		tr.Duplicates++
		c.example("duplicate", fmt.Sprintf("duplicate: %s/%d seen %d times (again as event %s)", tp, rec.Offset, ri.seen, at))
		_, again := pc.dups[prov]
		seenHere = ri.firstPart == pc.part || again
		pc.dups[prov] = struct{}{}
	}
	key := c.snap.digestValue(rec.Key)
	if c.snap.digestValue(rec.Value) != ri.value {
		tr.BodyMismatches++
		c.example("body", fmt.Sprintf("body mismatch: %s/%d (event %s) body %q", tp, rec.Offset, at, clip(rec.Value)))
	}
	if key != ri.key {
		tr.KeyMismatches++
		c.example("key", fmt.Sprintf("key mismatch: %s/%d (event %s) key %q", tp, rec.Offset, at, clip(rec.Key)))
	}
	if badHeaders {
		tr.HeaderMismatches++
		c.example("headers", fmt.Sprintf("header mismatch: %s/%d (event %s): %v", tp, rec.Offset, at, err))
	} else if c.snap.digestHeaders(rec.Headers) != ri.headers {
		tr.HeaderMismatches++
		c.example("headers", fmt.Sprintf("header mismatch: %s/%d (event %s) has %d headers", tp, rec.Offset, at, len(rec.Headers)))
	}
	if seenHere || c.partitioning == mirror.PartitionRoundRobin {
		return
	}
	ok := orderKey{tp: tp, key: key}
	if c.partitioning == mirror.PartitionPreserve {
		ok.key = 0
	}
	last, seen := pc.last[ok]
	if seen && rec.Offset < last {
		tr.OrderViolations++
		what := "key " + fmt.Sprintf("%q", clip(rec.Key))
		if c.partitioning == mirror.PartitionPreserve {
			what = "the partition"
		}
		c.example("order", fmt.Sprintf("out of order: %s/%d (%s) came after offset %d in hub %s partition %d (event %s)", tp, rec.Offset, what, last, pc.hub, pc.part, at))
		return
	}
	pc.last[ok] = rec.Offset
}

// clip shortens a value for a finding.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// report counts the records no event carried and builds the report.
func (c *checker) report() *Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	tps := make([]mirror.TopicPartition, 0, len(c.snap.parts))
	for tp := range c.snap.parts {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	for _, tp := range tps {
		ps := c.snap.parts[tp]
		tr := c.topics[tp.Topic]
		var missing, pending ranges
		for i := range ps.recs {
			ri := &ps.recs[i]
			if !ri.present || ri.seen > 0 {
				continue
			}
			off := ps.start + int64(i)
			if ps.committed != mirror.NoOffset && off >= ps.committed {
				tr.Pending++
				pending.add(off)
			} else {
				tr.Missing++
				missing.add(off)
			}
		}
		if len(missing) > 0 {
			c.example("missing", fmt.Sprintf("missing: %s offsets %s", tp, missing))
		}
		if len(pending) > 0 {
			c.example("pending", fmt.Sprintf("pending (after the committed offset %d): %s offsets %s", ps.committed, tp, pending))
		}
	}
	rep := &Report{Partitioning: c.partitioning}
	for _, name := range c.snap.topics {
		rep.Topics = append(rep.Topics, *c.topics[name])
	}
	for _, name := range c.hubNames() {
		rep.Hubs = append(rep.Hubs, *c.hub(name))
	}
	for _, kind := range []string{"missing", "duplicate", "body", "key", "headers", "order", "misrouted", "unexpected", "pending", "note"} {
		rep.Findings = append(rep.Findings, c.examples[kind]...)
		if n := c.more[kind]; n > 0 {
			rep.Findings = append(rep.Findings, fmt.Sprintf("… and %d more %s findings", n, kind))
		}
	}
	return rep
}

// ranges collects offsets, in increasing order, as runs.
type ranges [][2]int64

func (r *ranges) add(off int64) {
	if n := len(*r); n > 0 && (*r)[n-1][1] == off-1 {
		(*r)[n-1][1] = off
		return
	}
	*r = append(*r, [2]int64{off, off})
}

// String lists the runs, at most 10: "3, 17..19".
func (r ranges) String() string {
	parts := make([]string, 0, min(len(r), 10)+1)
	for i, run := range r {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("… (%d more runs)", len(r)-10))
			break
		}
		if run[0] == run[1] {
			parts = append(parts, fmt.Sprint(run[0]))
		} else {
			parts = append(parts, fmt.Sprintf("%d..%d", run[0], run[1]))
		}
	}
	return strings.Join(parts, ", ")
}
