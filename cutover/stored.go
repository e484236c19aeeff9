package cutover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBackward is returned (wrapped) when a planned checkpoint is older
// than the one already stored (a consumer read further since, or an
// earlier cut-over planned further) and the request does not allow
// moving it back.
var ErrBackward = errors.New("planned checkpoint older than the stored one")

// ErrCheckpointChanged is returned (wrapped) when a checkpoint blob
// changed between the cut-over's read and its write (a processor
// checkpointed meanwhile): nothing of that partition was overwritten.
var ErrCheckpointChanged = errors.New("checkpoint changed while the cut-over ran")

// ErrStore is returned (wrapped) when the checkpoint store cannot be
// reached or refuses a read or a write.
var ErrStore = errors.New("checkpoint store")

// CheckpointStore reads and writes checkpoints where Event Hubs processors
// read them. The checkpointstore adapter implements it.
type CheckpointStore interface {
	// Check makes sure the store is reachable and its container exists,
	// and answers quickly (no long retries) when not.
	Check(ctx context.Context) error
	// ReadCheckpoint returns the checkpoint blobs of one partition of hub
	// for the Event Hubs consumer group, present or not, each with its
	// version (ETag).
	ReadCheckpoint(ctx context.Context, namespace, hub, consumerGroup, partitionID string) (Stored, error)
	// WriteCheckpoint stores cp in the blobs of stored (as read by
	// ReadCheckpoint) on the condition that each is still at the version
	// read (absent blobs: still absent), and returns the blob names it
	// wrote. A blob that changed meanwhile fails with an error wrapping
	// ErrCheckpointChanged.
	WriteCheckpoint(ctx context.Context, stored Stored, cp Checkpoint) ([]string, error)
}

// StoredBlob is one checkpoint blob as read from the store.
type StoredBlob struct {
	// Name is the blob's name; Exists is false when there is none yet.
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
	// Checkpoint is what it holds; HasSequence is false when it holds no
	// sequence number (an offset only).
	Checkpoint  Checkpoint `json:"checkpoint"`
	HasSequence bool       `json:"-"`
	// Version is the blob's ETag, for a conditional write.
	Version string `json:"-"`
}

// Stored is what the store holds for one partition: one blob per name the
// SDKs read (the names as given and, when different, lower-cased).
type Stored struct {
	Blobs []StoredBlob `json:"blobs"`
}

// newest returns the most advanced stored checkpoint; ok is false when no
// blob exists. unknown is true when a blob holds no sequence number.
func (s Stored) newest() (cp Checkpoint, ok, unknown bool) {
	cp = Checkpoint{Sequence: -1, Offset: StartOfStream}
	for _, b := range s.Blobs {
		if !b.Exists {
			continue
		}
		switch {
		case !b.HasSequence:
			unknown, cp = true, b.Checkpoint
		case !unknown && (!ok || b.Checkpoint.Sequence > cp.Sequence):
			cp = b.Checkpoint
		}
		ok = true
	}
	return cp, ok, unknown
}

// holds reports whether every blob exists and holds cp.
func (s Stored) holds(cp Checkpoint) bool {
	for _, b := range s.Blobs {
		if !b.Exists || !b.HasSequence || b.Checkpoint != cp {
			return false
		}
	}
	return len(s.Blobs) > 0
}

// Backward is a partition whose planned checkpoint is older than the
// stored one.
type Backward struct {
	Hub         string `json:"hub"`
	PartitionID string `json:"partition_id"`
	// Stored is the stored sequence number ("offset N" when the blob
	// holds none); Planned the planned one.
	Stored  string `json:"stored"`
	Planned int64  `json:"planned"`
}

// String returns "hub/partition stored S, planned P".
func (b Backward) String() string {
	return fmt.Sprintf("%s/%s stored %s, planned %d", b.Hub, b.PartitionID, b.Stored, b.Planned)
}

