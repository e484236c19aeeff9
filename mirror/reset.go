package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Offset reset targets, as kafka-consumer-groups.sh --reset-offsets names
// them.
const (
	ResetEarliest  = "earliest"
	ResetLatest    = "latest"
	ResetTimestamp = "timestamp"
	ResetOffset    = "offset"
	// ResetShiftBy moves each partition by ResetRequest.Shift records from
	// where the next drain would start, within the log.
	ResetShiftBy = "shift-by"
	// ResetByDuration goes to the first record at or after now less
	// ResetRequest.Duration.
	ResetByDuration = "by-duration"
	// ResetToCurrent commits where the next drain would start anyway
	// (with fresh metadata: the topic's id, and what deduplication keeps).
	ResetToCurrent = "to-current"
)

// resetTargets lists the targets for error messages.
const resetTargets = "earliest, latest, timestamp, offset, shift-by, by-duration or to-current"

// ResetRequest asks to move the group's committed offsets.
type ResetRequest struct {
	// Topics are mirrored topics (or Select names them); Partitions
	// narrows every one of them (nil: all partitions).
	Topics     []string
	Select     TopicSelection
	Partitions []int32
	// To is one of the Reset constants; Timestamp goes with ResetTimestamp,
	// Offset with ResetOffset.
	To        string
	Timestamp time.Time
	Offset    int64
	// Shift goes with ResetShiftBy (negative: back), Duration with
	// ResetByDuration.
	Shift    int64
	Duration time.Duration
	// Apply commits the new offsets; without it the reset is a dry run.
	Apply bool
	// By says who asked, for the log.
	By string
}

// ResetPartition is the plan (or the outcome) of a reset on one partition.
type ResetPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Before is the committed offset (NoOffset if none); From is where the
	// next drain would have started.
	Before int64 `json:"before"`
	From   int64 `json:"from"`
	// After is the new committed offset.
	After    int64 `json:"after"`
	LogStart int64 `json:"log_start"`
	LogEnd   int64 `json:"log_end"`
	// Skipped counts records that will never be mirrored (After > From);
	// Resent counts records that will be mirrored again (After < From).
	Skipped int64 `json:"skipped"`
	Resent  int64 `json:"resent"`
}

// ResetResult is a dry run or an applied reset.
type ResetResult struct {
	Applied    bool             `json:"applied"`
	To         string           `json:"to"`
	Timestamp  time.Time        `json:"timestamp,omitzero"`
	Offset     *int64           `json:"offset,omitempty"`
	By         string           `json:"by,omitempty"`
	At         time.Time        `json:"at"`
	Skipped    int64            `json:"skipped"`
	Resent     int64            `json:"resent"`
	Partitions []ResetPartition `json:"partitions"`
}

// ResetOffsets plans a reset of the group's committed offsets and, with
// req.Apply, commits it through a claim of the consumer group, so Kafka
// fences it against drains that join meanwhile. A reset is refused with
// ErrBusy while a drain of this process holds one of the partitions or the
// group has members (a drain of another instance). Bad requests give an
// *InputError naming the field.
func (m *Mirror) ResetOffsets(ctx context.Context, req ResetRequest) (*ResetResult, error) {
	return m.resetOffsets(ctx, req, emptyGroupWait)
}

