package faults

import (
	"context"
	"time"

	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// farSource is a Kafka source whose reads each wait delay first.
type farSource struct {
	*kafka.Source
	delay time.Duration
}

// wait sleeps f.delay or until ctx ends.
func (f *farSource) wait(ctx context.Context) error {
	t := time.NewTimer(f.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (f *farSource) Fetch(ctx context.Context, tp mirror.TopicPartition, offset int64, maxBytes int) (mirror.Fetched, error) {
	if err := f.wait(ctx); err != nil {
		return mirror.Fetched{Next: offset}, err
	}
	return f.Source.Fetch(ctx, tp, offset, maxBytes)
}

func (f *farSource) Topics(ctx context.Context) ([]mirror.Topic, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return f.Source.Topics(ctx)
}

func (f *farSource) Watermarks(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]mirror.Watermarks, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return f.Source.Watermarks(ctx, tps)
}

func (f *farSource) Committed(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]int64, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return f.Source.Committed(ctx, tps)
}
