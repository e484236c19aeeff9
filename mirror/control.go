package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
)

// Control is what offset resets and pauses need from Kafka besides the
// [Source]. Implementations must be safe for concurrent use.
type Control interface {
	// OffsetsForTime returns, per partition, the earliest offset whose
	// record timestamp is at or after t, or the log end when none is.
	OffsetsForTime(ctx context.Context, tps []TopicPartition, t time.Time) (map[TopicPartition]int64, error)
	// OtherMembers returns how many members the consumer group has now
	// besides this process's own.
	OtherMembers(ctx context.Context) (int, error)
	// ControlRecords returns the control record stored in slot for each
	// topic ("" or absent where none). Control records are kept apart from
	// the group's committed offsets and their metadata.
	ControlRecords(ctx context.Context, slot string, topics []string) (map[string]string, error)
	// WriteControlRecord stores a topic's control record in slot.
	WriteControlRecord(ctx context.Context, slot, topic, record string) error
	// CommittedMetadata returns the group's committed offsets with the
	// metadata stored beside them (NoOffset and "" where none), read
	// without joining the group: an offset reset's dry run plans from
	// them as a drain's start does.
	CommittedMetadata(ctx context.Context, tps []TopicPartition) (map[TopicPartition]CommitOffset, error)
}

// Control record slots. An operator's pause or resume is written to the
// decision slot; drains only ever write the kept slot, with a copy of the
// newest decision, so that Kafka's offset retention does not end a long
// pause. A topic's pause state is the newer (by decision time) of the two,
// so a drain's copy can never undo a decision made after it read the
// records.
const (
	ControlSlotDecision = "control"
	ControlSlotKept     = "control.kept"
)

// ErrBusy is returned (wrapped) when an offset reset finds its partitions
// held by a drain, in this process or in another member of the group.
var ErrBusy = errors.New("partitions held by a drain")

// ErrNoControl is returned when the mirror was built without a [Control].
var ErrNoControl = errors.New("offset resets and pauses need a Kafka control (Options.Control)")

// InputError is a request that cannot be carried out as given. Field names
// the culprit as it appears in the request body.
type InputError struct {
	Field   string
	Message string
}

// Error returns "field: message".
func (e *InputError) Error() string { return e.Field + ": " + e.Message }