// resetOffsets is ResetOffsets waiting at most wait for the group to have
// no member of another process (see awaitEmptyGroup); with a negative wait
// it does not ask: this process's member holds the group's partitions (a
// follower applying a reset between two of its drains), so the reset's
// claim shares its generation and rebalances no one.
func (m *Mirror) resetOffsets(ctx context.Context, req ResetRequest, wait time.Duration) (*ResetResult, error) {
	if len(req.Topics) == 0 && !req.Select.Empty() {
		names, err := m.SelectTopics(ctx, "topics", req.Select)
		if err != nil {
			return nil, err
		}
		req.Topics = names
	}
	tps, err := m.resetPartitions(ctx, req)
	if err != nil {
		return nil, err
	}
	res := &ResetResult{To: req.To, Timestamp: req.Timestamp, By: req.By, At: time.Now().UTC()}
	if req.To == ResetOffset {
		res.Offset = &req.Offset
	}
	if !req.Apply {
		committed, err := m.opts.Control.CommittedMetadata(ctx, tps)
		if err != nil {
			return nil, fmt.Errorf("reading committed offsets: %w", err)
		}
		ids, err := m.topicIDs(ctx, req.Topics)
		if err != nil {
			return nil, err
		}
		return res, m.plan(ctx, req, tps, committed, ids, res)
	}

	got, busy := m.hold("offset reset", tps, m.holdMark())
	defer m.release(got)
	if len(busy) > 0 {
		return nil, &heldHereError{held: busy}
	}
	if err := m.awaitEmptyGroup(ctx, wait); err != nil {
		return nil, err
	}
	// The claim subscribes to every mirrored topic, as drains do: it
	// shares this process's membership, and no topic leaves the group's
	// subscription while the reset runs.
	mirrored, err := m.selectTopics(ctx, nil)
	if err != nil {
		return nil, err
	}
	claim, err := m.source.Claim(ctx, topicNames(mirrored))
	if err != nil {
		return nil, fmt.Errorf("joining consumer group for the reset: %w", err)
	}
	defer func() {
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := claim.Release(releaseCtx); err != nil {
			m.opts.Logger.WarnContext(ctx, "leaving consumer group after a reset", "err", err)
		}
	}()
	assigned := claim.Assigned()
	var notOwned []TopicPartition
	for _, tp := range tps {
		if _, ok := assigned[tp]; !ok {
			notOwned = append(notOwned, tp)
		}
	}
	if len(notOwned) > 0 {
		return nil, fmt.Errorf("%w: another member of the group holds %s; try again when it ends", ErrBusy, tpList(notOwned))
	}
	ids, err := m.topicIDs(ctx, req.Topics)
	if err != nil {
		return nil, err
	}
	old := claim.AssignedMetadata()
	committed := make(map[TopicPartition]CommitOffset, len(tps))
	for _, tp := range tps {
		committed[tp] = CommitOffset{Offset: assigned[tp], Metadata: old[tp]}
	}
	if err := m.plan(ctx, req, tps, committed, ids, res); err != nil {
		return nil, err
	}
	offsets := make(map[TopicPartition]CommitOffset, len(res.Partitions))
	for _, p := range res.Partitions {
		tp := TopicPartition{Topic: p.Topic, Partition: p.Partition}
		before := p.Before
		if m.startPosition(p.Before, old[tp], ids[p.Topic], Watermarks{Start: p.LogStart, End: p.LogEnd}, false).recreated {
			before = NoOffset // a commit of an earlier topic says nothing of this one
		}
		meta, err := m.resetMetadata(tp, before, old[tp], ids[p.Topic]).encode()
		if err != nil {
			return nil, fmt.Errorf("reset of %s: %w", tp, err)
		}
		offsets[tp] = CommitOffset{Offset: p.After, Metadata: meta}
	}
	if err := claim.CommitWithMetadata(ctx, offsets); err != nil {
		return nil, fmt.Errorf("committing the reset: %w", err)
	}
	res.Applied = true
	m.forgetAcked(tps)
	for _, p := range res.Partitions {
		m.opts.Logger.InfoContext(ctx, "offsets reset", "by", req.By, "at", res.At.Format(time.RFC3339),
			"topic", p.Topic, "partition", p.Partition, "before", p.Before, "after", p.After,
			"to", req.To, "skipped", p.Skipped, "resent", p.Resent)
	}
	return res, nil
}

// emptyGroupWait is how long a reset waits for the group to have no
// members: a process may stay a member for a few seconds after its last
// drain, to rejoin without a rebalance.
const emptyGroupWait = 8 * time.Second

