package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Endpoint is whether one Kafka broker or one event hub accepts the app.
type Endpoint struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Cause classifies a failure: for a broker dns, refused, no answer,
	// tls, sasl or error; for a hub one of the Kind constants.
	Cause string `json:"cause,omitempty"`
	Error string `json:"error,omitempty"`
}

// String is the endpoint in one line.
func (e Endpoint) String() string {
	if e.OK {
		return e.Name + ": ok"
	}
	return fmt.Sprintf("%s: %s: %s", e.Name, e.Cause, strings.ReplaceAll(e.Error, "\n", "; "))
}

// BrokerProber is implemented by sources that can check each bootstrap
// broker on its own (connection, TLS, SASL, an answer).
type BrokerProber interface {
	ProbeBrokers(ctx context.Context) []Endpoint
}

// hubProber is implemented by sinks that can read a hub from the service
// itself, bypassing what they cache.
type hubProber interface {
	ProbeHub(ctx context.Context, name string) (Hub, error)
}

// Readiness is whether the app can reach Kafka (each bootstrap broker, and
// the topic listing) and whether every event hub of the mirrored topics
// accepts its credentials.
type Readiness struct {
	Time time.Time `json:"time"`
	OK   bool      `json:"ok"`
	// Kafka are the bootstrap brokers, then "topics" when listing them
	// failed; EventHubs the hubs of the mirrored topics.
	Kafka     []Endpoint `json:"kafka"`
	EventHubs []Endpoint `json:"event_hubs"`
	// Summary is the readiness in one line.
	Summary string `json:"summary"`
}

// Readiness checks that Kafka answers and that every hub of the mirrored
// topics accepts the app's credentials.
//
// The hubs' check, when every hub accepted the app, serves for
// ReadinessMaxAge: the status page, a metrics scrape and an alert's probe
// in quick succession read every hub once. The brokers are checked each
// time, and so are the hubs after a failure, so that a change shows at once.
func (m *Mirror) Readiness(ctx context.Context) Readiness {
	t := m.live
	t.mu.Lock()
	hubs := t.readyHubs
	t.mu.Unlock()
	if hubs != nil && time.Since(hubs.Time) >= ReadinessMaxAge {
		hubs = nil
	}
	r, reused := m.readiness(ctx, hubs)
	if !reused {
		t.mu.Lock()
		t.readyHubs = nil
		if !slices.ContainsFunc(r.EventHubs, func(e Endpoint) bool { return !e.OK }) {
			t.readyHubs = &r // serves from r.Time on
		}
		t.mu.Unlock()
	}
	return r
}

// ReadinessMaxAge is how long a check that found every hub accepting the
// app serves.
const ReadinessMaxAge = 5 * time.Second

// readiness checks the brokers now, and the hubs unless reuse holds a check
// of the same hubs (then reused is true).
func (m *Mirror) readiness(ctx context.Context, reuse *Readiness) (r Readiness, reused bool) {
	r = Readiness{Time: time.Now(), Kafka: []Endpoint{}, EventHubs: []Endpoint{}}
	if p, ok := m.source.(BrokerProber); ok {
		r.Kafka = p.ProbeBrokers(ctx)
	}
	topics, err := m.selectTopics(ctx, nil)
	if err != nil {
		r.Kafka = append(r.Kafka, Endpoint{Name: "topics", Cause: KindKafka, Error: err.Error()})
	}
	names := map[string]bool{}
	for _, t := range topics {
		names[m.router.Hub(t.Name)] = true
	}
	hubs := make([]string, 0, len(names))
	for h := range names {
		hubs = append(hubs, h)
	}
	slices.Sort(hubs)
	r.EventHubs = make([]Endpoint, len(hubs))
	if reuse != nil && slices.EqualFunc(reuse.EventHubs, hubs, func(e Endpoint, name string) bool { return e.Name == name }) {
		copy(r.EventHubs, reuse.EventHubs)
		hubs, reused = nil, true
	}
	var wg sync.WaitGroup
	limit := make(chan struct{}, 8)
	for i, name := range hubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			r.EventHubs[i] = Endpoint{Name: name, OK: true}
			probe := m.sink.Hub
			if p, ok := m.sink.(hubProber); ok {
				probe = p.ProbeHub
			}
			if _, err := probe(ctx, name); err != nil {
				r.EventHubs[i] = Endpoint{Name: name, Cause: eventHubsKind(err), Error: err.Error()}
			}
		}()
	}
	wg.Wait()
	r.OK = !slices.ContainsFunc(r.Kafka, func(e Endpoint) bool { return !e.OK }) && !slices.ContainsFunc(r.EventHubs, func(e Endpoint) bool { return !e.OK })
	brokers, listing := r.brokers()
	r.Summary = "kafka: " + endpointsLine(brokers, "broker", "answer")
	for _, e := range listing {
		r.Summary += ", topics not listed (" + strings.ReplaceAll(e.Error, "\n", "; ") + ")"
	}
	r.Summary += "; event hubs: " + endpointsLine(r.EventHubs, "hub", "accept the credentials")
	r.Summary = strings.ReplaceAll(strings.ReplaceAll(r.Summary, "of 1 broker answer", "of 1 broker answers"), "of 1 hub accept", "of 1 hub accepts")
	return r, reused
}

