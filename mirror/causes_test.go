package mirror

import (
	"strings"
	"testing"
	"time"
)

// Problems of one kind on several hubs are one cause, with its remedy and
// a link to the documentation; the generic errors come last.
func TestCausesGroupProblems(t *testing.T) {
	since := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	var ps []Problem
	for i, hub := range []string{"a", "b", "c", "d", "e"} {
		ps = append(ps, Problem{Kind: KindUnauthorized, Hub: hub, Partition: -1, Message: "InvalidSignature: the token has an invalid signature", Since: since.Add(time.Duration(i) * time.Second)})
	}
	ps = append(ps, Problem{Kind: KindError, Hub: "a", Partition: -1, Message: "connection reset", Since: since})
	ps = append(ps, Problem{Kind: KindGap, Topic: "t", Partition: 2, Hub: "t", Message: "3 records were removed", Since: since})
	cs := Causes(ps)
	if len(cs) != 3 || cs[0].Kind != KindUnauthorized || cs[2].Kind != KindError {
		t.Fatalf("causes: %+v", cs)
	}
	u := cs[0]
	if u.Summary != "unauthorized on 5 event hubs (InvalidSignature: the token has an invalid signature)" || len(u.Where) != 5 || !u.Since.Equal(since) {
		t.Errorf("unauthorized cause: %+v", u)
	}
	if !strings.Contains(u.Remedy, "`EVENTHUBS`") || !strings.Contains(u.Remedy, "Azure Event Hubs Data Sender") || !strings.HasSuffix(u.Doc, "docs/deploying.md#troubleshooting") {
		t.Errorf("remedy %q, doc %q", u.Remedy, u.Doc)
	}
	if cs[1].Summary != "gap on 1 partition (3 records were removed)" || cs[1].Where[0] != "t/2 -> t" {
		t.Errorf("gap cause: %+v", cs[1])
	}
	for _, kind := range []string{KindUnauthorized, KindHubMissing, KindThrottled, KindOversized, KindGap, KindRecreated, KindStalled, KindKafka, KindCertificate, KindError} {
		if r, doc := Remedy(kind); r == "" || !strings.HasPrefix(doc, DocsURL) || remedies[kind][0] == "" {
			t.Errorf("kind %q has no remedy of its own", kind)
		}
	}
}

func TestBacklogInWords(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 5, 0, 0, time.UTC)
	lag := &LagReport{Time: now, Total: 3_200_000, BehindBy: 200 * time.Second, Partitions: []PartitionLag{{Lag: 3_200_000}}}
	b := NewBacklog(lag, Throughput{CurrentPerSec: 1000, RecordsPerSec: 5, Window: 5 * time.Minute}, nil, false)
	if b.Summary != "3,200,000 records behind, the oldest from 3 min 20 s ago, about 53 min 20 s at 1,000 events/s" || b.ETA != 3200*time.Second {
		t.Errorf("backlog: %+v", b)
	}
	if b.Throttled || b.Remedy != "" {
		t.Errorf("backlog not throttled has a remedy: %+v", b)
	}
	// At the namespace's quota the rate is the namespace's, and the way
	// to go faster is a larger namespace.
	b = NewBacklog(lag, Throughput{CurrentPerSec: 1000, Window: 5 * time.Minute, Throttled: 2400}, nil, false)
	if b.Summary != "3,200,000 records behind, the oldest from 3 min 20 s ago, about 53 min 20 s at the namespace's 1,000 events/s (Event Hubs throttled 2,400 sends in the last 5 min); raise `eventhubs_capacity` or enable auto-inflate" ||
		!b.Throttled || b.Remedy != ThrottledRemedy || b.ETA != 3200*time.Second {
		t.Errorf("throttled backlog: %+v", b)
	}
	b = NewBacklog(lag, Throughput{Window: 5 * time.Minute}, nil, false)
	if !strings.Contains(b.Summary, "not moving") || b.ETA != 0 {
		t.Errorf("stuck backlog: %+v", b)
	}
	// Sends failing: no ETA from the rate before the outage, but since
	// when nothing moves.
	b = NewBacklog(lag, Throughput{CurrentPerSec: 55, RecordsPerSec: 55, LastDelivered: now.Add(-2 * time.Minute)}, nil, true)
	if b.Summary != "3,200,000 records behind, the oldest from 3 min 20 s ago, not moving since 03:03:00Z (2 min ago)" || b.ETA != 0 || !b.NotMoving {
		t.Errorf("failing backlog: %+v", b)
	}
	// An instance that mirrors nothing itself uses the group's rate.
	hist := []HistoryPoint{{At: now.Add(-30 * time.Second)}, {At: now, CommittedPerSec: 1000}}
	if b = NewBacklog(lag, Throughput{}, hist, false); b.ETA != 3200*time.Second {
		t.Errorf("backlog at the group's rate: %+v", b)
	}
	if b := NewBacklog(&LagReport{}, Throughput{}, nil, false); b.Summary != "caught up" {
		t.Errorf("no backlog: %+v", b)
	}
	paused := &LagReport{Partitions: []PartitionLag{{Topic: "prod.test5", Lag: 971, Paused: true}, {Topic: "prod.test1"}}}
	if b := NewBacklog(paused, Throughput{}, nil, false); b.Summary != `caught up except 971 records in 1 paused topic; resume with `+"`POST /api/resume`"+` {"topic":"prod.test5"}` || b.Paused != 971 {
		t.Errorf("paused backlog: %+v", b)
	}
	for d, want := range map[time.Duration]string{850 * time.Millisecond: "850 ms", 42 * time.Second: "42 s", 3 * time.Minute: "3 min", 2*time.Hour + 5*time.Minute: "2 h 5 min", 76 * time.Hour: "3 d 4 h"} {
		if got := Ago(d); got != want {
			t.Errorf("Ago(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestLatencyQuantiles(t *testing.T) {
	var h latencyHistogram
	if h.summary() != nil {
		t.Fatal("summary without observations")
	}
	// Two batches' counts, added one after the other.
	var a, b latencyCounts
	for i := range 100 {
		d := 10 * time.Millisecond
		if i == 99 {
			d = 2 * time.Second
		}
		if i < 60 {
			a.observe(d, 1)
		} else {
			b.observe(d, 1)
		}
	}
	h.add(&b)
	h.add(&a)
	h.add(&latencyCounts{})
	s := h.summary()
	if s.Records != 100 || s.P50 < 10*time.Millisecond || s.P50 > 12*time.Millisecond || s.P99 > 12*time.Millisecond || s.Max != 2*time.Second {
		t.Errorf("latency %+v", s)
	}
}
