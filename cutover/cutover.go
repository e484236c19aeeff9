package cutover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// ErrGroupActive is returned (wrapped) when the consumer group still has
// members and the request is not forced.
var ErrGroupActive = errors.New("consumer group has members")

// ErrMirrorBehind is returned (wrapped) when the mirror has not yet
// mirrored a Kafka partition up to the group's committed offset.
var ErrMirrorBehind = errors.New("mirror behind the consumer group")

// Group reads a Kafka consumer group (the application's group, not the
// mirror's). The kafka adapter implements it.
type Group interface {
	// MembersOf returns how many members group has now.
	MembersOf(ctx context.Context, group string) (int, error)
	// CommittedOf returns group's committed offsets for tps,
	// mirror.NoOffset where it committed nothing.
	CommittedOf(ctx context.Context, group string, tps []mirror.TopicPartition) (map[mirror.TopicPartition]int64, error)
}

// Hubs reads the events of hub partitions. The eventhubs adapter
// implements it.
type Hubs interface {
	// PartitionIDs lists hub's partitions.
	PartitionIDs(ctx context.Context, hub string) ([]string, error)
	// ScanPartition calls fn for every event of one partition, in order,
	// from the first retained to the last enqueued when it was called.
	ScanPartition(ctx context.Context, hub, partitionID string, fn func(Event)) error
}

// TopicRoute is one mirrored topic: its partition count and its hub.
type TopicRoute struct {
	Topic      string
	Partitions int
	Hub        string
}

// Request asks for a cut-over of one Kafka consumer group.
type Request struct {
	// Group is the application's Kafka consumer group.
	Group string
	// Topics are the mirrored topics to consider; topics on which Group
	// committed nothing are left out unless Explicit.
	Topics   []TopicRoute
	Explicit bool
	// MirrorCommitted are the mirror's own committed offsets (how far it
	// has mirrored) for the partitions of Topics.
	MirrorCommitted map[mirror.TopicPartition]int64
	// MirrorEnds are the Kafka log end offsets of the same partitions
	// (how far there is to mirror), to count what is not mirrored yet.
	MirrorEnds map[mirror.TopicPartition]int64
	// Namespace (fully qualified, as the consumers spell it) and
	// ConsumerGroup (Event Hubs) name the checkpoints.
	Namespace     string
	ConsumerGroup string
	// Force cuts over although Group has members.
	Force bool
	// AllowBackward writes checkpoints older than those already stored.
	AllowBackward bool
	// Confirm writes the checkpoints; without it the cut-over is a dry run.
	Confirm bool
	// By says who asked, for the log.
	By string
}

// Result is a dry run or a cut-over that wrote its checkpoints.
type Result struct {
	Written       bool      `json:"written"`
	Group         string    `json:"group"`
	Namespace     string    `json:"namespace"`
	ConsumerGroup string    `json:"consumer_group"`
	By            string    `json:"by,omitempty"`
	At            time.Time `json:"at"`
	Members       int       `json:"members"`
	Forced        bool      `json:"forced,omitempty"`
	AllowBackward bool      `json:"allow_backward"`
	// Hubs are the hubs scanned; Watermarks the group's committed offsets,
	// the filter's input.
	Hubs       []string        `json:"hubs"`
	Watermarks []Watermark     `json:"watermarks"`
	Partitions []PartitionPlan `json:"partitions"`
	// Redelivered sums the partitions' redelivered events.
	Redelivered int64 `json:"redelivered"`
	// Unmirrored counts the records of the group's partitions that the
	// mirror had not mirrored yet when the cut-over was planned (past the
	// group's position: the consumers get them once mirrored).
	Unmirrored int64 `json:"unmirrored"`
	// Backward lists the partitions whose planned checkpoint is older
	// than the stored one (read when a store is given).
	Backward []Backward `json:"backward,omitempty"`
	// Blobs are the checkpoint blobs written; InPlace those that already
	// held the planned checkpoint (a re-run after a partial write).
	Blobs   []string `json:"blobs,omitempty"`
	InPlace []string `json:"in_place,omitempty"`
	// WrittenPartitions counts the partitions whose checkpoints are in
	// place (written or already there).
	WrittenPartitions int `json:"written_partitions"`
	// StoreError is why a dry run could not read the checkpoint store
	// (its stored checkpoints were not compared); a confirmed cut-over
	// is refused with that error instead.
	StoreError string `json:"store_error,omitempty"`
}

// InputError is a bad request; Field names the culprit.
type InputError struct {
	Field string
	Msg   string
}

// Error returns "field: message".
func (e *InputError) Error() string { return e.Field + ": " + e.Msg }

