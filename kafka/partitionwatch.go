package kafka

import (
	"context"
	"maps"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// partitionWatchInterval is how often a member checks the partition counts
// of its subscribed topics.
const partitionWatchInterval = 2 * time.Second

// watchPartitions runs for one generation (kafka-go ends the generation when
// it returns): it reads the partition counts of every subscribed topic in one
// Metadata request now and every partitionWatchInterval, and returns when a
// count changed (a partition added, or the topic deleted), so that the group
// rebalances and a new partition gets an owner, as a Java consumer's metadata
// refresh does. This replaces kafka-go's WatchPartitionChanges, which sends
// one request per topic per interval from every member.
//
// A failed read is logged and tried again at the next interval. (kafka-go's
// watcher, which read through the coordinator's connection, ended the
// generation when its first read failed; this one reads through any broker,
// whose failure says nothing about the membership, and the heartbeats watch
// the coordinator.) A count is compared only with one read before it, so a
// partition added before the first successful read is seen at the next
// rebalance.
func (m *membership) watchPartitions(ctx context.Context) {
	t := time.NewTicker(partitionWatchInterval)
	defer t.Stop()
	var before map[string]int
	for {
		now, err := m.s.partitionCounts(ctx, m.topics)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				m.log.Debug("reading the subscribed topics' partitions failed; trying again", "err", err)
			}
		case before == nil:
			before = now
		default:
			for topic, n := range now {
				if was, ok := before[topic]; ok && was != n {
					m.log.Info("partition count changed; rebalancing the group", "topic", topic, "partitions_before", was, "partitions", n)
					return
				}
			}
			maps.Copy(before, now)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// partitionCounts reads the partition counts of topics in one Metadata
// request: 0 for a topic the cluster does not know (deleted), and no entry
// for a topic whose metadata came with another error (being created, or no
// leader yet), which is not known either way.
func (s *Source) partitionCounts(ctx context.Context, topics []string) (map[string]int, error) {
	md, err := s.topicMetadata(ctx, topics...)
	if err != nil {
		return nil, err
	}
	counts := make(map[string]int, len(md.topics))
	for _, t := range md.topics {
		switch {
		case t.err == 0:
			counts[t.name] = len(t.partitions)
		case kafkago.Error(t.err) == kafkago.UnknownTopicOrPartition:
			counts[t.name] = 0
		}
	}
	return counts, nil
}
