package mirror

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DocsURL is the folder of the documentation pages the remedies link to.
const DocsURL = "https://github.com/ehmirror/ehmirror/blob/main/docs/"

// Cause is the problems of one kind grouped into one line, with what to
// do about them.
type Cause struct {
	Kind string `json:"kind"`
	// Summary is the cause in one line: "unauthorized on 5 event hubs
	// (InvalidSignature: …)".
	Summary string `json:"summary"`
	// Where lists the hubs, partitions or drains concerned.
	Where []string `json:"where"`
	// Since is when the oldest of its problems started.
	Since time.Time `json:"since"`
	// Remedy says what to do; Doc links to the documentation section about it.
	Remedy string `json:"remedy"`
	Doc    string `json:"doc"`
	// Headline is the cause as an on-call engineer reads it first, with
	// the service, its endpoint and since when (see Health.Describe).
	Headline string `json:"headline,omitempty"`
	// Network is why the service could not be reached (connection
	// refused, DNS, TLS, no answer), "" when it answered with an error.
	Network string `json:"network,omitempty"`
	// Error is the shortest error text; Details every distinct error
	// text of its problems, each once.
	Error   string   `json:"error,omitempty"`
	Details []string `json:"details,omitempty"`
	// Hubs and Partitions count the hubs and partitions concerned.
	Hubs       int `json:"hubs,omitempty"`
	Partitions int `json:"partitions,omitempty"`
}

// remedies are, per kind, what to do and the page and section (under
// DocsURL) about it.
var remedies = map[string][2]string{
	KindUnauthorized: {"check the key in `EVENTHUBS` (a connection string with Send and Manage or Listen rights), or, with a managed identity (`EVENTHUBS__fullyQualifiedNamespace`), the *Azure Event Hubs Data Sender* role of the app's identity on the namespace", "deploying.md#troubleshooting"},
	KindHubMissing:   {"create the event hub (Terraform `event_hubs`), or route the topic to an existing hub with `MIRROR_ROUTES`, or leave the topic out with `KAFKA_TOPICS_EXCLUDE`", "settings.md#common"},
	KindThrottled:    {"Event Hubs throttles the sends: raise the namespace's capacity (`eventhubs_capacity`) or enable auto-inflate; the records are retried at the next drain", "performance.md#at-the-namespaces-throughput-quota"},
	KindOversized:    {"a record is larger than the hub's maximum event size: use a tier with larger events, or set `MIRROR_OVERSIZE_POLICY=skip` to leave such records out", "delivery.md#what-arrives-in-event-hubs"},
	KindGap:          {"Kafka retention removed records before they were mirrored: they are lost for the hub; raise the topic's retention, or the drains' budget (`MIRROR_MAX_DURATION`) so they keep up", "delivery.md#positions"},
	KindRecreated:    {"the topic was deleted and recreated: check the `note` of its partitions and `MIRROR_GAP_POLICY`", "delivery.md#positions"},
	KindStalled:      {"the committed offset does not advance while there is lag: look at the drain lines for errors, at a pause, or at another consumer in the group (`KAFKA_GROUP`)", "operating.md#problem-kinds"},
	KindKafka:        {"Kafka is not reachable or refuses the app: check `KAFKA_BROKERS`, the network path, and the TLS and SASL settings (`KAFKA_TLS*`, `KAFKA_SASL_*`)", "managed-kafka.md"},
	KindEventHubs:    {"Event Hubs does not take the sends: check the namespace in `EVENTHUBS` (or `EVENTHUBS__fullyQualifiedNamespace`), its network path (firewall, private endpoint, DNS) and Azure's service health; the records wait in Kafka and are sent when Event Hubs answers again", "operating.md#problem-kinds"},
	KindCertificate:  {"renew the client certificate (`KAFKA_TLS_CERT_PEM`, `KAFKA_TLS_KEY_PEM`) before the broker refuses it; the warning period is `KAFKA_TLS_CERT_WARN_DAYS`", "managed-kafka.md#client-certificates-mutual-tls"},
	KindBehind:       {"records wait longer than `MIRROR_MAX_BACKLOG_AGE`: look at the other problems and the running drains (Event Hubs or Kafka unreachable, throttling, a stalled partition), or raise the drains' budget (`MIRROR_MAX_DURATION`) or start a catch-up (`POST /api/catchup`)", "operating.md#problem-kinds"},
	KindPausedLong:   {"a topic has been paused for longer than `MIRROR_MAX_PAUSE_AGE`: resume it (`POST /api/resume`) if the pause was forgotten; its records wait in Kafka and its committed position is kept", "operating.md#pause-and-resume"},
	KindError:        {"sends or fetches keep failing: the message names the service and the error; check the network path and the service's health (Event Hubs namespace, Kafka brokers)", "operating.md#problem-kinds"},
}

