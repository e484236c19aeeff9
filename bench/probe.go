package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// Counters are what the instrumented source and sink of a mirror phase saw:
// how full the batches were and how long the calls took.
type Counters struct {
	Fetches       int64   `json:"fetches"`
	FetchRecords  int64   `json:"fetch_records"`
	FetchSeconds  float64 `json:"fetch_seconds"` // summed over all readers
	Sends         int64   `json:"sends"`
	SendEvents    int64   `json:"send_events"`
	SendBytes     int64   `json:"send_bytes"` // encoded batch bytes
	SendSeconds   float64 `json:"send_seconds"`
	NewBatches    int64   `json:"new_batches"`
	Commits       int64   `json:"commits"`
	CommitSeconds float64 `json:"commit_seconds"`
}

// counters accumulates Counters from several goroutines.
type counters struct {
	fetches, fetchRecords, fetchNanos atomic.Int64
	sends, sendEvents, sendBytes      atomic.Int64
	sendNanos, newBatches             atomic.Int64
	commits, commitNanos              atomic.Int64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Fetches: c.fetches.Load(), FetchRecords: c.fetchRecords.Load(), FetchSeconds: time.Duration(c.fetchNanos.Load()).Seconds(),
		Sends: c.sends.Load(), SendEvents: c.sendEvents.Load(), SendBytes: c.sendBytes.Load(), SendSeconds: time.Duration(c.sendNanos.Load()).Seconds(),
		NewBatches: c.newBatches.Load(), Commits: c.commits.Load(), CommitSeconds: time.Duration(c.commitNanos.Load()).Seconds(),
	}
}

// countingSource counts a Source's fetches and its claims' commits.
type countingSource struct {
	mirror.Source
	c *counters
}

func (s countingSource) Fetch(ctx context.Context, tp mirror.TopicPartition, offset int64, maxBytes int) (mirror.Fetched, error) {
	t0 := time.Now()
	f, err := s.Source.Fetch(ctx, tp, offset, maxBytes)
	s.c.fetchNanos.Add(int64(time.Since(t0)))
	s.c.fetches.Add(1)
	s.c.fetchRecords.Add(int64(len(f.Records)))
	return f, err
}

func (s countingSource) Claim(ctx context.Context, topics []string) (mirror.Claim, error) {
	cl, err := s.Source.Claim(ctx, topics)
	if err != nil {
		return cl, err
	}
	return countingClaim{Claim: cl, c: s.c}, nil
}

type countingClaim struct {
	mirror.Claim
	c *counters
}

func (cl countingClaim) Commit(ctx context.Context, offsets map[mirror.TopicPartition]int64) error {
	t0 := time.Now()
	err := cl.Claim.Commit(ctx, offsets)
	cl.c.commitNanos.Add(int64(time.Since(t0)))
	cl.c.commits.Add(1)
	return err
}

// countingSink counts a Sink's batches and sends.
type countingSink struct {
	mirror.Sink
	c *counters
}

func (s countingSink) NewBatch(ctx context.Context, hub, partitionID string) (mirror.Batch, error) {
	s.c.newBatches.Add(1)
	return s.Sink.NewBatch(ctx, hub, partitionID)
}

func (s countingSink) Send(ctx context.Context, b mirror.Batch) error {
	t0 := time.Now()
	err := s.Sink.Send(ctx, b)
	s.c.sendNanos.Add(int64(time.Since(t0)))
	s.c.sends.Add(1)
	s.c.sendEvents.Add(int64(b.Len()))
	s.c.sendBytes.Add(int64(b.Bytes()))
	return err
}

// describe summarises the counters in one line.
func (c Counters) describe() string {
	out := ""
	if c.Fetches > 0 {
		out += fmt.Sprintf("%d fetches, %.0f records and %.1f ms each; ", c.Fetches, ratio(float64(c.FetchRecords), float64(c.Fetches)), ratio(c.FetchSeconds*1000, float64(c.Fetches)))
	}
	if c.Sends > 0 {
		out += fmt.Sprintf("%d sends, %.0f events, %.0f KB and %.1f ms each, %d new batches; ", c.Sends, ratio(float64(c.SendEvents), float64(c.Sends)),
			ratio(float64(c.SendBytes)/1e3, float64(c.Sends)), ratio(c.SendSeconds*1000, float64(c.Sends)), c.NewBatches)
	}
	if c.Commits > 0 {
		out += fmt.Sprintf("%d commits, %.1f ms each", c.Commits, ratio(c.CommitSeconds*1000, float64(c.Commits)))
	}
	return out
}

// readingSink is a countingSink that keeps the sink's [mirror.HubReader],
// for a mirror phase with deduplication on.
type readingSink struct {
	countingSink
	mirror.HubReader
}
