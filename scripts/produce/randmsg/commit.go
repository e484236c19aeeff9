package randmsg

import (
	"context"
	"errors"
	"fmt"
	"slices"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// PartitionCommit is the offset committed for one partition.
type PartitionCommit struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	// Start and End are the partition's log start and end offsets.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Offset is the committed offset: the next record the group would read.
	Offset int64 `json:"offset"`
}

// CommitPart commits, for group, the offset a consumer that processed the
// given fraction (0 to 1) of each partition of topics would commit: the log
// start plus that fraction of the records, rounded down. It commits outside
// any group generation, as a standalone consumer does, so the group must
// have no members (Kafka refuses it otherwise). It gives a group with
// committed offsets to try the cut-over on (docs/cutover.md).
func CommitPart(ctx context.Context, cluster kafkaconn.Config, group string, topics []string, fraction float64) ([]PartitionCommit, error) {
	if group == "" {
		return nil, errors.New("commit: a group name is required")
	}
	if fraction < 0 || fraction > 1 {
		return nil, fmt.Errorf("commit: fraction %g; want 0 to 1", fraction)
	}
	transport, err := cluster.Transport()
	if err != nil {
		return nil, err
	}
	defer transport.CloseIdleConnections()
	addr := kafkago.TCP(cluster.Brokers...)
	client := &kafkago.Client{Addr: addr, Transport: transport}
	meta, err := client.Metadata(ctx, &kafkago.MetadataRequest{Addr: addr, Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("commit: reading the topics: %w", err)
	}
	req := &kafkago.ListOffsetsRequest{Addr: addr, Topics: map[string][]kafkago.OffsetRequest{}}
	for _, t := range meta.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("commit: topic %s: %w", t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			req.Topics[t.Name] = append(req.Topics[t.Name], kafkago.FirstOffsetOf(p.ID), kafkago.LastOffsetOf(p.ID))
		}
	}
	offsets, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("commit: reading the partitions' offsets: %w", err)
	}
	var out []PartitionCommit
	commit := &kafkago.OffsetCommitRequest{Addr: addr, GroupID: group, GenerationID: -1, Topics: map[string][]kafkago.OffsetCommit{}}
	for topic, parts := range offsets.Topics {
		for _, p := range parts {
			if p.Error != nil {
				return nil, fmt.Errorf("commit: %s/%d: %w", topic, p.Partition, p.Error)
			}
			c := PartitionCommit{Topic: topic, Partition: p.Partition, Start: p.FirstOffset, End: p.LastOffset}
			c.Offset = c.Start + int64(float64(c.End-c.Start)*fraction)
			out = append(out, c)
			commit.Topics[topic] = append(commit.Topics[topic], kafkago.OffsetCommit{Partition: p.Partition, Offset: c.Offset})
		}
	}
	res, err := client.OffsetCommit(ctx, commit)
	if err != nil {
		return nil, fmt.Errorf("commit: group %s: %w", group, err)
	}
	for topic, parts := range res.Topics {
		for _, p := range parts {
			if p.Error != nil {
				return nil, fmt.Errorf("commit: group %s, %s/%d: %w", group, topic, p.Partition, p.Error)
			}
		}
	}
	slices.SortFunc(out, func(a, b PartitionCommit) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return a.Partition - b.Partition
	})
	return out, nil
}
