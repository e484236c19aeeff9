package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

// offsetMonitor samples the group's committed offsets while a scenario runs
// and records every one seen to move backwards. It has two independent
// sources, each checked on its own sample sequence: the broker's group state
// (kfake GroupInfo, every 5 ms) and OffsetFetch requests sent by a separate
// franz-go client (every 20 ms). A partition with no commit reads as -1
// from OffsetFetch; -1 after a commit counts as a regression.
type offsetMonitor struct {
	e      *env
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	last map[string]map[mirror.TopicPartition]int64 // source -> highest seen
	// paused topics are being deleted and recreated; epoch changes with
	// every pause and resume, and a sample started in another epoch is
	// dropped (it may predate the deletion).
	paused      map[string]bool
	epoch       int
	samples     int64
	regressions []string
}

func newOffsetMonitor(e *env) *offsetMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &offsetMonitor{e: e, cancel: cancel, last: map[string]map[mirror.TopicPartition]int64{}, paused: map[string]bool{}}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.run(ctx, "broker", 5*time.Millisecond, m.sampleBroker)
	}()
	go func() {
		defer m.wg.Done()
		m.run(ctx, "offsetfetch", 20*time.Millisecond, m.sampleOffsetFetch(ctx))
	}()
	return m
}

func (m *offsetMonitor) run(ctx context.Context, source string, every time.Duration, sample func(context.Context) (map[mirror.TopicPartition]int64, bool)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		epoch := m.currentEpoch()
		if got, ok := sample(ctx); ok {
			m.observe(source, epoch, got)
		}
	}
}

func (m *offsetMonitor) sampleBroker(context.Context) (map[mirror.TopicPartition]int64, bool) {
	out := map[mirror.TopicPartition]int64{}
	ok := m.e.withKafka(func(c *kfake.Cluster) {
		gi := c.GroupInfo(m.e.group)
		if gi == nil {
			return
		}
		for topic, ps := range gi.Commits {
			for p, gc := range ps {
				out[mirror.TopicPartition{Topic: topic, Partition: p}] = gc.Offset
			}
		}
	})
	return out, ok
}

// sampleOffsetFetch returns a sampler sending OffsetFetch for every
// scenario partition through its own client.
func (m *offsetMonitor) sampleOffsetFetch(ctx context.Context) func(context.Context) (map[mirror.TopicPartition]int64, bool) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(m.e.brokers()...), kgo.RequestRetries(0), kgo.WithLogger(nil)}, m.e.cfg.ProducerOpts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		m.e.t.Errorf("offset monitor client: %v", err)
		return func(context.Context) (map[mirror.TopicPartition]int64, bool) { return nil, false }
	}
	context.AfterFunc(ctx, client.Close)
	return func(ctx context.Context) (map[mirror.TopicPartition]int64, bool) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = m.e.group
		for _, topic := range m.e.cfg.Topics {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic = topic
			for p := range m.e.cfg.Partitions {
				rt.Partitions = append(rt.Partitions, p)
			}
			req.Topics = append(req.Topics, rt)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, client)
		if err != nil || resp.ErrorCode != 0 {
			return nil, false
		}
		out := map[mirror.TopicPartition]int64{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					continue
				}
				out[mirror.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
			}
		}
		return out, true
	}
}

func (m *offsetMonitor) currentEpoch() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

func (m *offsetMonitor) observe(source string, epoch int, got map[mirror.TopicPartition]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != m.epoch {
		return
	}
	m.samples++
	last := m.last[source]
	if last == nil {
		last = map[mirror.TopicPartition]int64{}
		m.last[source] = last
	}
	for tp, off := range got {
		if m.paused[tp.Topic] {
			continue
		}
		prev, seen := last[tp]
		if seen && off < prev {
			if len(m.regressions) < 1000 {
				m.regressions = append(m.regressions, fmt.Sprintf("%s: %s committed %d after %d", source, tp, off, prev))
			}
			continue
		}
		last[tp] = off
	}
}

// pause stops checking topic (before it is deleted); resume starts it
// afresh (after it was recreated: its offsets restart).
func (m *offsetMonitor) pause(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused[topic] = true
	m.epoch++
}

func (m *offsetMonitor) resume(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	delete(m.paused, topic)
	for _, last := range m.last {
		for tp := range last {
			if tp.Topic == topic {
				delete(last, tp)
			}
		}
	}
}

func (m *offsetMonitor) stop() {
	m.cancel()
	m.wg.Wait()
}

// result returns the samples taken and the regressions seen.
func (m *offsetMonitor) result() (int64, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples, slices.Clone(m.regressions)
}
