package mirror

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// KindEventHubs is the kind of sends that keep failing because Event Hubs
// cannot be reached or does not answer (connection refused, DNS, TLS, a
// timeout, the service's internal errors); KindKafka is the same for Kafka.
const KindEventHubs = "eventhubs"

// Network causes of a failure to reach a service (Outage.Cause,
// Problem.Cause).
const (
	CauseRefused = "connection refused"
	CauseDNS     = "DNS"
	CauseTLS     = "TLS"
	CauseTimeout = "no answer"
	CauseLost    = "connection lost"
)

// NetworkCause classifies why a service could not be reached: connection
// refused, DNS, TLS, no answer or connection lost; "" when err is not one of those (the
// service answered with an error).
func NetworkCause(err error) string {
	if err == nil {
		return ""
	}
	var dns *net.DNSError
	var rec tls.RecordHeaderError
	var verify *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &dns):
		return CauseDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseRefused
	case errors.As(err, &rec), errors.As(err, &verify), errors.As(err, &unknownAuth), errors.As(err, &hostname), errors.As(err, &invalid):
		return CauseTLS
	}
	// SDKs often flatten the error chain into text.
	return textCause(err.Error())
}

// textCause is NetworkCause for an error's text.
func textCause(s string) string {
	s = strings.ToLower(s)
	switch {
	case strings.Contains(s, "connection refused"):
		return CauseRefused
	case strings.Contains(s, "no such host"), strings.Contains(s, "server misbehaving"), strings.Contains(s, "lookup "):
		return CauseDNS
	case strings.Contains(s, "x509:"), strings.Contains(s, "tls:"), strings.Contains(s, "certificate"):
		return CauseTLS
	case strings.Contains(s, "i/o timeout"), strings.Contains(s, "deadline exceeded"):
		return CauseTimeout
	case strings.Contains(s, "connection reset"), strings.Contains(s, "broken pipe"), strings.Contains(s, "eof"), strings.Contains(s, "connection closed"):
		return CauseLost
	}
	return ""
}

// eventHubsKind classifies an error of Event Hubs: a known kind
// (unauthorized, hub missing, ...), else KindEventHubs.
func eventHubsKind(err error) string {
	if k := errorKind(err); k != KindError {
		return k
	}
	return KindEventHubs
}

// Endpoints name the services the mirror talks to, for the headlines: the
// Event Hubs namespace's host and the Kafka bootstrap brokers.
type Endpoints struct {
	EventHubs string
	Kafka     []string
}

// namespaced is implemented by sinks that know their namespace's host.
type namespaced interface {
	Namespace() (string, error)
}

// brokered is implemented by sources that know their bootstrap brokers.
type brokered interface {
	Brokers() []string
}

// Endpoints returns the names of the Event Hubs namespace and the Kafka
// brokers, where the sink and the source know them.
func (m *Mirror) Endpoints() Endpoints {
	var e Endpoints
	if n, ok := m.sink.(namespaced); ok {
		e.EventHubs, _ = n.Namespace()
	}
	if b, ok := m.source.(brokered); ok {
		e.Kafka = b.Brokers()
	}
	return e
}

// Surroundings are what a headline says besides the causes: where the services
// are, how many hubs there are, and the backlog as last known.
type Surroundings struct {
	Endpoints Endpoints
	// Hubs is how many event hubs the mirrored topics go to.
	Hubs int
	// Waiting and Oldest are the records not mirrored and the age of the
	// oldest, as of LagAt (the last lag read; zero when never read).
	Waiting int64
	Oldest  time.Duration
	LagAt   time.Time
	Now     time.Time
}