// networkRemedies are, per service and network cause, the specific
// remedy that replaces the service's general one.
var networkRemedies = map[string]string{
	KindEventHubs + CauseRefused: "the namespace refuses connections: check that `EVENTHUBS` names the right namespace and that its network rules (firewall, private endpoint) admit the app; the records wait in Kafka and are sent when Event Hubs answers again",
	KindEventHubs + CauseDNS:     "the namespace's name does not resolve: check the host in `EVENTHUBS` (or `EVENTHUBS__fullyQualifiedNamespace`) and, with a private endpoint, the app's private DNS zone `privatelink.servicebus.windows.net`",
	KindEventHubs + CauseTLS:     "the TLS handshake with the namespace fails: check for a proxy or firewall that intercepts TLS on port 5671/443",
	KindEventHubs + CauseTimeout: "the namespace does not answer: check the network path to port 5671 (AMQP) or 443 (WebSockets) and Azure's service health for Event Hubs",
	KindKafka + CauseRefused:     "the brokers refuse connections: check that they run and that `KAFKA_BROKERS` names their listeners (host and port)",
	KindKafka + CauseDNS:         "the brokers' names do not resolve: check the hosts in `KAFKA_BROKERS` and the advertised listeners of the brokers",
	KindKafka + CauseTLS:         "the TLS handshake with the brokers fails: check `KAFKA_TLS`, the CA (`KAFKA_TLS_CA_PEM`) and the client certificate",
	KindKafka + CauseTimeout:     "the brokers do not answer: check the network path to `KAFKA_BROKERS` (firewall, VNet integration) and the brokers' health",
}

// Remedy returns what to do about problems of kind and the link to the
// documentation section about it.
func Remedy(kind string) (remedy, doc string) {
	r, ok := remedies[kind]
	if !ok {
		r = remedies[KindError]
	}
	return r[0], DocsURL + r[1]
}

// remedyFor is Remedy made specific by the network cause.
func remedyFor(kind, network string) (remedy, doc string) {
	remedy, doc = Remedy(kind)
	if r, ok := networkRemedies[kind+network]; ok {
		remedy = r
	}
	return remedy, doc
}

// Causes groups problems by kind, most widespread first for the same
// severity order as the reason (known kinds before generic errors).
func Causes(problems []Problem) []Cause {
	byKind := map[string][]Problem{}
	var kinds []string
	for _, p := range problems {
		if _, ok := byKind[p.Kind]; !ok {
			kinds = append(kinds, p.Kind)
		}
		byKind[p.Kind] = append(byKind[p.Kind], p)
	}
	out := make([]Cause, 0, len(kinds))
	for _, kind := range kinds {
		ps := byKind[kind]
		c := Cause{Kind: kind, Since: ps[0].Since, Details: distinctErrors(ps)}
		hubs, parts, other := 0, 0, 0
		seen := map[string]bool{}
		hubSeen := map[string]bool{}
		for _, p := range ps {
			if c.Network == "" {
				c.Network = p.Cause
			}
			if p.Hub != "" && !hubSeen[p.Hub] && (p.Topic == "" || kind == KindEventHubs) {
				hubSeen[p.Hub] = true
				c.Hubs++
			}
			where := p.where()
			if !seen[where] {
				seen[where] = true
				c.Where = append(c.Where, where)
				switch {
				case p.Topic != "" && p.Partition >= 0:
					parts++
				case p.Hub != "":
					hubs++
				default:
					other++
				}
			}
			if p.Since.Before(c.Since) {
				c.Since = p.Since
			}
		}
		c.Remedy, c.Doc = remedyFor(kind, c.Network)
		if c.Hubs == 0 {
			c.Partitions = parts
		}
		c.Error = shortestError(ps)
		var on []string
		if hubs > 0 {
			on = append(on, plural(hubs, "event hub"))
		}
		if parts > 0 {
			on = append(on, plural(parts, "partition"))
		}
		c.Summary = kind
		if len(on) > 0 {
			c.Summary += " on " + strings.Join(on, " and ")
		}
		c.Summary += " (" + shortest(ps) + ")"
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Cause) int {
		if (a.Kind == KindError) != (b.Kind == KindError) {
			if a.Kind == KindError {
				return 1
			}
			return -1
		}
		return len(b.Where) - len(a.Where)
	})
	return out
}

// where names the place of a problem.
func (p Problem) where() string {
	switch {
	case p.Topic != "" && p.Partition >= 0 && p.Hub != "":
		return fmt.Sprintf("%s/%d -> %s", p.Topic, p.Partition, p.Hub)
	case p.Topic != "" && p.Partition >= 0:
		return fmt.Sprintf("%s/%d", p.Topic, p.Partition)
	case p.Hub != "":
		return p.Hub
	case p.Kind == KindCertificate:
		return "Kafka client certificate"
	case p.Run == "readiness" || p.Run == "status":
		return "the " + p.Run + " check"
	}
	return "drain " + p.Run
}

// shortestError is the shortest error text among ps (their messages when
// they have none), cut to one readable line.
func shortestError(ps []Problem) string {
	es := distinctErrors(ps)
	m := es[0]
	for _, e := range es[1:] {
		if len(e) < len(m) {
			m = e
		}
	}
	if r := []rune(m); len(r) > 240 {
		m = string(r[:239]) + "…"
	}
	return m
}

// shortest is the shortest message among ps, cut to one readable line.
func shortest(ps []Problem) string {
	m := ps[0].Message
	for _, p := range ps[1:] {
		if len(p.Message) < len(m) {
			m = p.Message
		}
	}
	m = strings.ReplaceAll(m, "\n", "; ")
	if r := []rune(m); len(r) > 240 {
		m = string(r[:239]) + "…"
	}
	return m
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
