package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file hands an offset reset sent to one instance to the follower of
// another instance that holds the consumer group (follow mode keeps a
// member there for hours; joining the group would rebalance it). Kafka is
// the channel, as for pauses:
//
//  1. The instance asked writes the request, with an id and a deadline a
//     few seconds ahead, to each named topic's record in the reset-request
//     slot.
//  2. A follower reads that slot every replanCheck. One whose claim holds
//     every partition of the request takes it before its deadline, unless
//     a partition's record in the reset-outcome slot already holds an
//     outcome of that request: it writes "accepted" there for each
//     partition, then ends its drain (which commits what it read), applies
//     the reset with its own membership, writes the outcome there, and
//     starts the next drain from the reset positions.
//  3. The instance asked waits for the outcome. When no follower accepted
//     by the deadline (plus resetDecideSlack), none will (a follower takes
//     a request only if its acceptance is written within resetAcceptSlack
//     after the deadline), and the instance goes on as without a follower:
//     it waits for the group to empty and applies the reset itself.
//
// A request is applied at most once, by all followers of all instances
// and across restarts: the outcome slot is the only memory of who took
// what. A follower never takes a request of which an outcome (accepted,
// applied or failed) is written, and it writes "accepted" before it acts,
// so every crash window leaves the request taken:
//
//   - before the acceptance is written: nothing was done; the instance
//     asked sees no acceptance and applies the reset itself (step 3);
//   - after it, before the reset's commit, or after the commit, before
//     the outcome: the outcome stays "accepted", no follower takes the
//     request again, and the instance asked answers busy after
//     resetOutcomeWait, telling the operator to look at the positions
//     (a dry run) before trying again. The reset is applied once or not
//     at all, never again behind the operator's back.
//
// Kafka's commits have no compare-and-set, so the look and the acceptance
// are two requests; two followers pass them together only if both claims
// held every partition at once, which the group allows one member at a
// time (a member that lost its claim without noticing yet is the window
// left, a rebalance's few seconds).
//
// The instances' clocks must agree within resetDecideSlack minus
// resetAcceptSlack (half a second; Azure's hosts are NTP-synchronized).

// Control record slots of a reset handed to another instance.
const (
	// ControlSlotResetRequest holds, per topic, the latest reset request.
	ControlSlotResetRequest = "control.reset"
	// ControlSlotResetOutcome holds, per partition, the outcome of the
	// latest reset request a follower took.
	ControlSlotResetOutcome = "control.reset.outcome"
)

// Bounds of a reset handed to another instance.
const (
	// resetRequestWait is how long a request can be taken after it was
	// written: a few of the followers' checks (replanCheck).
	resetRequestWait = 3 * replanCheck
	// resetAcceptSlack is how late after the deadline an acceptance may
	// be written; resetDecideSlack is when the instance asked decides
	// that none was.
	resetAcceptSlack = 500 * time.Millisecond
	resetDecideSlack = time.Second
	// resetOutcomeWait bounds the wait for the outcome of an accepted
	// request (the drain's final commit, the reset's claim and commit).
	resetOutcomeWait = 30 * time.Second
	// resetPoll is how often the instance asked reads the outcome.
	resetPoll = 200 * time.Millisecond
)

// resetRecordVersion tags reset requests and outcomes written by this
// mirror.
const resetRecordVersion = 1

// resetRequestRecord is one topic's part of a reset request.
type resetRequestRecord struct {
	V  int    `json:"v"`
	ID string `json:"id"`
	// Topics is how many topics the request names: a follower takes it
	// only once it read all of their records.
	Topics     int           `json:"topics"`
	Until      time.Time     `json:"until"`
	Partitions []int32       `json:"partitions,omitempty"`
	To         string        `json:"to"`
	Timestamp  time.Time     `json:"timestamp,omitzero"`
	Offset     int64         `json:"offset,omitempty"`
	Shift      int64         `json:"shift,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`
	By         string        `json:"by,omitempty"`
}

