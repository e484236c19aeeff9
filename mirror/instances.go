package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file shares what each instance runs and ran: the app's front end
// hands a status request to any instance, and the drains an instance
// reports are its own. So each instance publishes its state (the drains
// running now and its last drains, in brief) every InstancePublishEvery in
// a control slot of its own, and lists itself in a registry slot; the
// status of any instance reads the others' states. Kafka is the store, as
// for the live problems (peers.go) and the catch-up runs (runboard.go).
//
// The registry is one record (a list of instance keys) that instances
// rewrite without a lock: two instances registering at once may drop one,
// which registers again at its next publication. A state not re-written
// for InstanceStaleAfter is left out of what the others read; its key stays
// in the registry until an instance that finds its own key missing rewrites
// the registry.

// Instance sharing bounds.
const (
	// InstancePublishEvery is how often an instance re-writes its state.
	InstancePublishEvery = 10 * time.Second
	// InstanceStaleAfter is how long a state counts without being
	// re-written.
	InstanceStaleAfter = 6 * InstancePublishEvery
	// controlSlotInstances holds the registry of instance keys.
	controlSlotInstances = "control.instances"
	// controlSlotInstancePrefix starts the control slot of one instance.
	controlSlotInstancePrefix = "control.instance."
	// maxInstanceRecord keeps a record under Kafka's default
	// offset.metadata.max.bytes (4096).
	maxInstanceRecord = 3800
	// maxInstanceDrains bounds the last drains an instance publishes.
	maxInstanceDrains = 5
	// maxInstanceKey bounds an instance key (part of a group name).
	maxInstanceKey = 80
)

