package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file shares catch-up runs between instances. A catch-up runs in the
// background of the instance that accepted it, but its status URL is
// polled through the app's front end, which answers from any instance. So
// the instance running a catch-up publishes its status in a control slot
// of its own (controlSlotRunPrefix + the run's id), re-written every
// RunPublishEvery while it runs and once when it ends; any instance reads
// it by the run's id. A running record not re-written for RunLostAfter
// belongs to an instance that stopped (a host restart kills background
// work without notice): it reads as CatchUpLost.

// Run sharing bounds.
const (
	// RunPublishEvery is how often a running catch-up's status is
	// re-written.
	RunPublishEvery = 2 * time.Second
	// RunLostAfter is how long a running catch-up's record counts without
	// being re-written.
	RunLostAfter = 8 * RunPublishEvery
	// controlSlotRunPrefix starts the control slot of one run.
	controlSlotRunPrefix = "control.run."
	// maxRunID bounds a run id used in a slot (a Kafka group name).
	maxRunID = 64
	// maxRunError bounds the error text of a published run.
	maxRunError = 1000
)

// CatchUpLost is the state of a catch-up whose instance stopped
// publishing it while it ran.
const CatchUpLost = "lost"

// ErrNoRunSharing is returned when the mirror was built without a
// [Control], which run sharing needs.
var ErrNoRunSharing = errors.New("sharing catch-up runs needs a Kafka control (Options.Control)")

// SharedRun is a catch-up run as the instance running it published it.
type SharedRun struct {
	CatchUpStatus
	// Instance is the instance that runs (or ran) the catch-up.
	Instance string `json:"instance"`
	// Published is when the instance last wrote this record.
	Published time.Time `json:"published"`
}

// RunBoard shares catch-up runs between the instances of the app through
// Kafka's control records (the store every instance shares).
type RunBoard struct {
	m *Mirror
}

// NewRunBoard returns the run board of m's consumer group.
func NewRunBoard(m *Mirror) *RunBoard { return &RunBoard{m: m} }

// validRunID reports whether id may name a control slot: run ids are short
// and alphanumeric; anything else is no run of this app.
func validRunID(id string) bool {
	if id == "" || len(id) > maxRunID {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// keyTopics returns the mirrored topics' names, sorted: a run's record is
// kept under the first (a control record needs a topic that exists).
func (b *RunBoard) keyTopics(ctx context.Context) ([]string, error) {
	if b.m.opts.Control == nil {
		return nil, ErrNoRunSharing
	}
	topics, err := b.m.selectTopics(ctx, nil)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	slices.Sort(names)
	return names, nil
}

// Publish writes st as this instance's record of the run.
func (b *RunBoard) Publish(ctx context.Context, st CatchUpStatus) error {
	if !validRunID(st.ID) {
		return fmt.Errorf("publishing catch-up %q: not a run id", st.ID)
	}
	names, err := b.keyTopics(ctx)
	if err != nil {
		return fmt.Errorf("publishing catch-up %s: %w", st.ID, err)
	}
	if len(names) == 0 {
		return fmt.Errorf("publishing catch-up %s: no mirrored topic to keep the record under", st.ID)
	}
	if e := []rune(st.LastError); len(e) > maxRunError {
		st.LastError = string(e[:maxRunError-1]) + "…"
	}
	raw, err := json.Marshal(SharedRun{CatchUpStatus: st, Instance: b.m.opts.Instance, Published: time.Now()})
	if err != nil {
		return fmt.Errorf("publishing catch-up %s: %w", st.ID, err)
	}
	return b.m.opts.Control.WriteControlRecord(ctx, controlSlotRunPrefix+st.ID, names[0], string(raw))
}

// Lookup returns the run id as its instance last published it; ok is false
// when no instance published it. A running record not re-written for
// RunLostAfter reads as CatchUpLost, with the reason in LastError.
func (b *RunBoard) Lookup(ctx context.Context, id string) (run SharedRun, ok bool, err error) {
	if !validRunID(id) {
		return SharedRun{}, false, nil
	}
	names, err := b.keyTopics(ctx)
	if err != nil {
		return SharedRun{}, false, fmt.Errorf("reading catch-up %s: %w", id, err)
	}
	recs, err := b.m.opts.Control.ControlRecords(ctx, controlSlotRunPrefix+id, names)
	if err != nil {
		return SharedRun{}, false, fmt.Errorf("reading catch-up %s: %w", id, err)
	}
	for _, raw := range recs {
		var r SharedRun
		if raw == "" || json.Unmarshal([]byte(raw), &r) != nil || r.ID != id {
			continue
		}
		if !ok || r.Published.After(run.Published) {
			run, ok = r, true
		}
	}
	if ok && run.State == CatchUpRunning && time.Since(run.Published) > RunLostAfter {
		run.State = CatchUpLost
		run.LastError = fmt.Sprintf("instance %s stopped publishing this run %s ago (a host restart, scale-in or setting change kills background work); the next drain goes on from the committed positions: start a new catch-up to wait for one", run.Instance, time.Since(run.Published).Round(time.Second))
	}
	return run, ok, nil
}

// Follow publishes the run id every RunPublishEvery while snapshot reports
// it running, and once more when it has ended. Failures are logged; the
// next write tries again.
func (b *RunBoard) Follow(ctx context.Context, id string, snapshot func(string) (CatchUpStatus, bool)) {
	tick := time.NewTicker(RunPublishEvery)
	defer tick.Stop()
	for {
		st, ok := snapshot(id)
		if !ok {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, RunPublishEvery)
		if err := b.Publish(wctx, st); err != nil {
			b.m.opts.Logger.Warn("sharing the catch-up's status with the other instances", "run", id, "err", err)
		}
		cancel()
		if st.State != CatchUpRunning {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Instance is the name of this instance (Options.Instance), as its drains
// and runs publish it.
func (m *Mirror) Instance() string { return m.opts.Instance }