// brokers splits r.Kafka into the bootstrap brokers and the topic listing.
func (r Readiness) brokers() (brokers, listing []Endpoint) {
	for _, e := range r.Kafka {
		if e.Name == "topics" && e.Cause == KindKafka {
			listing = append(listing, e)
		} else {
			brokers = append(brokers, e)
		}
	}
	return brokers, listing
}

// brokerCauses maps a broker probe's cause to a network cause.
var brokerCauses = map[string]string{"dns": CauseDNS, "refused": CauseRefused, "no answer": CauseTimeout, "tls": CauseTLS}

// Problems returns what the readiness check found that blocks everything,
// as problems, at once and before any drain fails: every bootstrap broker
// failing (Kafka), or every hub refusing the app (a wrong key, a namespace
// that cannot be reached). A failure of some brokers or some hubs only is
// left to the drains, which say which records it holds up.
func (r Readiness) Problems() []Problem {
	var out []Problem
	brokers, _ := r.brokers()
	if len(brokers) > 0 && !slices.ContainsFunc(brokers, func(e Endpoint) bool { return e.OK }) {
		p := Problem{Kind: KindKafka, Partition: -1, Since: r.Time, Run: "readiness", Cause: brokerCauses[brokers[0].Cause], Error: brokers[0].Error,
			Message: "no bootstrap broker answers: " + endpointsLine(brokers, "broker", "answer")}
		out = append(out, p)
	}
	if len(r.EventHubs) > 0 && !slices.ContainsFunc(r.EventHubs, func(e Endpoint) bool { return e.OK }) {
		for _, e := range r.EventHubs {
			out = append(out, Problem{Kind: e.Cause, Hub: e.Name, Partition: -1, Since: r.Time, Run: "readiness", Cause: textCause(e.Error), Error: e.Error,
				Message: "readiness: " + strings.ReplaceAll(e.Error, "\n", "; ")})
		}
	}
	return out
}

// endpointsLine is "3 of 3 brokers answer" or "1 of 2 brokers answer
// (b:9092: refused: …)"; endpoints failing the same way are named
// together, with the error text once ("(h1, h2, h3: eventhubs: dial tcp
// …: connection refused)").
func endpointsLine(es []Endpoint, what, verb string) string {
	if len(es) == 0 {
		return "none checked"
	}
	var order []string
	names := map[string][]string{}
	ok := 0
	for _, e := range es {
		if e.OK {
			ok++
			continue
		}
		why := e.Cause + ": " + rootText(strings.ReplaceAll(e.Error, "\n", "; "))
		if _, seen := names[why]; !seen {
			order = append(order, why)
		}
		names[why] = append(names[why], e.Name)
	}
	s := fmt.Sprintf("%d of %s %s", ok, plural(len(es), what), verb)
	if len(order) > 0 {
		bad := make([]string, len(order))
		for i, why := range order {
			bad[i] = strings.Join(names[why], ", ") + ": " + why
		}
		s += " (" + strings.Join(bad, "; ") + ")"
	}
	return s
}
