package mirror

import (
	"context"
	"slices"
	"time"
)

// A drain's fixed cost is a chain of requests to Kafka, each a round trip:
// listing the topics, joining the group (FindCoordinator, JoinGroup,
// SyncGroup, OffsetFetch), reading the committed offsets and the
// watermarks, then at the end checking the topics' identity, committing and
// reading the log ends for the lag. With Kafka 50 ms away this chain took
// 1.1 s of a 10.7 s drain of 1 GB, about half of what such a drain lost
// against loopback (bench, 2026-12-04); with Kafka 100 ms away, 2.1 s. The
// two watermark reads do not depend on the requests before them, so each
// runs beside them (watermarkRead): the drain's start reads the watermarks
// while it joins the group (startWatermarks decides which of them may be
// used), its end reads the log ends while it checks identities and
// commits. This saves four round trips at the start and three at the end.

// watermarkRead is a Watermarks request running in the background.
type watermarkRead struct {
	done chan struct{}
	wms  map[TopicPartition]Watermarks
	took time.Duration
	// answered is when the answer came.
	answered time.Time
	err      error
}

// earlyWatermarksMaxAge bounds the age of early watermarks a drain's start
// may use. A join takes a few round trips (0.36 s with Kafka 50 ms away),
// but one that waits for a rebalance takes seconds, in which retention may
// have moved a log start past the start read early: a partition never
// committed would then start below its log start and meet an out-of-range
// fetch, which the gap policy takes for records the group lost although it
// never owned them. Older early watermarks are read again.
const earlyWatermarksMaxAge = 2 * time.Second

// readWatermarks starts reading the watermarks of tps; ctx bounds the
// request.
func (m *Mirror) readWatermarks(ctx context.Context, tps []TopicPartition) *watermarkRead {
	r := &watermarkRead{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		asked := time.Now()
		r.wms, r.err = m.source.Watermarks(ctx, tps)
		r.answered = time.Now()
		r.took = r.answered.Sub(asked)
	}()
	return r
}

// wait returns the request's answer, how long it took and when it came,
// or ctx's error when ctx ends first.
func (r *watermarkRead) wait(ctx context.Context) (map[TopicPartition]Watermarks, time.Duration, time.Time, error) {
	select {
	case <-r.done:
		return r.wms, r.took, r.answered, r.err
	case <-ctx.Done():
		return nil, 0, time.Time{}, ctx.Err()
	}
}

// partitionsOf lists every partition of the topics named in names.
func partitionsOf(topics []Topic, names []string) []TopicPartition {
	var tps []TopicPartition
	for _, t := range topics {
		if !slices.Contains(names, t.Name) {
			continue
		}
		for p := range t.Partitions {
			tps = append(tps, TopicPartition{Topic: t.Name, Partition: int32(p)})
		}
	}
	return tps
}

// startWatermarks returns the watermarks that decide where each partition
// of got starts. The early ones were read before the claim, so a partition
// may have grown since, and the group's previous owner may have committed
// past the end read then. They are used where they cannot change the
// decision: a partition with no committed offset (a start a few records
// earlier mirrors more, never less), or a committed offset inside them (the
// start is the committed offset). A partition whose committed offset lies
// outside them, which is a gap or a committed offset past the log end when
// fresh watermarks say so too, or that the early read did not answer, is
// read again now; so is every partition when the early answer is older
// than earlyWatermarksMaxAge (a join that waited for a rebalance).
func (d *drain) startWatermarks(ctx context.Context, got []TopicPartition, assigned map[TopicPartition]int64, early *watermarkRead) (map[TopicPartition]Watermarks, error) {
	wms, took, answered, err := early.wait(ctx)
	stale := err == nil && time.Since(answered) > earlyWatermarksMaxAge
	out := make(map[TopicPartition]Watermarks, len(got))
	var again []TopicPartition
	for _, tp := range got {
		wm, ok := wms[tp]
		committed := assigned[tp]
		if err != nil || stale || !ok || (committed != NoOffset && (committed < wm.Start || committed > wm.End)) {
			again = append(again, tp)
			continue
		}
		out[tp] = wm
	}
	if err == nil {
		// A round trip with next to nothing to serve: the first measure
		// of the distance that sizes prefetches (prefetch.go).
		d.pipe.observe(took)
	}
	if len(again) == 0 {
		return out, nil
	}
	asked := time.Now()
	fresh, err := d.m.source.Watermarks(ctx, again)
	if err != nil {
		return nil, err
	}
	d.pipe.observe(time.Since(asked))
	for tp, wm := range fresh {
		out[tp] = wm
	}
	return out, nil
}
