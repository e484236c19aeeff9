package mirror

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// StallDrains is how many drains in a row a partition may keep lag without
// its committed offset advancing before the health reports it stalled.
const StallDrains = 3

// Problem is one reason why records are not being mirrored, as of the last
// drain that touched its hub or partition.
type Problem struct {
	// Kind classifies the problem (one of the Kind constants).
	Kind string `json:"kind"`
	// Hub, Topic and Partition say where; Partition is -1 for a hub or a
	// drain-level problem, Topic is empty for a drain-level problem.
	Hub       string `json:"hub,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	// Message is the problem in one line.
	Message string `json:"message"`
	// Since is when the problem was first seen in a row of drains.
	Since time.Time `json:"since"`
	// Run is the drain that saw it last.
	Run string `json:"run"`
	// Cause is why a service could not be reached (see NetworkCause), ""
	// when it answered; Error the error text alone, without the place.
	Cause string `json:"cause,omitempty"`
	Error string `json:"error,omitempty"`

	// last is the latest failed attempt of an outage: a success at its
	// place after it clears the problem.
	last time.Time
}

// String is the problem in one line, with where it is.
func (p Problem) String() string {
	switch {
	case p.Topic != "" && p.Partition >= 0 && p.Hub == "":
		return fmt.Sprintf("%s/%d: %s: %s", p.Topic, p.Partition, p.Kind, p.Message)
	case p.Topic != "" && p.Partition >= 0:
		return fmt.Sprintf("%s/%d -> %s: %s: %s", p.Topic, p.Partition, p.Hub, p.Kind, p.Message)
	case p.Hub != "":
		return fmt.Sprintf("event hub %s: %s: %s", p.Hub, p.Kind, p.Message)
	case p.Kind == KindCertificate:
		return fmt.Sprintf("%s: %s", p.Kind, p.Message)
	}
	return fmt.Sprintf("drain: %s: %s", p.Kind, p.Message)
}

// Health is whether records are being mirrored, from the last outcome per
// hub and per partition of the drains this process ran (timer and
// catch-up).
type Health struct {
	// OK is false whenever a problem is known.
	OK bool `json:"ok"`
	// Reason is the first problem in one line, "" when OK.
	Reason   string    `json:"reason,omitempty"`
	Problems []Problem `json:"problems"`
	// Causes are the problems grouped by kind, each with its remedy.
	Causes []Cause `json:"causes"`
	// Drains is how many drains the health is built from.
	Drains int `json:"drains"`
}

// partitionHealth follows one partition across drains.
type partitionHealth struct {
	committed int64
	still     int // drains in a row with lag and no progress
	problem   *Problem
}

// healthTracker keeps the last outcome per hub and per partition.
type healthTracker struct {
	mu         sync.Mutex
	drains     int
	drain      *Problem // last drain-level problem
	hubs       map[string]*Problem
	partitions map[TopicPartition]*partitionHealth
	// outages are the failures still going on when the last drain with
	// partitions ended, by place.
	outages map[string]*Problem
	// memory keeps each root cause's first sighting (Service.Describe).
	memory causeMemory
}

func newHealthTracker() *healthTracker {
	return &healthTracker{hubs: map[string]*Problem{}, partitions: map[TopicPartition]*partitionHealth{}, outages: map[string]*Problem{}}
}

// keepSince returns p with Since carried over from prev when the problem
// is the same kind.
func keepSince(prev *Problem, p Problem) *Problem {
	if prev != nil && prev.Kind == p.Kind {
		p.Since = prev.Since
	}
	return &p
}

// keepEarlier returns p with the earlier Since of prev and p: an outage at
// one place is one root cause whatever its kind does in between.
func keepEarlier(prev *Problem, p Problem) *Problem {
	if prev != nil && prev.Since.Before(p.Since) {
		p.Since = prev.Since
	}
	return &p
}

// observe updates the health with a drain's report.
func (h *healthTracker) observe(rep *Report) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drains++
	now := rep.Started.Add(rep.Duration)

	// Drain-level errors: those that are not a hub's.
	hubErr := map[string]bool{}
	for _, he := range rep.HubErrors {
		hubErr[fmt.Sprintf("topic %q -> event hub %q: %s", he.Topic, he.Hub, he.Error)] = true
	}
	var drainErrs []string
	for _, e := range rep.Errors {
		if !hubErr[e] {
			drainErrs = append(drainErrs, e)
		}
	}
	if len(drainErrs) > 0 {
		// Drain-level errors are Kafka's (the claim, commits, watermarks):
		// a failed start, or an error that says Kafka could not be reached.
		kind, cause := KindError, ""
		for _, e := range drainErrs {
			if c := textCause(e); c != "" && cause == "" {
				cause = c
			}
		}
		if rep.Stopped == StopFailed || rep.Stopped == StopKafkaDown || cause != "" {
			kind = KindKafka
		}
		h.drain = keepEarlier(h.drain, Problem{Kind: kind, Partition: -1, Message: strings.Join(drainErrs, "; "), Since: now, Run: rep.Run, Cause: cause, Error: drainErrs[0]})
	} else if rep.Stopped != StopFailed || len(rep.Partitions) > 0 {
		h.drain = nil
	}

	// Outages still going on when the drain ended stay problems until a
	// drain with partitions ends without them.
	if hasWork(rep) {
		prev := h.outages
		h.outages = map[string]*Problem{}
		for _, o := range rep.Outages {
			if o.Ongoing() {
				h.outages[o.key()] = keepEarlier(prev[o.key()], outageProblem(o, rep.Run, now))
			}
		}
	}

	// Hubs: a hub error sets the problem, a partition of the hub mirrored
	// without error clears it.
	for _, he := range rep.HubErrors {
		h.hubs[he.Hub] = keepSince(h.hubs[he.Hub], Problem{Kind: he.Kind, Hub: he.Hub, Partition: -1, Message: he.Error, Since: now, Run: rep.Run, Cause: textCause(he.Error), Error: he.Error})
	}
	for _, p := range rep.Partitions {
		if p.Error == "" && !p.Busy && h.hubs[p.Hub] != nil && !slices.ContainsFunc(rep.HubErrors, func(he HubError) bool { return he.Hub == p.Hub }) {
			delete(h.hubs, p.Hub)
		}
	}

	for _, p := range rep.Partitions {
		if p.Busy {
			continue
		}
		tp := TopicPartition{Topic: p.Topic, Partition: p.Partition}
		ph := h.partitions[tp]
		if ph == nil {
			ph = &partitionHealth{committed: p.Committed}
			h.partitions[tp] = ph
		} else {
			if p.LagAfter > 0 && p.Committed == ph.committed && p.Records == 0 {
				ph.still++
			} else {
				ph.still = 0
			}
			ph.committed = p.Committed
		}
		base := Problem{Hub: p.Hub, Topic: p.Topic, Partition: p.Partition, Since: now, Run: rep.Run}
		switch {
		case p.Error != "":
			base.Kind, base.Message = p.Kind, p.Error
			if base.Kind == "" {
				base.Kind = KindError
			}
		case p.Gap > 0:
			base.Kind, base.Message = KindGap, fmt.Sprintf("%d records were removed by retention before they were mirrored (skipped under MIRROR_GAP_POLICY=resume-earliest)", p.Gap)
		case len(p.SkippedOffsets) > 0:
			base.Kind, base.Message = KindOversized, fmt.Sprintf("oversized records skipped at offsets %v (MIRROR_OVERSIZE_POLICY=skip)", p.SkippedOffsets)
		case ph.still >= StallDrains:
			base.Kind, base.Message = KindStalled, fmt.Sprintf("lag %d but committed offset %d has not advanced for %d drains", p.LagAfter, p.Committed, ph.still)
		default:
			ph.problem = nil
			continue
		}
		ph.problem = keepSince(ph.problem, base)
	}
}

// hasWork reports whether a drain worked on partitions (it did not only
// find them busy).
func hasWork(rep *Report) bool {
	return slices.ContainsFunc(rep.Partitions, func(p PartitionReport) bool { return !p.Busy })
}

// outageProblem is an ongoing outage as a problem as of now.
func outageProblem(o Outage, run string, now time.Time) Problem {
	p := Problem{Kind: o.Kind, Hub: o.Hub, Topic: o.Topic, Partition: -1, Message: o.describe(now), Since: o.Since, Run: run, Cause: o.Cause, Error: o.Error, last: o.Last}
	if o.Hub == "" {
		p.Partition = o.Partition
	}
	if p.Kind == "" {
		p.Kind = KindError
	}
	return p
}

// kafkaAnswered clears the problems that only said Kafka could not be
// reached: Kafka has just answered (the status read the group's lag).
func (h *healthTracker) kafkaAnswered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.drain != nil && h.drain.Kind == KindKafka {
		h.drain = nil
	}
	for k, p := range h.outages {
		if p.Kind == KindKafka {
			delete(h.outages, k)
		}
	}
}

// forget drops partitions and hubs no longer mirrored.
func (h *healthTracker) forget(keep func(TopicPartition) bool, hubs map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for tp := range h.partitions {
		if !keep(tp) {
			delete(h.partitions, tp)
		}
	}
	for hub := range h.hubs {
		if !hubs[hub] {
			delete(h.hubs, hub)
		}
	}
}

// snapshot returns the health: every known problem, drain first, then hubs,
// then partitions, each sorted.
//
// running are the drains running now: their sends and fetches failing for
// LiveFailureAfter or longer are problems at once, before the drains end.
// recovered reports whether a place (an outage's key) succeeded after a
// time: an outage kept from an ended drain clears as soon as a running
// drain's sends (or fetches) there are acknowledged again.
func (h *healthTracker) snapshot(running []RunningDrain, recovered func(key string, after time.Time) bool) Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := Health{Problems: []Problem{}, Drains: h.drains}
	if h.drain != nil {
		out.Problems = append(out.Problems, *h.drain)
	}
	now := time.Now()
	live := map[string]Problem{}
	for _, rd := range running {
		for _, o := range rd.Outages {
			if o.Ongoing() {
				live[o.key()] = outageProblem(o, rd.Run, now)
			}
		}
	}
	for k, p := range h.outages {
		if recovered != nil && recovered(k, p.last) {
			delete(h.outages, k)
			continue
		}
		if _, ok := live[k]; !ok {
			live[k] = *p
		}
	}
	var outages []Problem
	for _, p := range live {
		outages = append(outages, p)
	}
	slices.SortFunc(outages, func(a, b Problem) int {
		return strings.Compare(a.Hub+"\x00"+a.Topic+fmt.Sprint(a.Partition)+a.Message, b.Hub+"\x00"+b.Topic+fmt.Sprint(b.Partition)+b.Message)
	})
	out.Problems = append(out.Problems, outages...)
	var hubs []Problem
	for _, p := range h.hubs {
		hubs = append(hubs, *p)
	}
	slices.SortFunc(hubs, func(a, b Problem) int { return strings.Compare(a.Hub, b.Hub) })
	out.Problems = append(out.Problems, hubs...)
	var parts []Problem
	for _, ph := range h.partitions {
		if ph.problem != nil {
			parts = append(parts, *ph.problem)
		}
	}
	slices.SortFunc(parts, func(a, b Problem) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	out.Problems = append(out.Problems, parts...)
	out.OK = len(out.Problems) == 0
	out.Causes = Causes(out.Problems)
	out.Reason = reasonOf(out.Causes)
	return out
}

// reasonOf is the health's reason: the headline of the first cause (one
// per root cause, known kinds first: a generic error says less about what
// to fix), and how many other causes there are; "" without problems.
// Health.Describe rewrites it with the endpoints and the backlog.
func reasonOf(causes []Cause) string {
	if len(causes) == 0 {
		return ""
	}
	reason := strings.ReplaceAll(causes[0].headline(Surroundings{}), "\n", "; ")
	switch n := len(causes) - 1; {
	case n == 1:
		reason += " (and 1 more cause)"
	case n > 1:
		reason += fmt.Sprintf(" (and %d more causes)", n)
	}
	return reason
}

// Add adds a problem found outside the drains (the status's own checks,
// other instances' live problems) and recomputes OK, the reason and the
// causes.
func (h *Health) Add(ps ...Problem) {
	if len(ps) == 0 {
		return
	}
	h.Problems = append(h.Problems, ps...)
	h.Causes = Causes(h.Problems)
	h.OK = false
	h.Reason = reasonOf(h.Causes)
}

// Describe keeps each cause's Since stable per root cause (its kind: the
// service, or the refusal) across status requests, then writes the
// headlines and the reason (see Health.Describe).
func (s *Service) Describe(h *Health, c Surroundings) {
	s.health.memory.stabilize(h.Causes)
	h.Describe(c)
}

// Failing reports whether sends or fetches fail now: a problem that stops
// records from moving (a service unreachable or refusing the app), as
// opposed to one that only says how things went (a gap, a skipped record,
// a backlog).
func (h Health) Failing() bool {
	return slices.ContainsFunc(h.Problems, func(p Problem) bool {
		switch p.Kind {
		case KindEventHubs, KindKafka, KindUnauthorized, KindError, KindStalled:
			return true
		}
		return false
	})
}