// Reset outcome states.
const (
	resetAccepted = "accepted"
	resetApplied  = "applied"
	resetFailed   = "failed"
)

// resetOutcomeRecord is one partition's outcome of a reset request.
type resetOutcomeRecord struct {
	V     int    `json:"v"`
	ID    string `json:"id"`
	State string `json:"state"`
	// Field is set when the failure was an *InputError of that field;
	// Busy when it was ErrBusy.
	Error    string `json:"error,omitempty"`
	Field    string `json:"field,omitempty"`
	Busy     bool   `json:"busy,omitempty"`
	Before   int64  `json:"before"`
	From     int64  `json:"from"`
	After    int64  `json:"after"`
	LogStart int64  `json:"log_start"`
	LogEnd   int64  `json:"log_end"`
}

// requestReset hands an applied reset to the instance that holds the
// group. taken is false when no follower took it: the caller goes on as
// without one.
func (s *Service) requestReset(ctx context.Context, req ResetRequest) (res *ResetResult, err error, taken bool) {
	m := s.mirror
	pc, ok := m.opts.Control.(PartitionControl)
	if !ok {
		return nil, nil, false
	}
	if len(req.Topics) == 0 && !req.Select.Empty() {
		if req.Topics, err = m.SelectTopics(ctx, "topics", req.Select); err != nil {
			return nil, err, true
		}
	}
	tps, err := m.resetPartitions(ctx, req)
	if err != nil {
		return nil, err, true
	}
	until := time.Now().Add(resetRequestWait).UTC()
	id, err := m.writeResetRequest(ctx, req, until)
	if err != nil {
		return nil, err, true
	}
	accepted := false
	decide := until.Add(resetDecideSlack)
	for {
		if !sleep(ctx, resetPoll) {
			return nil, ctx.Err(), true
		}
		recs, err := pc.PartitionRecords(ctx, ControlSlotResetOutcome, tps)
		if err != nil {
			m.opts.Logger.DebugContext(ctx, "reading the outcome of a reset request", "err", err)
		}
		outcomes, done := resetOutcomes(recs, tps, id)
		accepted = accepted || len(outcomes) > 0
		switch {
		case done:
			res, err := resetResultOf(req, tps, outcomes)
			return res, err, true
		case !accepted && time.Now().After(decide):
			m.opts.Logger.InfoContext(ctx, "offset reset: no instance took the request; waiting for the group to empty", "id", id)
			return nil, nil, false
		case accepted && time.Now().After(decide.Add(resetOutcomeWait)):
			return nil, fmt.Errorf("%w: the instance holding the group accepted the reset but gave no outcome within %s; look at the positions with a dry run before trying again", ErrBusy, resetOutcomeWait), true
		}
	}
}

// writeResetRequest writes req (its topics chosen) to the reset-request
// slot of each of its topics, to be taken until until, and returns the
// request's id.
func (m *Mirror) writeResetRequest(ctx context.Context, req ResetRequest, until time.Time) (string, error) {
	id, err := newRunID()
	if err != nil {
		return "", err
	}
	topics := slices.Compact(slices.Sorted(slices.Values(req.Topics)))
	rec := resetRequestRecord{V: resetRecordVersion, ID: id, Topics: len(topics), Until: until,
		Partitions: req.Partitions, To: req.To, Timestamp: req.Timestamp, Offset: req.Offset, Shift: req.Shift, Duration: req.Duration, By: clip(req.By)}
	raw, err := json.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("encoding the reset request: %w", err)
	}
	for _, topic := range topics {
		if err := m.opts.Control.WriteControlRecord(ctx, ControlSlotResetRequest, topic, string(raw)); err != nil {
			return "", fmt.Errorf("handing the reset to the instance that holds the group: %w", err)
		}
	}
	m.opts.Logger.InfoContext(ctx, "offset reset: the group has members in other instances; request written for the instance that holds it", "id", id, "by", req.By, "topics", len(topics))
	return id, nil
}

