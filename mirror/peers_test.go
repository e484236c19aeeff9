package mirror

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A live record with many failing places stays under Kafka's metadata
// limit and counts what it leaves out; readers ignore their own instance's
// records and records not refreshed for LiveStaleAfter.
func TestPeerProblems(t *testing.T) {
	now := time.Now()
	var outages []Outage
	for i := range 40 {
		outages = append(outages, Outage{Kind: KindThrottled, Hub: fmt.Sprintf("hub-%02d", i), HubPartition: "0", Since: now.Add(-time.Minute), Last: now, Attempts: 9, Error: strings.Repeat("x", 1000)})
	}
	raw, err := encodeLive(liveRecord{V: liveRecordVersion, Instance: "b/2", Run: "timer 1", At: now, Outages: outages})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > maxLiveRecord {
		t.Fatalf("record of %d bytes, over %d", len(raw), maxLiveRecord)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	ps := peerProblems(map[TopicPartition]string{tp: raw}, "a/1", now)
	if len(ps) < 2 {
		t.Fatalf("%d problems", len(ps))
	}
	first, last := ps[0], ps[len(ps)-1]
	if first.Kind != KindThrottled || first.Hub != "hub-00" || !strings.Contains(first.Message, "seen by instance b/2, drain timer 1") {
		t.Errorf("first problem %+v", first)
	}
	if !strings.Contains(last.Message, "more places failing in the same drain") || len(ps)-1+moreOf(t, raw) != 40 {
		t.Errorf("last problem %+v, %d problems", last, len(ps))
	}
	if got := peerProblems(map[TopicPartition]string{tp: raw}, "b/2", now); len(got) != 0 {
		t.Errorf("own record read as a peer's: %v", got)
	}
	if got := peerProblems(map[TopicPartition]string{tp: raw}, "a/1", now.Add(LiveStaleAfter+time.Second)); len(got) != 0 {
		t.Errorf("stale record read: %v", got)
	}
	var h Health
	h.OK = true
	h.Add(ps...)
	// One root cause: the places left out of the record fold into it.
	if h.OK || !strings.HasPrefix(h.Reason, "throttled on 9 event hubs") || strings.Contains(h.Reason, "more cause") || len(h.Causes) != 1 || len(h.Causes[0].Details) != 2 {
		t.Errorf("health %+v", h)
	}
}

func moreOf(t *testing.T, raw string) int {
	t.Helper()
	i := strings.Index(raw, `"more":`)
	if i < 0 {
		return 0
	}
	var n int
	fmt.Sscanf(raw[i+len(`"more":`):], "%d", &n)
	return n
}