// DrainBrief is a finished drain in brief, as another instance sees it.
type DrainBrief struct {
	Run      string        `json:"run"`
	Trigger  string        `json:"trigger,omitempty"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Records  int64         `json:"records"`
	Stopped  string        `json:"stopped"`
	Errors   int           `json:"errors,omitempty"`
	Failed   bool          `json:"failed,omitempty"`
}

// BriefOf returns r in brief.
func BriefOf(r *Report) DrainBrief {
	return DrainBrief{Run: r.Run, Trigger: r.Trigger, Started: r.Started, Duration: r.Duration, Records: r.Records, Stopped: r.Stopped, Errors: len(r.Errors), Failed: r.Failed()}
}

// InstanceState is what an instance runs and ran, as it published it.
type InstanceState struct {
	Instance  string         `json:"instance"`
	Published time.Time      `json:"published"`
	Running   []RunningDrain `json:"running"`
	// LastDrains are its latest finished drains, newest first.
	LastDrains []DrainBrief `json:"last_drains"`
	// More counts the drains left out to keep the record small.
	More int `json:"more,omitempty"`
}

// InstanceBoard shares the instances' states through Kafka's control
// records.
type InstanceBoard struct {
	m *Mirror
}

// NewInstanceBoard returns the instance board of m's consumer group.
func NewInstanceBoard(m *Mirror) *InstanceBoard { return &InstanceBoard{m: m} }

// instanceKey turns an instance name (host/pid, or the platform's instance
// id) into a slot name part.
func instanceKey(name string) string {
	key := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name)
	if len(key) > maxInstanceKey {
		key = key[:maxInstanceKey]
	}
	return key
}

// encodeState encodes st, leaving the oldest drains out (counted in More)
// and then the running drains' outages until it fits maxInstanceRecord.
func encodeState(st InstanceState) (string, error) {
	for {
		raw, err := json.Marshal(st)
		if err != nil {
			return "", fmt.Errorf("encoding the instance's state: %w", err)
		}
		if len(raw) <= maxInstanceRecord {
			return string(raw), nil
		}
		switch {
		case len(st.LastDrains) > 0:
			st.LastDrains = st.LastDrains[:len(st.LastDrains)-1]
			st.More++
		case slices.ContainsFunc(st.Running, func(d RunningDrain) bool { return len(d.Outages) > 0 }):
			for i := range st.Running {
				st.Running[i].Outages = nil
			}
		default:
			return "", fmt.Errorf("the instance's state takes %d bytes, more than %d", len(raw), maxInstanceRecord)
		}
	}
}

// Publish writes this instance's state, running (the drains running now)
// and last (its finished drains; the newest are kept), and makes sure the
// registry lists it.
func (b *InstanceBoard) Publish(ctx context.Context, running []RunningDrain, last []*Report) error {
	names, err := (&RunBoard{m: b.m}).keyTopics(ctx)
	if err != nil {
		return fmt.Errorf("publishing the instance's state: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	st := InstanceState{Instance: b.m.opts.Instance, Published: time.Now(), Running: slices.Clone(running)}
	last = slices.DeleteFunc(slices.Clone(last), func(r *Report) bool { return r == nil })
	slices.SortFunc(last, func(x, y *Report) int { return y.Started.Compare(x.Started) })
	for i, r := range last {
		if i == maxInstanceDrains {
			st.More = len(last) - i
			break
		}
		st.LastDrains = append(st.LastDrains, BriefOf(r))
	}
	raw, err := encodeState(st)
	if err != nil {
		return err
	}
	key := instanceKey(b.m.opts.Instance)
	ctl := b.m.opts.Control
	if err := ctl.WriteControlRecord(ctx, controlSlotInstancePrefix+key, names[0], raw); err != nil {
		return fmt.Errorf("publishing the instance's state: %w", err)
	}
	keys, err := b.registry(ctx, names[0])
	if err != nil {
		return err
	}
	if slices.Contains(keys, key) {
		return nil
	}
	// Pruned of the instances gone, with this one added.
	live, _ := b.states(ctx, names[0], keys)
	kept := []string{key}
	for _, s := range live {
		kept = append(kept, instanceKey(s.Instance))
	}
	rec, err := json.Marshal(kept)
	if err != nil {
		return fmt.Errorf("registering the instance: %w", err)
	}
	if err := ctl.WriteControlRecord(ctx, controlSlotInstances, names[0], string(rec)); err != nil {
		return fmt.Errorf("registering the instance: %w", err)
	}
	return nil
}

// registry returns the registered instance keys.
func (b *InstanceBoard) registry(ctx context.Context, topic string) ([]string, error) {
	recs, err := b.m.opts.Control.ControlRecords(ctx, controlSlotInstances, []string{topic})
	if err != nil {
		return nil, fmt.Errorf("reading the instance registry: %w", err)
	}
	var keys []string
	if raw := recs[topic]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &keys) // a bad record is an empty registry
	}
	return keys, nil
}

// states returns the states of keys re-written within InstanceStaleAfter.
func (b *InstanceBoard) states(ctx context.Context, topic string, keys []string) ([]InstanceState, error) {
	var out []InstanceState
	for _, key := range keys {
		if key == "" || len(key) > maxInstanceKey || key != instanceKey(key) {
			continue
		}
		recs, err := b.m.opts.Control.ControlRecords(ctx, controlSlotInstancePrefix+key, []string{topic})
		if err != nil {
			return out, fmt.Errorf("reading instance %s: %w", key, err)
		}
		var st InstanceState
		if raw := recs[topic]; raw == "" || json.Unmarshal([]byte(raw), &st) != nil || time.Since(st.Published) > InstanceStaleAfter {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// Others returns the states the other instances published, by instance
// name.
func (b *InstanceBoard) Others(ctx context.Context) ([]InstanceState, error) {
	names, err := (&RunBoard{m: b.m}).keyTopics(ctx)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	keys, err := b.registry(ctx, names[0])
	if err != nil {
		return nil, err
	}
	own := instanceKey(b.m.opts.Instance)
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == own })
	states, err := b.states(ctx, names[0], keys)
	slices.SortFunc(states, func(x, y InstanceState) int { return strings.Compare(x.Instance, y.Instance) })
	return states, err
}

// Run publishes this instance's state every InstancePublishEvery until ctx
// ends; state returns the drains running now and the finished ones. Failures are logged; the next publication tries again.
func (b *InstanceBoard) Run(ctx context.Context, state func() ([]RunningDrain, []*Report)) {
	tick := time.NewTicker(InstancePublishEvery)
	defer tick.Stop()
	for {
		running, last := state()
		wctx, cancel := context.WithTimeout(ctx, InstancePublishEvery)
		if err := b.Publish(wctx, running, last); err != nil && ctx.Err() == nil {
			b.m.opts.Logger.Warn("sharing the instance's drains with the other instances", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