// resetOutcomes returns the outcomes of request id among recs, and whether
// every partition of tps has its final one.
func resetOutcomes(recs map[TopicPartition]string, tps []TopicPartition, id string) (map[TopicPartition]resetOutcomeRecord, bool) {
	out := make(map[TopicPartition]resetOutcomeRecord)
	done := true
	for _, tp := range tps {
		var r resetOutcomeRecord
		if json.Unmarshal([]byte(recs[tp]), &r) != nil || r.V != resetRecordVersion || r.ID != id {
			done = false
			continue
		}
		out[tp] = r
		done = done && r.State != resetAccepted
	}
	return out, done
}

// resetResultOf builds the result of req from its partitions' outcomes.
func resetResultOf(req ResetRequest, tps []TopicPartition, outcomes map[TopicPartition]resetOutcomeRecord) (*ResetResult, error) {
	res := &ResetResult{Applied: true, To: req.To, Timestamp: req.Timestamp, By: req.By, At: time.Now().UTC()}
	if req.To == ResetOffset {
		res.Offset = &req.Offset
	}
	for _, tp := range tps {
		o := outcomes[tp]
		if o.State == resetFailed {
			switch {
			case o.Field != "":
				return nil, &InputError{Field: o.Field, Message: o.Error}
			case o.Busy:
				return nil, fmt.Errorf("%w: %s", ErrBusy, o.Error)
			}
			return nil, fmt.Errorf("the instance holding the group could not apply the reset: %s", o.Error)
		}
		p := ResetPartition{Topic: tp.Topic, Partition: tp.Partition, Before: o.Before, From: o.From, After: o.After, LogStart: o.LogStart, LogEnd: o.LogEnd}
		p.Skipped, p.Resent = max(p.After-p.From, 0), max(p.From-p.After, 0)
		res.Skipped += p.Skipped
		res.Resent += p.Resent
		res.Partitions = append(res.Partitions, p)
	}
	return res, nil
}

// takeResetRequests reads the reset requests of other instances and hands
// the follower those it can take: before their deadline, every partition
// held by d's claim, and taken by no follower before (no outcome of theirs
// written: the outcome slot, not the follower's memory, says so). It
// writes the acceptance before it acts. It reports whether it took one.
func (f *follower) takeResetRequests(ctx context.Context, d *drain) bool {
	m := d.m
	pc, ok := m.opts.Control.(PartitionControl)
	if !ok {
		return false
	}
	recs, err := m.opts.Control.ControlRecords(ctx, ControlSlotResetRequest, topicNames(d.mirrored))
	if err != nil {
		d.logger.DebugContext(ctx, "reading reset requests", "err", err)
		return false
	}
	byID := map[string][]string{}
	reqs := map[string]resetRequestRecord{}
	now := time.Now()
	for topic, raw := range recs {
		var r resetRequestRecord
		if raw == "" || json.Unmarshal([]byte(raw), &r) != nil || r.V != resetRecordVersion || !now.Before(r.Until) {
			continue
		}
		byID[r.ID] = append(byID[r.ID], topic)
		reqs[r.ID] = r
	}
	took := false
	assigned := d.claim.Assigned()
	for id, topics := range byID {
		r := reqs[id]
		if len(topics) != r.Topics {
			continue // the other records are not written yet, or not ours
		}
		slices.Sort(topics)
		req := ResetRequest{Topics: topics, Partitions: r.Partitions, To: r.To, Timestamp: r.Timestamp, Offset: r.Offset, Shift: r.Shift, Duration: r.Duration, Apply: true, By: r.By}
		tps, err := m.resetPartitions(ctx, req)
		if err != nil || !holdsAll(assigned, tps) {
			continue // the requester finds the error itself, or another member holds some
		}
		if taken, err := resetTaken(ctx, pc, tps, id); err != nil || taken {
			if err != nil {
				d.logger.DebugContext(ctx, "reading the outcome of a reset request of another instance: not taken for now", "id", id, "err", err)
			}
			continue
		}
		if err := writeResetOutcomes(ctx, pc, tps, resetOutcomeRecord{V: resetRecordVersion, ID: id, State: resetAccepted}, r.Until.Add(resetAcceptSlack)); err != nil {
			d.logger.WarnContext(ctx, "a reset request of another instance was not taken", "id", id, "err", err)
			answerResetRequest(m, pc, id, tps, nil, fmt.Errorf("%w: the instance holding the group took the reset too late and did not apply it; try again", ErrBusy))
			continue
		}
		d.logger.InfoContext(ctx, "offset reset sent to another instance: taken by the following drain", "id", id, "by", r.By, "partitions", len(tps))
		f.mu.Lock()
		f.resets = append(f.resets, &heldReset{req: req, answer: func(res *ResetResult, err error) {
			answerResetRequest(m, pc, id, tps, res, err)
		}})
		f.mu.Unlock()
		took = true
	}
	return took
}