func inputErr(field, format string, args ...any) error {
	return &InputError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Pause is the pause state of one topic.
type Pause struct {
	Topic  string    `json:"topic"`
	Paused bool      `json:"paused"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// pauseRecordVersion tags control records written by this mirror.
const pauseRecordVersion = 1

type pauseRecord struct {
	V      int       `json:"v"`
	Paused bool      `json:"paused"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// maxControlText bounds who and why in a control record (Kafka keeps at
// most offset.metadata.max.bytes, 4096 by default, of commit metadata).
const maxControlText = 256

func clip(s string) string {
	if len(s) <= maxControlText {
		return s
	}
	return s[:maxControlText]
}

// Pauses returns the paused topics among topics.
func (m *Mirror) Pauses(ctx context.Context, topics []string) (map[string]Pause, error) {
	states, err := m.pauseStates(ctx, topics)
	if err != nil {
		return nil, err
	}
	out := map[string]Pause{}
	for topic, st := range states {
		if r := st.newest(); r != nil && r.Paused {
			out[topic] = Pause{Topic: topic, Paused: true, By: r.By, At: r.At, Reason: r.Reason}
		}
	}
	return out, nil
}

// pauseState is what the two control slots hold for one topic.
type pauseState struct {
	decision, kept *pauseRecord
}

// newest is the record with the later decision time (the operator's
// decision on a tie), nil when neither slot holds one.
func (st pauseState) newest() *pauseRecord {
	switch {
	case st.kept == nil:
		return st.decision
	case st.decision == nil || st.kept.At.After(st.decision.At):
		return st.kept
	default:
		return st.decision
	}
}

// pauseStates reads both control slots of topics; topics without any
// record are left out.
func (m *Mirror) pauseStates(ctx context.Context, topics []string) (map[string]pauseState, error) {
	out := map[string]pauseState{}
	if m.opts.Control == nil || len(topics) == 0 {
		return out, nil
	}
	// The two slots are read at once: one round trip to Kafka before a
	// drain's claim, not two. Their order does not matter: the state is
	// the newer of the two records by decision time, and a kept record is
	// only ever a copy of a decision.
	slots := []string{ControlSlotDecision, ControlSlotKept}
	read := make([]map[string]string, len(slots))
	g, gctx := errgroup.WithContext(ctx)
	for i, slot := range slots {
		g.Go(func() error {
			var err error
			read[i], err = m.opts.Control.ControlRecords(gctx, slot, topics)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("reading pauses: %w", err)
	}
	for i, slot := range slots {
		for topic, raw := range read[i] {
			var r pauseRecord
			if raw == "" || json.Unmarshal([]byte(raw), &r) != nil || r.V != pauseRecordVersion {
				continue
			}
			st := out[topic]
			if slot == ControlSlotDecision {
				st.decision = &r
			} else {
				st.kept = &r
			}
			out[topic] = st
		}
	}
	return out, nil
}

// SetPaused pauses or resumes a mirrored topic for every instance: drains
// that start afterwards leave a paused topic out (its committed offsets stay
// where they are). A drain already running finishes first.
func (m *Mirror) SetPaused(ctx context.Context, topic string, paused bool, by, reason string) (Pause, error) {
	if m.opts.Control == nil {
		return Pause{}, ErrNoControl
	}
	if topic == "" {
		return Pause{}, inputErr("topic", "missing: name a mirrored topic")
	}
	if _, err := m.mirroredTopic(ctx, "topic", topic); err != nil {
		return Pause{}, err
	}
	p := Pause{Topic: topic, Paused: paused, By: clip(by), At: time.Now().UTC(), Reason: clip(reason)}
	raw, err := json.Marshal(pauseRecord{V: pauseRecordVersion, Paused: p.Paused, By: p.By, At: p.At, Reason: p.Reason})
	if err != nil {
		return Pause{}, fmt.Errorf("encoding the pause record: %w", err)
	}
	if err := m.opts.Control.WriteControlRecord(ctx, ControlSlotDecision, topic, string(raw)); err != nil {
		return Pause{}, fmt.Errorf("storing the pause of %q: %w", topic, err)
	}
	msg := "topic resumed"
	if paused {
		msg = "topic paused"
	}
	m.opts.Logger.InfoContext(ctx, msg, "topic", topic, "by", p.By, "reason", p.Reason, "at", p.At.Format(time.RFC3339))
	return p, nil
}

// SetPausedTopics pauses or resumes every mirrored topic sel names (see
// SetPaused); it stops at the first failure, returning what was done.
func (m *Mirror) SetPausedTopics(ctx context.Context, sel TopicSelection, paused bool, by, reason string) ([]Pause, error) {
	names, err := m.SelectTopics(ctx, "topics", sel)
	if err != nil {
		return nil, err
	}
	var out []Pause
	for _, name := range names {
		p, err := m.SetPaused(ctx, name, paused, by, reason)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// mirroredTopic returns the mirrored topic named name, or an InputError for
// field.
func (m *Mirror) mirroredTopic(ctx context.Context, field, name string) (Topic, error) {
	topics, err := m.selectTopics(ctx, nil)
	if err != nil {
		return Topic{}, err
	}
	for _, t := range topics {
		if t.Name == name {
			return t, nil
		}
	}
	return Topic{}, inputErr(field, "unknown topic %q: not a mirrored Kafka topic (see KAFKA_TOPICS_INCLUDE and KAFKA_TOPICS_EXCLUDE)", name)
}

// refreshPauses copies, at most once per Options.PauseRefresh per process,
// the newest pause decision of each topic into the kept slot: a paused
// topic's record is re-written so Kafka's offset retention (the control
// group has no members; offsets.retention.minutes, 7 days by default) never
// ends a long pause, and a kept copy older than the operator's last
// decision is replaced. It never writes the decision slot, so it cannot
// undo a pause or resume made after it read the records. Failures are
// logged: the records stay valid for days.
func (m *Mirror) refreshPauses(ctx context.Context, states map[string]pauseState) {
	m.mu.Lock()
	due := time.Since(m.pausesRefreshed) >= m.opts.PauseRefresh
	if due {
		m.pausesRefreshed = time.Now()
	}
	m.mu.Unlock()
	if !due {
		return
	}
	for topic, st := range states {
		r := st.newest()
		if r == nil || (!r.Paused && r == st.kept) || (!r.Paused && st.kept == nil) {
			continue
		}
		raw, err := json.Marshal(r)
		if err == nil {
			err = m.opts.Control.WriteControlRecord(ctx, ControlSlotKept, topic, string(raw))
		}
		if err != nil {
			m.opts.Logger.WarnContext(ctx, "re-writing a pause record", "topic", topic, "err", err)
		}
	}
}

// dropPaused removes paused topics from topics and returns their names and
// when the oldest of their pauses was decided.
func (m *Mirror) dropPaused(ctx context.Context, topics []Topic) (kept []Topic, paused []string, since time.Time, err error) {
	if m.opts.Control == nil {
		return topics, nil, since, nil
	}
	states, err := m.pauseStates(ctx, topicNames(topics))
	if err != nil {
		return nil, nil, since, err
	}
	m.refreshPauses(ctx, states)
	for _, t := range topics {
		if r := states[t.Name].newest(); r != nil && r.Paused {
			paused = append(paused, t.Name)
			if since.IsZero() || r.At.Before(since) {
				since = r.At
			}
		} else {
			kept = append(kept, t)
		}
	}
	return kept, paused, since, nil
}
