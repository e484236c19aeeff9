package statuspage

import (
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

func TestRenderEscapesAndBars(t *testing.T) {
	var b strings.Builder
	err := Render(&b, Page{
		Time:     time.Now(),
		Reason:   `event hub <x>: unauthorized`,
		Problems: []string{`<script>alert(1)</script>`},
		Lag: &mirror.LagReport{Total: 30, Partitions: []mirror.PartitionLag{
			{Topic: "a", Partition: 0, Hub: "a", Committed: mirror.NoOffset, End: 10, Lag: 10},
			{Topic: "a", Partition: 1, Hub: "a", Committed: 5, End: 25, Lag: 20},
		}},
		Drains:   []*mirror.Report{{Run: "timer", Duration: 9 * time.Second, Budget: 10 * time.Second, Stopped: mirror.StopMaxDuration}},
		Settings: map[string]string{"KAFKA_SASL_PASSWORD": "(set, redacted)"},
	})
	if err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;", `class="badge bad"`, `<td class="n committed">none</td>`,
		`style="width: 79%"`, `style="width: 100%"`, `class="over" style="width: 90%"`, "(set, redacted)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Error("a problem was not escaped")
	}
}

// Lag bars are logarithmic: 104 and 10,055 records do not look alike, and
// one record still shows.
func TestLagBarsAreLogarithmic(t *testing.T) {
	small, big := logPct(104, 10055), logPct(10055, 10055)
	if big != 100 || small < 40 || small > 60 {
		t.Errorf("bars: 104 -> %d%%, 10,055 -> %d%%; want about half and full", small, big)
	}
	if logPct(1, 10_000_000) < 1 || logPct(0, 10) != 0 {
		t.Error("one record must show, none must not")
	}
}

// The page reloads itself without scripts, groups problems by cause with
// the remedy and a docs link, says how far behind in time and how long
// the backlog takes, shows the drain running now, and an unknown lag as
// "unknown", not 0.
func TestRenderTimeAndCauses(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	var probs []mirror.Problem
	for _, hub := range []string{"a", "b", "c", "d", "e"} {
		probs = append(probs, mirror.Problem{Kind: mirror.KindUnauthorized, Hub: hub, Partition: -1, Message: "InvalidSignature", Since: now.Add(-3 * time.Minute)})
	}
	lag := &mirror.LagReport{Total: 3_200_000, BehindBy: 200 * time.Second, LastDelivered: now.Add(-2 * time.Second), Partitions: []mirror.PartitionLag{
		{Topic: "a", Hub: "a", Lag: 3_200_000, BehindBy: 200 * time.Second, LastDelivered: now.Add(-2 * time.Second)}, {Topic: "a", Partition: 1, Hub: "a"}}}
	b := mirror.NewBacklog(lag, mirror.Throughput{CurrentPerSec: 1000, RecordsPerSec: 1000, Window: 5 * time.Minute}, nil, false)
	hist := []mirror.HistoryPoint{{At: now.Add(-time.Hour), Lag: 10}, {At: now.Add(-30 * time.Minute), Lag: 3_200_000}, {At: now, Lag: 3_200_000, RecordsPerSec: 1000}}
	var out strings.Builder
	err := Render(&out, Page{Time: now, Causes: mirror.Causes(probs), Lag: lag, Backlog: &b,
		Throughput: &mirror.Throughput{CurrentPerSec: 1000, RecordsPerSec: 1000, BytesPerSec: 2.5e6, Window: 5 * time.Minute, LastDelivered: now.Add(-2 * time.Second)},
		History:    hist,
		Running:    []mirror.RunningDrain{{Run: "timer", Started: now.Add(-10 * time.Second), Deadline: now.Add(time.Minute), Records: 1234}},
		NextTick:   now.Add(30 * time.Second),
		KafkaAuth:  "oauthbearer as mirror-client, token valid until 2026-12-03 07:55:00Z",
		Drains: []*mirror.Report{{Run: "timer", LagAfter: mirror.LagUnknown, Stopped: mirror.StopFailed, Errors: []string{"x", "y"}},
			{Run: "timer", LagAfter: mirror.LagUnknown, Stopped: mirror.StopFailed, Errors: []string{"x", "y"}}}})
	if err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{
		`<meta http-equiv="refresh" content="15">`,
		"unauthorized on 5 event hubs (InvalidSignature)", "Azure Event Hubs Data Sender", `docs/deploying.md#troubleshooting">docs</a>`, "for 3 min (since 2026-12-03 06:57:00Z)",
		"3,200,000 records behind, the oldest from 3 min 20 s ago, about 53 min 20 s at 1,000 events/s",
		`behind by <span id="behind-by">3 min 20 s</span>`, "1,000 records/s now, 1,000 records/s, 2.50 MB/s over the last 5 min in this instance", `<polyline class="lag" points="0.0,89.0 300.0,1.0 600.0,1.0"/>`, "next tick 2026-12-03 07:00:30Z",
		`<table id="running">`, "1,234",
		`, last record delivered <span id="last-delivered">2026-12-03 06:59:58Z (2 s ago)</span>`, `<td class="n delivered"><span title="2026-12-03 06:59:58Z">2 s ago</span></td>`, `<td class="n delivered"></td>`, `<td class="n lag-after">unknown</td>`, "2 errors, the first: x",
		`<div id="kafka-auth" class="muted">kafka authentication: oauthbearer as mirror-client, token valid until 2026-12-03 07:55:00Z</div>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(page, "2 errors, the first: x"); n != 1 {
		t.Errorf("the same errors of two drains in a row are shown %d times, want once", n)
	}
	if n := strings.Count(page, `class="cause"`); n != 1 {
		t.Errorf("%d causes for one kind of problem on 5 hubs", n)
	}
}