// resetTaken reports whether the reset request id was taken before, by
// any follower of any instance, this process or one before a restart: one
// of its partitions holds an outcome of it (accepted, applied or failed).
func resetTaken(ctx context.Context, pc PartitionControl, tps []TopicPartition, id string) (bool, error) {
	recs, err := pc.PartitionRecords(ctx, ControlSlotResetOutcome, tps)
	if err != nil {
		return false, err
	}
	outcomes, _ := resetOutcomes(recs, tps, id)
	return len(outcomes) > 0, nil
}

// holdsAll reports whether assigned holds every partition of tps.
func holdsAll(assigned map[TopicPartition]int64, tps []TopicPartition) bool {
	for _, tp := range tps {
		if _, ok := assigned[tp]; !ok {
			return false
		}
	}
	return len(tps) > 0
}

// writeResetOutcomes writes o to the outcome record of every partition of
// tps; with a non-zero by, it fails unless the write completed by then.
func writeResetOutcomes(ctx context.Context, pc PartitionControl, tps []TopicPartition, o resetOutcomeRecord, by time.Time) error {
	raw, err := json.Marshal(o)
	if err != nil {
		return err
	}
	recs := make(map[TopicPartition]string, len(tps))
	for _, tp := range tps {
		recs[tp] = string(raw)
	}
	return writeResetRecords(ctx, pc, recs, by)
}

// writeResetRecords writes recs to the outcome slot; with a non-zero by,
// it fails unless the write completed by then.
func writeResetRecords(ctx context.Context, pc PartitionControl, recs map[TopicPartition]string, by time.Time) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveWriteTimeout)
	defer cancel()
	if err := pc.WritePartitionRecords(wctx, ControlSlotResetOutcome, recs); err != nil {
		return err
	}
	if !by.IsZero() && time.Now().After(by) {
		return fmt.Errorf("written after the request's deadline (%s)", by.Format(time.RFC3339Nano))
	}
	return nil
}

// answerResetRequest writes the outcome of the reset request id.
func answerResetRequest(m *Mirror, pc PartitionControl, id string, tps []TopicPartition, res *ResetResult, err error) {
	recs := make(map[TopicPartition]string, len(tps))
	if err != nil {
		o := resetOutcomeRecord{V: resetRecordVersion, ID: id, State: resetFailed, Error: clip(err.Error()), Busy: errors.Is(err, ErrBusy)}
		var ie *InputError
		if errors.As(err, &ie) {
			o.Field, o.Error = ie.Field, clip(ie.Message)
		}
		raw, _ := json.Marshal(o)
		for _, tp := range tps {
			recs[tp] = string(raw)
		}
	} else {
		for _, p := range res.Partitions {
			raw, _ := json.Marshal(resetOutcomeRecord{V: resetRecordVersion, ID: id, State: resetApplied,
				Before: p.Before, From: p.From, After: p.After, LogStart: p.LogStart, LogEnd: p.LogEnd})
			recs[TopicPartition{Topic: p.Topic, Partition: p.Partition}] = string(raw)
		}
	}
	if werr := writeResetRecords(context.Background(), pc, recs, time.Time{}); werr != nil {
		m.opts.Logger.Warn("writing the outcome of a reset request of another instance", "id", id, "err", werr)
	}
}
