package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file shares the live problems of running drains between instances.
// Only the instance running a drain sees its sends or fetches fail; every
// instance serves the status. So a drain publishes its ongoing outages
// (lasting LiveFailureAfter or longer) on each partition it holds, in the
// live slot of the control records, and every instance reads them with
// the status. Writes are rare: when the set of outages changes, and a
// heartbeat every LiveHeartbeat while one lasts. A record not refreshed for
// LiveStaleAfter is ignored (its instance stopped, or lost Kafka: then each
// instance finds Kafka down itself). Kafka is the store: it is the one the
// instances share that still works when Event Hubs does not.

// ControlSlotLive is the control slot holding, per partition, the live
// outages of the drain that holds it.
const ControlSlotLive = "control.live"

// Live problem publishing bounds.
const (
	// livePublishCheck is how often a running drain compares its outages
	// with what it published (in memory; it writes only on a change).
	livePublishCheck = time.Second
	// LiveHeartbeat is how often a drain re-writes outages that last.
	LiveHeartbeat = 5 * time.Second
	// LiveStaleAfter is how long a published record counts without being
	// re-written.
	LiveStaleAfter = 4 * LiveHeartbeat
	// liveWriteTimeout bounds one write or read of the live records.
	liveWriteTimeout = 3 * time.Second
	// maxLiveRecord keeps a record under Kafka's default
	// offset.metadata.max.bytes (4096).
	maxLiveRecord = 3800
	// maxLiveError bounds the error text of one published outage.
	maxLiveError = 200
)

// PartitionControl is implemented by controls that can keep a record per
// partition (the commit metadata of a control group), which live problems
// need: several instances may drain the same topic's partitions at once.
type PartitionControl interface {
	// PartitionRecords returns the records stored in slot for tps ("" or
	// absent where none).
	PartitionRecords(ctx context.Context, slot string, tps []TopicPartition) (map[TopicPartition]string, error)
	// WritePartitionRecords stores records in slot, in one request.
	WritePartitionRecords(ctx context.Context, slot string, records map[TopicPartition]string) error
}

// liveRecordVersion tags live records written by this mirror.
const liveRecordVersion = 1

// liveRecord is what a drain publishes on each partition it holds.
type liveRecord struct {
	V        int       `json:"v"`
	Instance string    `json:"instance"`
	Run      string    `json:"run"`
	At       time.Time `json:"at"`
	Outages  []Outage  `json:"outages,omitempty"`
	// More counts the outages left out to keep the record small.
	More int `json:"more,omitempty"`
}

// livePublisher is a drain's view of what it published.
type livePublisher struct {
	keys string    // the outage keys published, "" when none
	at   time.Time // the last write
}

// encodeLive encodes the record, leaving outages out (counted in More)
// until it fits maxLiveRecord.
func encodeLive(r liveRecord) (string, error) {
	for i := range r.Outages {
		if e := []rune(r.Outages[i].Error); len(e) > maxLiveError {
			r.Outages[i].Error = string(e[:maxLiveError-1]) + "…"
		}
	}
	for {
		raw, err := json.Marshal(r)
		if err != nil {
			return "", fmt.Errorf("encoding the live record: %w", err)
		}
		if len(raw) <= maxLiveRecord || len(r.Outages) == 0 {
			return string(raw), nil
		}
		r.Outages = r.Outages[:len(r.Outages)-1]
		r.More++
	}
}

// ongoingOutages returns the drain's outages lasting LiveFailureAfter or
// longer as of now, and their keys in one string.
func (d *drain) ongoingOutages(now time.Time) ([]Outage, string) {
	var out []Outage
	var keys []string
	for _, o := range d.live.outages(now) {
		if o.Ongoing() {
			out = append(out, o)
			keys = append(keys, o.Kind+"\x00"+o.key())
		}
	}
	return out, strings.Join(keys, "\x01")
}