// Run plans the cut-over of req.Group and, with req.Confirm, writes the
// checkpoints. It refuses (ErrGroupActive) while the group has members
// unless forced, and (ErrMirrorBehind, saying how far the mirror is) while
// the mirror has not mirrored every partition up to the group's committed
// offset.
//
// With a store w it checks the store first, reads every stored checkpoint
// of the plan and refuses (ErrBackward, naming each partition) to move one
// backward unless req.AllowBackward; a dry run lists them in
// Result.Backward. It writes each blob on the condition that it did not
// change since it was read (ErrCheckpointChanged otherwise), partition by
// partition: when a write fails, the Result returned with the error lists
// what was written, and a re-run finishes the job (partitions already
// holding the plan are left as they are).
func Run(ctx context.Context, g Group, h Hubs, w CheckpointStore, req Request, log *slog.Logger) (*Result, error) {
	if err := validate(req, w); err != nil {
		return nil, err
	}
	var storeErr string
	if w != nil {
		if err := w.Check(ctx); err != nil {
			if req.Confirm {
				return nil, fmt.Errorf("cutover: %w: %w", ErrStore, err)
			}
			// A dry run still plans: it says the store did not answer
			// instead of refusing, and compares nothing stored.
			storeErr, w = err.Error(), nil
		}
	}
	res := &Result{Group: req.Group, Namespace: req.Namespace, ConsumerGroup: req.ConsumerGroup, By: req.By, At: time.Now().UTC(),
		Forced: req.Force, AllowBackward: req.AllowBackward, StoreError: storeErr}
	members, err := g.MembersOf(ctx, req.Group)
	if err != nil {
		return nil, fmt.Errorf("cutover: members of %q: %w", req.Group, err)
	}
	res.Members = members
	if members > 0 && !req.Force {
		return nil, fmt.Errorf("cutover: %w: %q has %d member(s) still consuming from Kafka; stop them first or set force", ErrGroupActive, req.Group, members)
	}
	var tps []mirror.TopicPartition
	for _, t := range req.Topics {
		for p := range t.Partitions {
			tps = append(tps, mirror.TopicPartition{Topic: t.Topic, Partition: int32(p)})
		}
	}
	committed, err := g.CommittedOf(ctx, req.Group, tps)
	if err != nil {
		return nil, fmt.Errorf("cutover: committed offsets of %q: %w", req.Group, err)
	}
	committed = groupTopics(req, committed)
	if len(committed) == 0 {
		return nil, &InputError{Field: "group", Msg: fmt.Sprintf("%q has committed no offset on the mirrored topics", req.Group)}
	}
	if err := checkMirrored(committed, req.MirrorCommitted); err != nil {
		return nil, err
	}
	res.Unmirrored = unmirrored(committed, req.MirrorCommitted, req.MirrorEnds)
	res.Watermarks = WatermarksOf(committed)
	marks := watermarkMap(res.Watermarks)
	hubs := map[string]bool{}
	for _, t := range req.Topics {
		if hasTopic(committed, t.Topic) {
			hubs[t.Hub] = true
		}
	}
	for hub := range hubs {
		res.Hubs = append(res.Hubs, hub)
	}
	sort.Strings(res.Hubs)
	for _, hub := range res.Hubs {
		ids, err := h.PartitionIDs(ctx, hub)
		if err != nil {
			return nil, fmt.Errorf("cutover: partitions of hub %q: %w", hub, err)
		}
		for _, id := range ids {
			s := NewScan(hub, id, marks)
			if err := h.ScanPartition(ctx, hub, id, s.Add); err != nil {
				return nil, fmt.Errorf("cutover: scanning hub %q partition %s: %w", hub, id, err)
			}
			p, err := s.Plan()
			if err != nil {
				return nil, err
			}
			res.Partitions = append(res.Partitions, p)
			res.Redelivered += p.Redelivered
		}
	}
	var stored []Stored
	if w != nil {
		var back []Backward
		stored, back, err = readStored(ctx, w, req, res.Partitions)
		if err != nil {
			return nil, err
		}
		res.Backward = back
		if len(back) > 0 && req.Confirm && !req.AllowBackward {
			return res, backwardError(back)
		}
	}
	if !req.Confirm {
		return res, nil
	}
	for i, p := range res.Partitions {
		if stored[i].holds(p.Checkpoint) {
			for _, b := range stored[i].Blobs {
				res.InPlace = append(res.InPlace, b.Name)
			}
			res.WrittenPartitions++
			continue
		}
		names, err := w.WriteCheckpoint(ctx, stored[i], p.Checkpoint)
		res.Blobs = append(res.Blobs, names...)
		if err != nil {
			kind := ErrStore
			if errors.Is(err, ErrCheckpointChanged) {
				kind = ErrCheckpointChanged
			}
			return res, fmt.Errorf("cutover: %w: writing the checkpoint of hub %q partition %s (%d of %d partition(s) in place, re-run to finish): %w",
				kind, p.Hub, p.PartitionID, res.WrittenPartitions, len(res.Partitions), err)
		}
		res.WrittenPartitions++
		log.LogAttrs(ctx, slog.LevelInfo, "cut-over checkpoint written",
			slog.String("by", req.By), slog.String("at", res.At.Format(time.RFC3339)), slog.String("group", req.Group),
			slog.String("hub", p.Hub), slog.String("partition", p.PartitionID),
			slog.String("consumer_group", req.ConsumerGroup), slog.Int64("start", p.Start),
			slog.Int64("sequence_number", p.Checkpoint.Sequence), slog.String("offset", p.Checkpoint.Offset),
			slog.Int64("redelivered", p.Redelivered), slog.Any("stored", p.Stored))
	}
	res.Written = true
	log.LogAttrs(ctx, slog.LevelInfo, "cut-over checkpoints written",
		slog.String("group", req.Group), slog.String("namespace", req.Namespace),
		slog.String("consumer_group", req.ConsumerGroup), slog.String("by", req.By),
		slog.Bool("forced", req.Force), slog.Int("members", members),
		slog.Any("hubs", res.Hubs), slog.Int("partitions", len(res.Partitions)),
		slog.Int64("redelivered", res.Redelivered), slog.Int64("unmirrored", res.Unmirrored),
		slog.Int("backward", len(res.Backward)), slog.Bool("allow_backward", req.AllowBackward))
	return res, nil
}

