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
	KindCertificate:  {"renew the client certificate (`KAFKA_TLS_CERT_PEM`, `KAFKA_TLS_KEY_PEM`) before the broker refuses it; the warning period is `KAFKA_TLS_CERT_WARN_DAYS`", "managed-kafka.md#client-certificates-mutual-tls"},
	KindBehind:       {"records wait longer than `MIRROR_MAX_BACKLOG_AGE`: look at the other problems and the running drains (Event Hubs or Kafka unreachable, throttling, a stalled partition), or raise the drains' budget (`MIRROR_MAX_DURATION`) or start a catch-up (`POST /api/catchup`)", "operating.md#problem-kinds"},
	KindPausedLong:   {"a topic has been paused for longer than `MIRROR_MAX_PAUSE_AGE`: resume it (`POST /api/resume`) if the pause was forgotten; its records wait in Kafka and its committed position is kept", "operating.md#pause-and-resume"},
	KindError:        {"sends or fetches keep failing: the message names the service and the error; check the network path and the service's health (Event Hubs namespace, Kafka brokers)", "operating.md#problem-kinds"},
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
		c := Cause{Kind: kind, Since: ps[0].Since}
		c.Remedy, c.Doc = Remedy(kind)
		hubs, parts, other := 0, 0, 0
		seen := map[string]bool{}
		for _, p := range ps {
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
	}
	return "drain " + p.Run
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
