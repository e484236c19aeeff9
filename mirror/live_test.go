package mirror_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// Event Hubs becomes unreachable (every send rejected) while a following
// drain runs: the status turns not-OK within seconds while the drain still
// runs, the drain stops at the end of its follow window (not at its much
// later budget) with the unsent records uncommitted, its line counts the
// outage as an error at level ERROR, and once Event Hubs is back the
// problem clears and the next drain mirrors everything.
func TestOutageInsideAFollowingDrain(t *testing.T) {
	e := newEnv(t)
	logs := &syncBuffer{}
	m := e.newMirror(mirror.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), MaxRetryBackoff: 500 * time.Millisecond})
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 3 * time.Minute})
	t.Cleanup(svc.Close)
	for i := range 20 {
		e.produce(followRecord(int32(i%4), i))
	}

	window := 12 * time.Second
	start := time.Now()
	until := start.Add(window)
	type result struct {
		rep *mirror.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := svc.DrainFollowing(context.Background(), "timer", until)
		done <- result{rep, err}
	}()
	waitEvents(t, e, 20, 10*time.Second)

	// Event Hubs refuses everything from now on; records keep coming.
	e.emu.Faults().RejectFraction(1, emulator.ConditionInternalError)
	for i := 20; i < 40; i++ {
		e.produce(followRecord(int32(i%4), i))
	}
	var seen mirror.Health
	for time.Now().Before(until) {
		lag, _ := m.Lag(context.Background(), nil)
		seen = svc.Health(lag)
		if !seen.OK {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if seen.OK || time.Now().After(until) {
		t.Fatalf("the status stayed OK during the outage, while the drain ran: %+v", seen)
	}
	if !strings.HasPrefix(seen.Reason, "Event Hubs fails the sends") || !strings.Contains(seen.Problems[0].Message, "sends to event hub prod.test") {
		t.Errorf("the reason does not name Event Hubs failing the sends, or the problem the place: %q %v", seen.Reason, seen.Problems)
	}
	// Another instance, which runs no drain, sees it from Kafka alone once
	// the oldest refused record is older than its MIRROR_MAX_BACKLOG_AGE.
	other := e.newMirror(mirror.Options{})
	var behind *mirror.Problem
	for behind == nil && time.Now().Before(until) {
		if lag, err := other.Lag(context.Background(), nil); err == nil {
			behind = mirror.BacklogProblem(lag, 3*time.Second)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if behind == nil || behind.Kind != mirror.KindBehind || behind.Topic != "prod.test1" {
		t.Errorf("another instance does not see the backlog age: %+v", behind)
	}
	running := m.Running()
	if len(running) != 1 || len(running[0].Outages) == 0 || !running[0].Outages[0].Ongoing() {
		t.Errorf("the running drain does not show its ongoing outage: %+v", running)
	}

	var r result
	select {
	case r = <-done:
	case <-time.After(window + 60*time.Second):
		t.Fatalf("the following drain did not stop at the end of its window (%s) while Event Hubs was unreachable", until.Format(time.TimeOnly))
	}
	if ended := time.Since(start); ended > window+20*time.Second {
		t.Errorf("the following drain ran %s past the end of its window", ended-window)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.rep.Failed() || len(r.rep.Outages) == 0 {
		t.Errorf("the drain's report does not fail with its outage: %+v", r.rep)
	}
	if r.rep.Records != 20 {
		t.Errorf("records %d acknowledged, want the 20 before the outage", r.rep.Records)
	}
	var drainLine string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=drain ") {
			drainLine = l
		}
	}
	if !strings.Contains(drainLine, "level=ERROR") || strings.Contains(drainLine, " errors=0 ") {
		t.Errorf("the drain line hides the outage: %s", drainLine)
	}
	// Nothing refused was committed.
	lag, err := m.Lag(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if lag.Total != 20 {
		t.Errorf("lag %d after the drain, want the 20 records refused (uncommitted)", lag.Total)
	}
	// Time, not only counts: the backlog's age, in the status and in the
	// drain's report and line, and the latency of what was mirrored.
	if lag.BehindBy < window/2 || lag.BehindBy > time.Since(start) {
		t.Errorf("behind by %s; want the age of the first refused record", lag.BehindBy)
	}
	if r.rep.BehindBy <= 0 || !strings.Contains(drainLine, " backlog_age_ms=") || strings.Contains(drainLine, " backlog_age_ms=0 ") {
		t.Errorf("the drain's backlog age is missing: %s, %s", r.rep.BehindBy, drainLine)
	}
	if l := r.rep.Latency; l == nil || l.Records != 20 || l.P99 <= 0 {
		t.Errorf("latency of the 20 records mirrored: %+v", l)
	}
	if h := svc.Health(lag); h.OK {
		t.Errorf("the status is OK right after a drain that ended in an outage")
	}

	// The drain goes on in its handover grace (HandoverGrace), still
	// refused; it has ended, with nothing more committed, before Event
	// Hubs comes back, or its retries would mirror some of the rest.
	for graceEnd := time.Now().Add(mirror.HandoverGrace + 30*time.Second); len(m.Running()) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(graceEnd) {
			t.Fatalf("the drain handed over still runs %s after its window: %+v", time.Since(until), m.Running())
		}
	}
	if lag, err := m.Lag(context.Background(), nil); err != nil || lag.Total != 20 {
		t.Fatalf("lag after the grace: %+v %v, want the 20 records refused", lag, err)
	}

	// Event Hubs is back: the next drain mirrors the rest, the problem clears.
	e.emu.Faults().RejectFraction(0, "")
	rep, err := svc.Drain(context.Background(), "timer")
	if err != nil || rep.Failed() || rep.Records != 20 {
		t.Fatalf("drain after the outage: err %v, failed %v, records %d\n%s", err, rep.Failed(), rep.Records, strings.Join(rep.Lines(), "\n"))
	}
	lag, _ = m.Lag(context.Background(), nil)
	if h := svc.Health(lag); !h.OK {
		t.Errorf("the outage is still a problem after Event Hubs came back: %s", h.Reason)
	}
	counts := e.tally("prod.test1", 4)
	if len(counts) != 40 {
		t.Errorf("%d distinct records mirrored, want 40", len(counts))
	}
}

// A drain whose every hub refuses the key stops "failed" (not "no
// partitions") with its lag unknown: -1 in the report's JSON as in its log
// line.
func TestFailedDrainSpeaksOneVocabulary(t *testing.T) {
	e := newEnv(t)
	e.produce(followRecord(0, 1))
	src := e.newSource()
	cs := e.emu.ConnectionString()
	i := strings.Index(cs, "SharedAccessKey=")
	if i < 0 {
		t.Fatalf("no key in %q", cs)
	}
	rest := cs[i:]
	if j := strings.Index(rest, ";"); j >= 0 {
		rest = rest[j:]
	} else {
		rest = ""
	}
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: cs[:i] + "SharedAccessKey=d3Jvbmcga2V5" + rest, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	logs := &syncBuffer{}
	m, err := mirror.New(src, sink, mirror.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Topics: mustFilter(t, `prod\.test1`)})
	if err != nil {
		t.Fatal(err)
	}
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	t.Cleanup(svc.Close)
	rep, _ := svc.Drain(context.Background(), "timer")
	if len(rep.HubErrors) == 0 || rep.HubErrors[0].Kind != mirror.KindUnauthorized {
		t.Fatalf("want the hub refusing the key: %+v", rep)
	}
	if rep.Stopped != mirror.StopFailed || rep.LagAfter != mirror.LagUnknown {
		t.Errorf("a drain refused by every hub: stopped %q, lag_after %d; want %q, -1", rep.Stopped, rep.LagAfter, mirror.StopFailed)
	}
	raw, _ := json.Marshal(rep)
	if !strings.Contains(string(raw), `"lag_after":-1`) || !strings.Contains(string(raw), `"stopped":"failed"`) {
		t.Errorf("JSON: %s", raw)
	}
	if l := logs.String(); !strings.Contains(l, " lag=-1 ") || !strings.Contains(l, ` stopped=failed`) {
		t.Errorf("log line: %s", l)
	}
}

// A drain that finds every partition held by another drain of the process
// says so (stopped "busy") and reports the partitions' real lag, not 0.
func TestBusyDrainReportsRealLag(t *testing.T) {
	e := newEnv(t)
	m := e.newMirror(mirror.Options{Topics: mustFilter(t, `prod\.test1`)})
	e.emu.Faults().DelayDispositions(3 * time.Second)
	for i := range 8 {
		e.produce(followRecord(int32(i%4), i))
	}
	done := make(chan *mirror.Report, 1)
	go func() {
		rep, _ := m.Drain(context.Background(), "first", mirror.Limits{MaxDuration: 30 * time.Second})
		done <- rep
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(m.Running()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	rep, err := m.Drain(context.Background(), "second", mirror.Limits{MaxDuration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != mirror.StopBusy || rep.LagAfter != 8 {
		t.Errorf("drain beside a running one: stopped %q, lag_after %d; want %q, 8", rep.Stopped, rep.LagAfter, mirror.StopBusy)
	}
	e.emu.Faults().DelayDispositions(0)
	<-done

	// A drain that owns some partitions and finds others busy counts the
	// busy ones' real lag too.
	wide := e.newMirror(mirror.Options{Topics: mustFilter(t, `prod\.test[12]`)})
	e.emu.Faults().DelayDispositions(3 * time.Second)
	for i := range 8 {
		e.produce(followRecord(int32(i%4), i))
	}
	narrow := mustFilter(t, `prod\.test1`)
	go func() {
		rep, _ := wide.Drain(context.Background(), "first", mirror.Limits{MaxDuration: 30 * time.Second, Topics: &narrow})
		done <- rep
	}()
	deadline = time.Now().Add(20 * time.Second)
	for len(wide.Running()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	rep, err = wide.Drain(context.Background(), "second", mirror.Limits{MaxDuration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var busy, busyLag int64
	for _, p := range rep.Partitions {
		if p.Busy {
			busy++
			busyLag += p.LagAfter
		}
	}
	if busy != 4 || busyLag != 8 || rep.LagAfter != 8 || rep.Stopped == mirror.StopBusy {
		t.Errorf("mixed drain: %d busy partitions with lag %d, lag_after %d, stopped %q; want 4, 8, 8, not busy", busy, busyLag, rep.LagAfter, rep.Stopped)
	}
	e.emu.Faults().DelayDispositions(0)
	<-done
}

func mustFilter(t *testing.T, re string) mirror.TopicFilter {
	t.Helper()
	f, err := mirror.CompileTopicFilter(re, "")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The end of a follow window cuts the readers' long polls: that is not a
// Kafka problem and logs no warning.
func TestFollowStopIsSilent(t *testing.T) {
	e := newEnv(t)
	logs := &syncBuffer{}
	m := e.newMirror(mirror.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	e.produce(followRecord(0, 1))
	for range 3 {
		rep, err := m.Drain(context.Background(), "follow", mirror.Limits{MaxDuration: 30 * time.Second, FollowUntil: time.Now().Add(2 * time.Second)})
		if err != nil || rep.Stopped != mirror.StopFollowed || rep.Failed() {
			t.Fatalf("drain: %v, stopped %q, failed %v", err, rep.Stopped, rep.Failed())
		}
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("a follow stop logged: %s", l)
		}
	}
}

// Readiness checks each bootstrap broker and every hub of the mirrored
// topics: a silent broker is named, a wrong key is "unauthorized" on each
// hub; with the right settings everything is ready.
func TestReadinessNamesBrokersAndHubs(t *testing.T) {
	e := newEnv(t)
	ok := e.newMirror(mirror.Options{})
	r := ok.Readiness(context.Background())
	if !r.OK || len(r.Kafka) != 1 || len(r.EventHubs) != len(seedTopics) || r.Summary != "kafka: 1 of 1 broker answers; event hubs: 5 of 5 hubs accept the credentials" {
		t.Errorf("readiness with good settings: %+v", r)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	src, err := kafka.NewSource(kafka.Options{Brokers: append(e.cluster.ListenAddrs(), ln.Addr().String()), Group: e.group, Logger: testLogger(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	cs := e.emu.ConnectionString()
	i := strings.Index(cs, "SharedAccessKey=")
	rest := cs[i:]
	if j := strings.Index(rest, ";"); j >= 0 {
		rest = rest[j:]
	} else {
		rest = ""
	}
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: cs[:i] + "SharedAccessKey=d3Jvbmcga2V5" + rest, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	bad, err := mirror.New(src, sink, mirror.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// The topic listing goes to a bootstrap broker kafka-go picks at
	// random; when it picks the silent one the hubs cannot be listed.
	// Check again until a listing went to the one that answers.
	for range 6 {
		if r = bad.Readiness(context.Background()); len(r.EventHubs) > 0 {
			break
		}
	}
	if r.OK || len(r.Kafka) != 2 || !r.Kafka[0].OK || r.Kafka[1].OK || r.Kafka[1].Cause != "no answer" {
		t.Errorf("a silent broker is not named: %+v", r.Kafka)
	}
	for _, h := range r.EventHubs {
		if h.OK || h.Cause != mirror.KindUnauthorized {
			t.Errorf("hub %s with a wrong key: %+v", h.Name, h)
		}
	}
	if !strings.Contains(r.Summary, "kafka: 1 of 2 brokers answer ("+ln.Addr().String()+": no answer: ") || !strings.Contains(r.Summary, "event hubs: 0 of 5 hubs accept the credentials") {
		t.Errorf("summary: %s", r.Summary)
	}
}

// The lag report says per partition, and in total, when Event Hubs last
// acknowledged one of its records in this process; the drain report too.
// A partition with nothing delivered has none.
func TestLagSaysWhenEachPartitionLastDelivered(t *testing.T) {
	e := newEnv(t)
	m := e.newMirror(mirror.Options{Topics: mustFilter(t, `prod\.test1`)})
	for i := range 6 {
		e.produce(followRecord(int32(i%2), i)) // partitions 0 and 1 only
	}
	before := time.Now()
	rep, err := m.Drain(context.Background(), "timer", mirror.Limits{MaxDuration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	lag, err := m.Lag(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range lag.Partitions {
		got := pl.LastDelivered
		if pl.Partition < 2 && (got.Before(before) || got.After(after)) {
			t.Errorf("%s/%d: last delivered %v, want within the drain [%v, %v]", pl.Topic, pl.Partition, got, before, after)
		}
		if pl.Partition >= 2 && !got.IsZero() {
			t.Errorf("%s/%d: last delivered %v with nothing delivered", pl.Topic, pl.Partition, got)
		}
	}
	if lag.LastDelivered.Before(before) || lag.LastDelivered.After(after) {
		t.Errorf("total last delivered %v", lag.LastDelivered)
	}
	for _, p := range rep.Partitions {
		if (p.Records > 0) == p.LastDelivered.IsZero() {
			t.Errorf("drain report %s/%d: %d records, last delivered %v", p.Topic, p.Partition, p.Records, p.LastDelivered)
		}
	}
}
