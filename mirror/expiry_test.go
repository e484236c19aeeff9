package mirror_test

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// expireUnsubscribed does to the group what Kafka's offset expiry does to a
// group with members once offsets.retention.minutes have passed (KIP-496):
// it deletes the committed offsets of those of topics that no member
// subscribes to, and returns them. The subscriptions are read as Kafka's
// coordinator reads them, by the version 0 prefix of the consumer
// protocol's metadata (GroupMetadata.computeSubscribedTopics). kfake parses
// the full version instead, which fails for kafka-go's version 1 metadata,
// so its own expiry and OffsetDelete would treat every topic as
// unsubscribed: this helper keeps to Kafka's behaviour. A group that is not
// Stable expires nothing here (Kafka applies KIP-496 to Stable groups; an
// empty one counts retention from when it became empty, which a mirror
// whose timer runs every minute never reaches).
func (e *env) expireUnsubscribed(topics []string) []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{e.group}
	res, err := req.RequestWith(ctx, e.client)
	if err != nil {
		e.t.Fatal(err)
	}
	subscribed := map[string]bool{}
	members := 0
	for _, g := range res.Groups {
		if g.State != "Stable" {
			// Kafka applies KIP-496 to Stable groups only; while a group
			// rebalances its members' metadata is not settled.
			return nil
		}
		for _, m := range g.Members {
			members++
			raw := slices.Clone(m.ProtocolMetadata)
			if len(raw) >= 2 {
				raw[0], raw[1] = 0, 0 // read as version 0, as Kafka does
			}
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(raw); err != nil {
				e.t.Fatalf("member %s: subscription unreadable as version 0: %v", m.MemberID, err)
			}
			for _, t := range meta.Topics {
				subscribed[t] = true
			}
		}
	}
	if members == 0 {
		return nil
	}
	var expired []string
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = e.group
	for _, topic := range topics {
		if subscribed[topic] {
			continue
		}
		expired = append(expired, topic)
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		for p := range int32(64) {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		del.Topics = append(del.Topics, rt)
	}
	if len(del.Topics) > 0 {
		if _, err := del.RequestWith(ctx, e.client); err != nil {
			e.t.Fatal(err)
		}
	}
	return expired
}