// awaitEmptyGroup waits up to wait for the consumer group to have no
// members besides this process's own (a negative wait does not ask); a
// drain that holds partitions in another instance is a member. Joining
// while one runs would make the group rebalance and cut that drain short,
// so the reset is refused with a *groupHeldError (ErrBusy) instead; the
// Service then hands it to the instance that holds the group
// (resetrequest.go). This process's own member is shared by the reset's
// claim (it subscribes to paused topics too), so a drain following other
// topics here goes on.
func (m *Mirror) awaitEmptyGroup(ctx context.Context, wait time.Duration) error {
	if wait < 0 {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		n, err := m.opts.Control.OtherMembers(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &groupHeldError{members: n}
		}
		if !sleep(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// groupHeldError is the ErrBusy of a reset while the consumer group has
// members in other processes.
type groupHeldError struct{ members int }

func (e *groupHeldError) Error() string {
	return fmt.Sprintf("%v: the consumer group has %d members in other processes (a drain is running there) and none of them took the reset; try again when it ends", ErrBusy, e.members)
}

func (e *groupHeldError) Unwrap() error { return ErrBusy }

// topicIDs returns the ids of topics (KIP-516; "" where the broker has
// none), failing when one no longer exists.
func (m *Mirror) topicIDs(ctx context.Context, topics []string) (map[string]string, error) {
	listed, err := m.source.Topics(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading topic ids: %w", err)
	}
	ids := make(map[string]string, len(listed))
	for _, tp := range listed {
		ids[tp.Name] = tp.ID
	}
	out := make(map[string]string, len(topics))
	for _, name := range topics {
		id, ok := ids[name]
		if !ok {
			return nil, fmt.Errorf("topic %q no longer exists", name)
		}
		out[name] = id
	}
	return out, nil
}

// resetMetadata is the commit metadata an offset reset of tp writes, in the
// format of a drain's own commits (the topic's id), so the next drain checks
// the reset position as it checks its own commits. With deduplication on it
// keeps what the replaced position said about Event Hubs: a position whose
// last drain ended unclean keeps that drain's floors, with From set to the
// replaced offset (records from there on may be in the hub and are read
// back; those below it are sent again, as the reset's plan says); any other
// position is clean (nothing at or above it was published by the mirror
// but what the plan counts as resent).
func (m *Mirror) resetMetadata(tp TopicPartition, before int64, oldMeta, topicID string) commitMeta {
	cm := commitMeta{TopicID: topicID}
	if !m.opts.Deduplicate {
		return cm
	}
	cm.Hub = m.router.Hub(tp.Topic)
	old, ours := parseCommitMeta(oldMeta)
	switch {
	case before == NoOffset || !ours || old.Clean:
		cm.Clean = true
	case old.Floors != nil && old.Hub == cm.Hub && old.TopicID == topicID:
		cm.Floors, cm.From = old.Floors, max(before, old.From)
	}
	return cm
}

// resetPartitions validates the request and lists its partitions.
func (m *Mirror) resetPartitions(ctx context.Context, req ResetRequest) ([]TopicPartition, error) {
	if m.opts.Control == nil {
		return nil, ErrNoControl
	}
	switch req.To {
	case ResetEarliest, ResetLatest, ResetTimestamp, ResetOffset, ResetShiftBy, ResetByDuration, ResetToCurrent:
	case "":
		return nil, inputErr("to", "missing: want %s", resetTargets)
	default:
		return nil, inputErr("to", "%q: want %s", req.To, resetTargets)
	}
	if req.To == ResetByDuration && req.Duration <= 0 {
		return nil, inputErr("duration", "missing or not positive: to=by-duration needs a duration such as \"90m\" or \"PT1H30M\"")
	}
	if req.To == ResetShiftBy && req.Shift == 0 {
		return nil, inputErr("shift", "missing or 0: to=shift-by needs a number of records (negative: back)")
	}
	if req.To == ResetTimestamp {
		if req.Timestamp.IsZero() {
			return nil, inputErr("timestamp", "missing: to=timestamp needs an RFC 3339 time such as 2026-12-03T05:00:00Z")
		}
		if req.Timestamp.After(time.Now()) {
			return nil, inputErr("timestamp", "%s is in the future", req.Timestamp.Format(time.RFC3339))
		}
	}
	if req.To == ResetOffset && req.Offset < 0 {
		return nil, inputErr("offset", "%d: want a non-negative offset", req.Offset)
	}
	if len(req.Topics) == 0 {
		return nil, inputErr("topics", "missing: name one or more mirrored topics (a list, or a regular expression such as \".*\" for all)")
	}
	var tps []TopicPartition
	seen := map[string]bool{}
	for _, name := range req.Topics {
		if seen[name] {
			continue
		}
		seen[name] = true
		t, err := m.mirroredTopic(ctx, "topics", name)
		if err != nil {
			return nil, err
		}
		if req.Partitions == nil {
			for p := range t.Partitions {
				tps = append(tps, TopicPartition{Topic: name, Partition: int32(p)})
			}
			continue
		}
		for _, p := range req.Partitions {
			if p < 0 || int(p) >= t.Partitions {
				return nil, inputErr("partitions", "topic %q has no partition %d (it has %d)", name, p, t.Partitions)
			}
			tps = append(tps, TopicPartition{Topic: name, Partition: p})
		}
	}
	if len(tps) == 0 {
		return nil, inputErr("partitions", "empty: name partitions or leave the field out for all")
	}
	sortTopicPartitions(tps)
	return slices.Compact(tps), nil
}

// plan fills res with the reset of tps from committed (the stored
// commits with their metadata) and ids (the topics' ids now): From is
// where a drain starting now would start (startPosition).
func (m *Mirror) plan(ctx context.Context, req ResetRequest, tps []TopicPartition, committed map[TopicPartition]CommitOffset, ids map[string]string, res *ResetResult) error {
	wms, err := m.source.Watermarks(ctx, tps)
	if err != nil {
		return fmt.Errorf("reading Kafka watermarks: %w", err)
	}
	known := make(map[TopicPartition]int64, len(committed))
	for tp, c := range committed {
		known[tp] = c.Offset
	}
	first := m.firstDeployment(ctx, known, m.opts.Logger)
	var byTime map[TopicPartition]int64
	switch req.To {
	case ResetTimestamp:
		byTime, err = m.opts.Control.OffsetsForTime(ctx, tps, req.Timestamp)
	case ResetByDuration:
		byTime, err = m.opts.Control.OffsetsForTime(ctx, tps, res.At.Add(-req.Duration))
	}
	if err != nil {
		return err
	}
	res.Partitions, res.Skipped, res.Resent = nil, 0, 0
	for _, tp := range tps {
		wm := wms[tp]
		c, ok := committed[tp]
		if !ok {
			c.Offset = NoOffset
		}
		before := c.Offset
		from := m.startPosition(before, c.Metadata, ids[tp.Topic], wm, first).from
		p := ResetPartition{Topic: tp.Topic, Partition: tp.Partition, Before: before, From: from, LogStart: wm.Start, LogEnd: wm.End}
		switch req.To {
		case ResetEarliest:
			p.After = wm.Start
		case ResetLatest:
			p.After = wm.End
		case ResetTimestamp, ResetByDuration:
			p.After = min(max(byTime[tp], wm.Start), wm.End)
		case ResetShiftBy:
			p.After = min(max(from+req.Shift, wm.Start), wm.End)
		case ResetToCurrent:
			p.After = from
		case ResetOffset:
			if req.Offset < wm.Start || req.Offset > wm.End {
				return inputErr("offset", "%d is out of range for %s: the log holds offsets %d to %d (the end, %d, is allowed)", req.Offset, tp, wm.Start, wm.End-1, wm.End)
			}
			p.After = req.Offset
		}
		p.Skipped, p.Resent = max(p.After-from, 0), max(from-p.After, 0)
		res.Skipped += p.Skipped
		res.Resent += p.Resent
		res.Partitions = append(res.Partitions, p)
	}
	return nil
}

func tpList(tps []TopicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = tp.String()
	}
	return strings.Join(s, ", ")
}

// heldHereError is the ErrBusy of a reset whose partitions a drain of this
// process holds.
type heldHereError struct{ held []TopicPartition }

func (e *heldHereError) Error() string {
	return fmt.Sprintf("%v: a drain of this process holds %s; try again when it ends", ErrBusy, tpList(e.held))
}

func (e *heldHereError) Unwrap() error { return ErrBusy }

// ResetOffsets is [Mirror.ResetOffsets] for an operator, sent to any
// instance. An applied reset goes to whoever holds the partitions:
//
//   - This process's following drain (in follow mode one always holds
//     them: it is handed over from tick to tick): it ends its drain (which
//     sends and commits what it read and lets go), applies the reset and
//     starts the next drain from the reset positions, in the same window.
//   - The follower of another instance (the group has members there): the
//     request is written to the control records, which that follower reads
//     every few seconds; it applies the reset the same way and writes the
//     outcome back (resetrequest.go). When no instance takes it (their
//     drains do not follow), the reset waits for the group to empty, as
//     before.
//   - Otherwise this process applies it itself.
//
// The operator need not know which instance holds the group.
func (s *Service) ResetOffsets(ctx context.Context, req ResetRequest) (*ResetResult, error) {
	if !req.Apply {
		return s.mirror.ResetOffsets(ctx, req)
	}
	res, err := s.mirror.resetOffsets(ctx, req, 0)
	var held *heldHereError
	var other *groupHeldError
	switch {
	case errors.As(err, &held):
		f := s.runningFollower()
		if f == nil {
			return res, err
		}
		s.mirror.opts.Logger.InfoContext(ctx, "offset reset: handed to the following drain, which lets go of the partitions and applies it", "partitions", tpList(held.held))
		res, err = f.reset(ctx, req)
		if errors.Is(err, errFollowerEnded) {
			return s.mirror.ResetOffsets(ctx, req)
		}
		return res, err
	case errors.As(err, &other):
		if res, err, taken := s.requestReset(ctx, req); taken {
			return res, err
		}
		return s.mirror.ResetOffsets(ctx, req)
	}
	return res, err
}