// readStored reads the stored checkpoints of the plan's partitions (one
// Stored per plan, the newest also into the plan) and returns the
// partitions that the plan would move backward.
func readStored(ctx context.Context, w CheckpointStore, req Request, plans []PartitionPlan) ([]Stored, []Backward, error) {
	var back []Backward
	all := make([]Stored, len(plans))
	for i := range plans {
		p := &plans[i]
		stored, err := w.ReadCheckpoint(ctx, req.Namespace, p.Hub, req.ConsumerGroup, p.PartitionID)
		if err != nil {
			return nil, nil, fmt.Errorf("cutover: %w: reading the checkpoint of hub %q partition %s: %w", ErrStore, p.Hub, p.PartitionID, err)
		}
		all[i] = stored
		cp, ok, unknown := stored.newest()
		if !ok {
			continue
		}
		p.Stored = &cp
		switch {
		case unknown:
			back = append(back, Backward{Hub: p.Hub, PartitionID: p.PartitionID, Stored: "offset " + cp.Offset, Planned: p.Checkpoint.Sequence})
		case cp.Sequence > p.Checkpoint.Sequence:
			back = append(back, Backward{Hub: p.Hub, PartitionID: p.PartitionID, Stored: fmt.Sprint(cp.Sequence), Planned: p.Checkpoint.Sequence})
		}
	}
	return all, back, nil
}

// backwardError is the refusal naming every partition the plan would
// move backward.
func backwardError(back []Backward) error {
	return fmt.Errorf("cutover: %w in %d partition(s), a consumer read further than the Kafka group (%s); nothing written; to move them back anyway allow backward moves (HTTP \"allow_backward\": true, scripts/cutover -allow-backward)",
		ErrBackward, len(back), joinBackward(back))
}

// joinBackward lists the partitions moving backward, "; " between them.
func joinBackward(back []Backward) string {
	parts := make([]string, len(back))
	for i, b := range back {
		parts[i] = b.String()
	}
	return strings.Join(parts, "; ")
}

// Summary is the one-line answer of a cut-over: what was (or would be)
// written, the events delivered again, the records not mirrored yet and
// the partitions moved (or that would move) backward. confirm and allow
// say how the caller confirms and allows backward moves (HTTP fields or
// command-line flags).
func Summary(res *Result, confirm, allow string) string {
	var b strings.Builder
	hubs := strings.Join(res.Hubs, ", ")
	if res.Written {
		fmt.Fprintf(&b, "cut-over of %s to %s: %d checkpoint blob(s) written", res.Group, hubs, len(res.Blobs))
		if len(res.InPlace) > 0 {
			fmt.Fprintf(&b, " (%d more already held the plan)", len(res.InPlace))
		}
		fmt.Fprintf(&b, " for %s/%s by %s at %s; %d event(s) will be delivered again (the watermarks drop them)",
			res.Namespace, res.ConsumerGroup, res.By, res.At.Format(time.RFC3339), res.Redelivered)
	} else {
		fmt.Fprintf(&b, "dry run of the cut-over of %s to %s: nothing written; %d event(s) would be delivered again (the watermarks drop them)",
			res.Group, hubs, res.Redelivered)
	}
	if res.Unmirrored > 0 {
		fmt.Fprintf(&b, "; %d record(s) past the group's position were not mirrored yet when planned (the consumers get them once mirrored)", res.Unmirrored)
	}
	if n := len(res.Backward); n > 0 {
		parts := joinBackward(res.Backward)
		switch {
		case res.Written:
			fmt.Fprintf(&b, "; %d partition(s) moved backward, as allowed (%s)", n, parts)
		case res.AllowBackward:
			fmt.Fprintf(&b, "; %d partition(s) would move backward, as allowed (%s)", n, parts)
		default:
			fmt.Fprintf(&b, "; %d partition(s) would move backward (%s): a confirmed cut-over is refused unless %s", n, parts, allow)
		}
	}
	if res.StoreError != "" {
		fmt.Fprintf(&b, "; the checkpoint store did not answer (%s): stored checkpoints were not compared, and a confirmed cut-over is refused until it answers", res.StoreError)
	}
	if !res.Written {
		fmt.Fprintf(&b, "; %s to write the checkpoints", confirm)
	}
	return b.String()
}
