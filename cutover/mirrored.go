package cutover

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/ehmirror/ehmirror/mirror"
)

// MirrorSource is what the cut-over needs of the mirror's Kafka source:
// the topics, the mirror group's committed offsets (how far it has
// mirrored) and the log ends. kafka.Source implements it.
type MirrorSource interface {
	Topics(ctx context.Context) ([]mirror.Topic, error)
	Committed(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]int64, error)
	Watermarks(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]mirror.Watermarks, error)
}

// Mirror is what Mirrored found: the mirrored topics with their hubs, the
// mirror's committed offsets and the log end offsets of their partitions.
type Mirror struct {
	Topics    []TopicRoute
	Committed map[mirror.TopicPartition]int64
	Ends      map[mirror.TopicPartition]int64
}

// Mirrored lists the topics the mirror mirrors (selected by filter, or
// only those named in only, which must all be mirrored) with their hubs,
// the mirror's committed offsets and the log ends of their partitions.
func Mirrored(ctx context.Context, src MirrorSource, filter mirror.TopicFilter, routes []mirror.Route, only []string) (Mirror, error) {
	topics, err := src.Topics(ctx)
	if err != nil {
		return Mirror{}, fmt.Errorf("cutover: listing topics: %w", err)
	}
	router := mirror.NewRouter(routes)
	var out []TopicRoute
	var tps []mirror.TopicPartition
	found := map[string]bool{}
	for _, t := range topics {
		if !filter.Match(t.Name) || (len(only) > 0 && !slices.Contains(only, t.Name)) {
			continue
		}
		found[t.Name] = true
		out = append(out, TopicRoute{Topic: t.Name, Partitions: t.Partitions, Hub: router.Hub(t.Name)})
		for p := range t.Partitions {
			tps = append(tps, mirror.TopicPartition{Topic: t.Name, Partition: int32(p)})
		}
	}
	for _, name := range only {
		if !found[name] {
			return Mirror{}, &InputError{Field: "topics", Msg: fmt.Sprintf("%q is not a mirrored topic", name)}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	committed, err := src.Committed(ctx, tps)
	if err != nil {
		return Mirror{}, fmt.Errorf("cutover: the mirror's committed offsets: %w", err)
	}
	marks, err := src.Watermarks(ctx, tps)
	if err != nil {
		return Mirror{}, fmt.Errorf("cutover: the log ends: %w", err)
	}
	ends := make(map[mirror.TopicPartition]int64, len(marks))
	for tp, m := range marks {
		ends[tp] = m.End
	}
	return Mirror{Topics: out, Committed: committed, Ends: ends}, nil
}
