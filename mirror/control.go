package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Control is what offset resets and pauses need from Kafka besides the
// [Source]. Implementations must be safe for concurrent use.
type Control interface {
	// OffsetsForTime returns, per partition, the earliest offset whose
	// record timestamp is at or after t, or the log end when none is.
	OffsetsForTime(ctx context.Context, tps []TopicPartition, t time.Time) (map[TopicPartition]int64, error)
	// GroupMembers returns how many members the consumer group has now.
	GroupMembers(ctx context.Context) (int, error)
	// ControlRecords returns the control record stored for each topic ("" or
	// absent where none). Control records are kept apart from the group's
	// committed offsets and their metadata.
	ControlRecords(ctx context.Context, topics []string) (map[string]string, error)
	// WriteControlRecord stores a topic's control record.
	WriteControlRecord(ctx context.Context, topic, record string) error
}

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
	out := map[string]Pause{}
	if m.opts.Control == nil || len(topics) == 0 {
		return out, nil
	}
	recs, err := m.opts.Control.ControlRecords(ctx, topics)
	if err != nil {
		return nil, fmt.Errorf("reading pauses: %w", err)
	}
	for topic, raw := range recs {
		var r pauseRecord
		if raw == "" || json.Unmarshal([]byte(raw), &r) != nil || r.V != pauseRecordVersion {
			continue
		}
		if r.Paused {
			out[topic] = Pause{Topic: topic, Paused: true, By: r.By, At: r.At, Reason: r.Reason}
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
	if err := m.opts.Control.WriteControlRecord(ctx, topic, string(raw)); err != nil {
		return Pause{}, fmt.Errorf("storing the pause of %q: %w", topic, err)
	}
	msg := "topic resumed"
	if paused {
		msg = "topic paused"
	}
	m.opts.Logger.InfoContext(ctx, msg, "topic", topic, "by", p.By, "reason", p.Reason, "at", p.At.Format(time.RFC3339))
	return p, nil
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

// pauseRefreshInterval is how often a process re-writes the pause records
// it sees. Kafka expires the offsets of a group without members
// offsets.retention.minutes (7 days by default) after their last commit;
// re-writing them keeps a long pause from ending by itself.
const pauseRefreshInterval = time.Hour

// refreshPauses re-writes the records of paused topics, unchanged, at most
// once per pauseRefreshInterval per process. Failures are logged: the
// records stay valid for days.
func (m *Mirror) refreshPauses(ctx context.Context, pauses map[string]Pause) {
	if len(pauses) == 0 {
		return
	}
	m.mu.Lock()
	due := time.Since(m.pausesRefreshed) >= pauseRefreshInterval
	if due {
		m.pausesRefreshed = time.Now()
	}
	m.mu.Unlock()
	if !due {
		return
	}
	for topic, p := range pauses {
		raw, err := json.Marshal(pauseRecord{V: pauseRecordVersion, Paused: true, By: p.By, At: p.At, Reason: p.Reason})
		if err == nil {
			err = m.opts.Control.WriteControlRecord(ctx, topic, string(raw))
		}
		if err != nil {
			m.opts.Logger.WarnContext(ctx, "re-writing a pause record", "topic", topic, "err", err)
		}
	}
}

// dropPaused removes paused topics from topics and returns their names.
func (m *Mirror) dropPaused(ctx context.Context, topics []Topic) (kept []Topic, paused []string, err error) {
	if m.opts.Control == nil {
		return topics, nil, nil
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	pauses, err := m.Pauses(ctx, names)
	if err != nil {
		return nil, nil, err
	}
	m.refreshPauses(ctx, pauses)
	for _, t := range topics {
		if _, ok := pauses[t.Name]; ok {
			paused = append(paused, t.Name)
		} else {
			kept = append(kept, t)
		}
	}
	return kept, paused, nil
}