// publishLive writes the drain's ongoing outages on the partitions it
// holds when they changed since the last write, or LiveHeartbeat after it
// while some last. final writes a record without outages when the drain
// published some and none lasts (the drain ends); a drain ending with
// outages leaves them published, to go stale after LiveStaleAfter unless
// the next drain renews them. Failures are logged at debug level: Kafka
// being down is found by every instance itself.
func (d *drain) publishLive(ctx context.Context) {
	pc, ok := d.m.opts.Control.(PartitionControl)
	if !ok {
		return
	}
	now := time.Now()
	outages, keys := d.ongoingOutages(now)
	var held []TopicPartition
	d.commitMu.Lock()
	for _, ps := range d.order {
		if !d.released[ps.tp] {
			held = append(held, ps.tp)
		}
	}
	d.commitMu.Unlock()
	// A previous drain of this process may have left outages published on
	// these partitions: they are cleared at the first check.
	d.m.mu.Lock()
	dirty := slices.ContainsFunc(held, func(tp TopicPartition) bool { return d.m.liveDirty[tp] })
	d.m.mu.Unlock()
	pub := &d.published
	changed := keys != pub.keys || (keys == "" && dirty)
	heartbeat := keys != "" && now.Sub(pub.at) >= LiveHeartbeat
	if len(held) == 0 || !(changed || heartbeat) {
		return
	}
	raw, err := encodeLive(liveRecord{V: liveRecordVersion, Instance: d.m.opts.Instance, Run: d.name, At: now.UTC(), Outages: outages})
	if err != nil {
		d.logger.DebugContext(ctx, "publishing live problems", "err", err)
		return
	}
	recs := make(map[TopicPartition]string, len(held))
	for _, tp := range held {
		recs[tp] = raw
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveWriteTimeout)
	defer cancel()
	if err := pc.WritePartitionRecords(wctx, ControlSlotLive, recs); err != nil {
		d.logger.DebugContext(ctx, "publishing live problems", "err", err)
		return
	}
	pub.keys, pub.at = keys, now
	d.m.mu.Lock()
	for _, tp := range held {
		if keys != "" {
			d.m.liveDirty[tp] = true
		} else {
			delete(d.m.liveDirty, tp)
		}
	}
	d.m.mu.Unlock()
}

// PeerProblems returns the ongoing outages that drains of other instances
// published on tps, not older than LiveStaleAfter, as problems: an outage
// seen by the instance running a drain makes every instance's status not
// OK within seconds. A failed read returns nothing (the status reads
// Kafka for the lag too, and reports that failure).
func (m *Mirror) PeerProblems(ctx context.Context, tps []TopicPartition) []Problem {
	pc, ok := m.opts.Control.(PartitionControl)
	if !ok || len(tps) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, liveWriteTimeout)
	defer cancel()
	recs, err := pc.PartitionRecords(rctx, ControlSlotLive, tps)
	if err != nil {
		m.opts.Logger.DebugContext(ctx, "reading live problems of other instances", "err", err)
		return nil
	}
	return peerProblems(recs, m.opts.Instance, time.Now())
}

// peerProblems decodes the live records of other instances than self that
// are fresh at now, one problem per outage place.
func peerProblems(recs map[TopicPartition]string, self string, now time.Time) []Problem {
	byPlace := map[string]Problem{}
	for _, raw := range recs {
		var r liveRecord
		if raw == "" || json.Unmarshal([]byte(raw), &r) != nil || r.V != liveRecordVersion {
			continue
		}
		if r.Instance == self || now.Sub(r.At) > LiveStaleAfter {
			continue
		}
		seen := fmt.Sprintf("; seen by instance %s, drain %s, at %s", r.Instance, r.Run, r.At.UTC().Format("15:04:05Z"))
		for _, o := range r.Outages {
			p := outageProblem(o, r.Run, now)
			p.Message += seen
			p.Error += seen
			if prev, ok := byPlace[o.key()]; !ok || prev.Since.After(p.Since) {
				byPlace[o.key()] = p
			}
		}
		if r.More > 0 {
			key := "more\x00" + r.Instance + "\x00" + r.Run
			kind := KindError
			if len(r.Outages) > 0 {
				kind = r.Outages[0].Kind // the same root cause as the places it names
			}
			byPlace[key] = Problem{Kind: kind, Partition: -1, Run: r.Run, Since: r.At,
				Message: fmt.Sprintf("and %s failing in the same drain%s", plural(r.More, "more place"), seen)}
		}
	}
	out := make([]Problem, 0, len(byPlace))
	for _, p := range byPlace {
		out = append(out, p)
	}
	// The places first, then what was left out of the records.
	rank := func(p Problem) string {
		if p.Hub == "" && p.Topic == "" {
			return "1" + p.Message
		}
		return "0" + p.where() + "\x00" + p.Message
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(rank(a), rank(b)) })
	return out
}
