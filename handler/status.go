package main

import (
	"context"
	"slices"
	"time"

	"github.com/ehmirror/ehmirror/metrics"
	"github.com/ehmirror/ehmirror/mirror"
)

// observation is what the status and the metrics read at one time: the
// lag (or why it could not be read, with the last lag known), the
// readiness, and the health with every problem known.
type observation struct {
	lag    *mirror.LagReport // nil when it could not be read
	lagErr error
	known  *mirror.LagReport // lag, else the last lag read; nil when none
	ready  mirror.Readiness
	health mirror.Health
}

// observe reads the lag and the readiness and builds the health at now:
// the drains' problems, other instances' live outages, a lag that cannot
// be read (Kafka), a readiness failure that blocks every hub or broker, the
// client certificate, the backlog's age and forgotten pauses.
func (a *app) observe(ctx context.Context, now time.Time) observation {
	var ob observation
	readyCh := make(chan mirror.Readiness, 1)
	go func() { readyCh <- a.readiness(ctx) }()
	m := a.service.Mirror()
	ob.lag, ob.lagErr = m.Lag(ctx, nil)
	ob.ready = <-readyCh
	ob.health = a.service.Health(ob.lag)
	ob.known = ob.lag
	if ob.lag != nil {
		// Drains of other instances publish their live outages: a failing
		// drain turns every instance's status red within seconds.
		ob.health.Add(m.PeerProblems(ctx, ob.lag.TopicPartitions())...)
	} else {
		ob.known = m.LastLag()
		ob.health.Add(mirror.Problem{Kind: mirror.KindKafka, Partition: -1, Since: now, Run: "status",
			Cause: mirror.NetworkCause(ob.lagErr), Error: ob.lagErr.Error(), Message: "cannot read the group's lag: " + ob.lagErr.Error()})
	}
	// A readiness failure that blocks every hub or every broker is a
	// problem at once, before a drain fails on it.
	ob.health.Add(newPlaces(ob.health.Problems, ob.ready.Problems())...)
	a.certificateHealth(&ob.health, now)
	if p := mirror.BacklogProblem(ob.lag, a.settings.MaxBacklogAge); p != nil {
		ob.health.Add(*p)
	}
	if p := mirror.PauseProblem(ob.lag, a.settings.MaxPauseAge, now); p != nil {
		ob.health.Add(*p)
	}
	a.service.Describe(&ob.health, surroundings(m.Endpoints(), ob.known, now))
	return ob
}

// reading is the observation as the metrics export it (metrics bounds
// ctx by its lag timeout).
func (a *app) reading(ctx context.Context) metrics.Reading {
	ob := a.observe(ctx, time.Now())
	return metrics.Reading{Health: ob.health, Lag: ob.known, Current: ob.lagErr == nil}
}

// newPlaces returns the problems of add whose kind and place no problem
// of have names already.
func newPlaces(have, add []mirror.Problem) []mirror.Problem {
	var out []mirror.Problem
	for _, p := range add {
		if !slices.ContainsFunc(have, func(h mirror.Problem) bool { return h.Kind == p.Kind && h.Hub == p.Hub && h.Topic == p.Topic }) {
			out = append(out, p)
		}
	}
	return out
}

// surroundings are what the headlines say besides the causes: the
// endpoints, the hubs of the mirrored topics, and the backlog as last
// known (lag, nil when never read).
func surroundings(e mirror.Endpoints, lag *mirror.LagReport, now time.Time) mirror.Surroundings {
	c := mirror.Surroundings{Endpoints: e, Now: now}
	if lag == nil {
		return c
	}
	hubs := map[string]bool{}
	for _, p := range lag.Partitions {
		hubs[p.Hub] = true
	}
	c.Hubs, c.Waiting, c.Oldest, c.LagAt = len(hubs), lag.Unpaused(), lag.BehindBy, lag.Time
	return c
}