// Describe writes each cause's headline and the health's reason (the
// first cause's headline, with the backlog) from c.
func (h *Health) Describe(c Surroundings) {
	for i := range h.Causes {
		h.Causes[i].Headline = h.Causes[i].headline(c)
	}
	if len(h.Causes) == 0 {
		return
	}
	h.Reason = h.Causes[0].Headline
	if !c.LagAt.IsZero() && c.Waiting > 0 {
		h.Reason += fmt.Sprintf(" — %s records waiting", Count(c.Waiting))
		if c.Oldest > 0 {
			h.Reason += ", oldest " + Ago(c.Oldest)
		}
		if age := c.Now.Sub(c.LagAt); age >= 2*time.Second {
			h.Reason += fmt.Sprintf(" (as of %s, %s ago)", c.LagAt.UTC().Format("15:04:05Z"), Ago(age))
		}
	}
}

// headline is the cause in the words an on-call engineer reads first:
// "Event Hubs `ns.servicebus.windows.net` unreachable (connection refused)
// on all 5 hubs since 03:02:18Z".
func (c Cause) headline(around Surroundings) string {
	since := " since " + c.Since.UTC().Format("15:04:05Z")
	why := ""
	if c.Network != "" {
		why = " (" + c.Network + ")"
	}
	on := ""
	switch {
	case c.Hubs > 0 && c.Hubs >= around.Hubs && around.Hubs > 1:
		on = fmt.Sprintf(" on all %d hubs", c.Hubs)
	case c.Hubs > 0:
		on = " on " + plural(c.Hubs, "hub")
	case c.Partitions > 0:
		on = " on " + plural(c.Partitions, "partition")
	}
	switch c.Kind {
	case KindEventHubs:
		name := "Event Hubs"
		if around.Endpoints.EventHubs != "" {
			name += " `" + around.Endpoints.EventHubs + "`"
		}
		if c.Network == "" {
			return name + " fails the sends" + on + since + " (" + c.Error + ")"
		}
		return name + " unreachable" + why + on + since
	case KindKafka:
		name := "Kafka"
		if len(around.Endpoints.Kafka) > 0 {
			name += " `" + strings.Join(around.Endpoints.Kafka, ",") + "`"
		}
		if c.Network == "" {
			return name + " fails" + on + since + " (" + c.Error + ")"
		}
		return name + " unreachable" + why + on + since
	case KindUnauthorized:
		return "Event Hubs refuses the credentials" + on + since + " (" + c.Error + ")"
	}
	return c.Summary + since
}

// causeMemory keeps, per root cause, when it was first seen, so that a
// cause's "since" stays put while it lasts, whatever its problems' kinds
// or messages do in between.
type causeMemory struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// stabilize sets each cause's Since to when its root cause was first seen
// in a row of snapshots, and forgets the causes that are gone.
func (m *causeMemory) stabilize(cs []Cause) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.since == nil {
		m.since = map[string]time.Time{}
	}
	seen := make(map[string]bool, len(cs))
	for i := range cs {
		k := cs[i].Kind
		seen[k] = true
		if t, ok := m.since[k]; ok && t.Before(cs[i].Since) {
			cs[i].Since = t
		} else {
			m.since[k] = cs[i].Since
		}
	}
	for k := range m.since {
		if !seen[k] {
			delete(m.since, k)
		}
	}
}

// networkMarkers start the part of an error's text that says why a
// service could not be reached, after the place-specific wrapping ("new
// batch for "t" partition 1: ").
var networkMarkers = []string{"dial tcp", "dial udp", "lookup ", "read tcp", "write tcp", "tls:", "x509:", "i/o timeout", "connection reset", "connection refused", "EOF"}

// rootText is an error's text without the wrapping that names one place,
// when it says why a service could not be reached: the same refusal on 20
// hub partitions is one text.
func rootText(e string) string {
	if textCause(e) == "" {
		return e
	}
	cut := -1
	for _, m := range networkMarkers {
		if i := strings.Index(e, m); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut <= 0 {
		return e
	}
	return e[cut:]
}

// distinctErrors returns the problems' error texts, each once, in order.
func distinctErrors(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		e := p.Error
		if e == "" {
			e = p.Message
		}
		e = rootText(strings.ReplaceAll(e, "\n", "; "))
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}