func validate(req Request, w CheckpointStore) error {
	switch {
	case strings.TrimSpace(req.Group) == "":
		return &InputError{Field: "group", Msg: "the Kafka consumer group to cut over is required"}
	case len(req.Topics) == 0:
		return &InputError{Field: "topics", Msg: "no mirrored topic to cut over"}
	case req.Namespace == "":
		return &InputError{Field: "namespace", Msg: "the fully qualified Event Hubs namespace (as the consumers pass it) is required"}
	case req.ConsumerGroup == "":
		return &InputError{Field: "consumer_group", Msg: "the Event Hubs consumer group is required"}
	case req.Confirm && w == nil:
		return &InputError{Field: "confirm", Msg: "no checkpoint store configured (storage account and container)"}
	}
	return nil
}

// groupTopics keeps the topics the group committed on (all of them when
// the request named them explicitly).
func groupTopics(req Request, committed map[mirror.TopicPartition]int64) map[mirror.TopicPartition]int64 {
	if req.Explicit {
		return committed
	}
	used := map[string]bool{}
	for tp, o := range committed {
		if o >= 0 {
			used[tp.Topic] = true
		}
	}
	out := make(map[mirror.TopicPartition]int64, len(committed))
	for tp, o := range committed {
		if used[tp.Topic] {
			out[tp] = o
		}
	}
	return out
}

func hasTopic(committed map[mirror.TopicPartition]int64, topic string) bool {
	for tp := range committed {
		if tp.Topic == topic {
			return true
		}
	}
	return false
}

// checkMirrored refuses when a partition's mirror position is below the
// group's committed offset, and says how far the mirror is.
func checkMirrored(committed, mirrored map[mirror.TopicPartition]int64) error {
	var behind []string
	var missing int64
	for _, w := range WatermarksOf(committed) {
		if !w.Committed {
			continue
		}
		tp := mirror.TopicPartition{Topic: w.Topic, Partition: w.Partition}
		m, ok := mirrored[tp]
		if !ok || m < 0 {
			m = 0
		}
		if m < w.Offset {
			behind = append(behind, fmt.Sprintf("%s mirrored to %d of %d", tp, m, w.Offset))
			missing += w.Offset - m
		}
	}
	if len(behind) == 0 {
		return nil
	}
	const show = 5
	more := ""
	if len(behind) > show {
		more = fmt.Sprintf(" and %d more", len(behind)-show)
		behind = behind[:show]
	}
	return fmt.Errorf("cutover: %w: %d record(s) the group processed are not mirrored yet (%s%s); let the mirror catch up first", ErrMirrorBehind, missing, strings.Join(behind, ", "), more)
}

// unmirrored counts the records of the group's partitions between the
// mirror's position and the log end.
func unmirrored(committed, mirrored, ends map[mirror.TopicPartition]int64) int64 {
	var n int64
	for tp := range committed {
		end, ok := ends[tp]
		if !ok {
			continue
		}
		if m := max(mirrored[tp], 0); end > m {
			n += end - m
		}
	}
	return n
}
