package mirror_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// commitGate lets the next allow OffsetCommit requests through and cuts
// every later one while closed: a drain whose commits fail after it sent
// is an unclean end, as after a kill.
type commitGate struct {
	closed atomic.Bool
	allow  atomic.Int32
}

func newCommitGate(e *env) *commitGate {
	g := &commitGate{}
	e.cluster.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if g.closed.Load() && g.allow.Add(-1) < 0 {
			return nil, fmt.Errorf("injected: commit cut"), true
		}
		return nil, nil, false
	})
	return g
}

// cut lets the drain's first commit (its floors, before it sends) through
// and fails every later one.
func (g *commitGate) cut() { g.allow.Store(1); g.closed.Store(true) }

func (g *commitGate) open() { g.closed.Store(false) }

// produceKeyed writes n keyed records to each of the topic's partitions.
func (e *env) produceKeyed(topic string, partitions, n int, tag string) {
	e.t.Helper()
	var recs []*kgo.Record
	for p := range partitions {
		for i := range n {
			r := &kgo.Record{Topic: topic, Partition: int32(p), Key: fmt.Appendf(nil, "k%d", i%17), Value: fmt.Appendf(nil, "%s-%d-%d", tag, p, i)}
			switch i % 3 {
			case 1: // headers, repeated names, the order property
				r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}, {Key: "a#b", Value: nil}, {Key: "trace", Value: []byte("t2")}}
			case 2: // a tombstone without a key
				r.Key, r.Value = nil, nil
			}
			recs = append(recs, r)
		}
	}
	e.produce(recs...)
}

// exactlyOnce fails unless every offset below want[topic][partition] is in
// hub exactly once and nothing else is.
func exactlyOnce(t *testing.T, e *env, hub string, want map[string]int64) {
	t.Helper()
	counts := e.tally(hub, 4)
	lost, dups := 0, 0
	for topic, n := range want {
		for p := range int32(4) {
			for off := range n {
				switch c := counts[provenance{topic, p, off}]; {
				case c == 0:
					lost++
				case c > 1:
					dups += c - 1
				}
			}
		}
	}
	total := 0
	for _, c := range counts {
		total += c
	}
	if lost > 0 || dups > 0 {
		t.Fatalf("hub %s: %d lost, %d duplicates (%d events)", hub, lost, dups, total)
	}
}

func alreadyMirrored(rep *mirror.Report) int64 {
	var n int64
	for _, p := range rep.Partitions {
		n += p.AlreadyMirrored
	}
	return n
}

// TestDedupAfterUncleanEnd: a drain sends every record and its commits are
// cut (an unclean end); the next drain publishes no record twice and loses
// none, in every partitioning mode (hash spreads one Kafka partition over
// every hub partition), and a drain after it starts clean.
func TestDedupAfterUncleanEnd(t *testing.T) {
	for _, part := range []mirror.Partitioning{mirror.PartitionByHash, mirror.PartitionPreserve, mirror.PartitionRoundRobin} {
		t.Run(string(part), func(t *testing.T) {
			e := newEnv(t)
			const topic = "prod.test1"
			gate := newCommitGate(e)
			e.produceKeyed(topic, 4, 50, "a")
			opts := mirror.Options{Deduplicate: true, Partitioning: part}

			gate.cut()
			rep1 := e.drain(e.newMirror(opts), mirror.Limits{})
			if rep1.Records != 200 {
				t.Fatalf("first drain sent %d records, want 200: %v", rep1.Records, rep1.Lines())
			}
			gate.open()
			m := e.newMirror(opts)
			for p, c := range e.committed(m, topic) {
				if c > 0 {
					t.Fatalf("partition %d committed %d although commits were cut", p, c)
				}
			}
			rep2 := e.drain(m, mirror.Limits{})
			if rep2.Records != 0 || alreadyMirrored(rep2) != 200 || rep2.Deduplication != "" {
				t.Fatalf("second drain sent %d records, found %d in the hub, want 0 and 200: %v", rep2.Records, alreadyMirrored(rep2), rep2.Lines())
			}
			for p, c := range e.committed(m, topic) {
				if c != 50 {
					t.Fatalf("partition %d committed %d, want 50", p, c)
				}
			}
			exactlyOnce(t, e, topic, map[string]int64{topic: 50})
			src := e.newSource()
			if md := e.committedMetadata(src, topic, 0); !strings.Contains(md, "clean=1") {
				t.Fatalf("metadata after a clean end: %q", md)
			}

			// A clean end: the next drain reads nothing back.
			e.produceKeyed(topic, 4, 10, "b")
			rep3 := e.drain(m, mirror.Limits{})
			if rep3.Records != 40 || alreadyMirrored(rep3) != 0 {
				t.Fatalf("third drain: %d records, %d found: %v", rep3.Records, alreadyMirrored(rep3), rep3.Lines())
			}
			exactlyOnce(t, e, topic, map[string]int64{topic: 60})
		})
	}
}

// TestDedupPartialSendTwoTopicsOneHub: two topics with the same partitions
// and offsets go to one hub; the first drain sends only part of them and
// its commits are cut. The next drain sends exactly the rest: the events of
// one topic never stand for records of the other.
func TestDedupPartialSendTwoTopicsOneHub(t *testing.T) {
	e := newEnv(t, emulator.HubConfig{Name: "merged", PartitionCount: 4})
	gate := newCommitGate(e)
	e.produceKeyed("prod.test1", 4, 30, "one")
	e.produceKeyed("prod.test2", 4, 30, "two")
	opts := mirror.Options{
		Deduplicate: true,
		Topics:      mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test[12]$`)},
		Routes:      []mirror.Route{{Pattern: regexp.MustCompile(`^prod\.test[12]$`), Hub: "merged"}},
	}
	gate.cut()
	rep1 := e.drain(e.newMirror(opts), mirror.Limits{MaxRecords: 100})
	if rep1.Records == 0 || rep1.Records >= 240 {
		t.Fatalf("first drain sent %d records, want part of 240: %v", rep1.Records, rep1.Lines())
	}
	gate.open()
	rep2 := e.drain(e.newMirror(opts), mirror.Limits{})
	if rep1.Records+rep2.Records != 240 || alreadyMirrored(rep2) != rep1.Records {
		t.Fatalf("drains sent %d + %d records, second found %d: %v", rep1.Records, rep2.Records, alreadyMirrored(rep2), rep2.Lines())
	}
	exactlyOnce(t, e, "merged", map[string]int64{"prod.test1": 30, "prod.test2": 30})
}

// TestDedupWithoutListenRight: the credentials may send but not listen. The
// drain after an unclean end says so in one line and sends everything again
// (at-least-once): duplicates, nothing lost.
func TestDedupWithoutListenRight(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test3"
	emu, err := emulator.Start(context.Background(), emulator.Config{
		Listen:   "127.0.0.1:0",
		Hubs:     []emulator.HubConfig{{Name: topic, PartitionCount: 4}},
		Policies: []emulator.Policy{{Name: "sender", Key: "c2VuZGVy", Rights: []string{emulator.RightSend}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	e.emu = emu
	conn := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=sender;SharedAccessKey=c2VuZGVy;UseDevelopmentEmulator=true", emu.Addr())
	newMirror := func() *mirror.Mirror {
		src, err := kafka.NewSource(kafka.Options{Brokers: e.cluster.ListenAddrs(), Group: e.group, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = src.Close() })
		sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: conn, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sink.Close(context.Background()) })
		m, err := mirror.New(src, sink, mirror.Options{Deduplicate: true, Logger: testLogger(), CommitInterval: 100e6})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	gate := newCommitGate(e)
	e.produceKeyed(topic, 4, 25, "a")
	gate.cut()
	rep1 := e.drain(newMirror(), mirror.Limits{})
	if rep1.Records != 100 || !strings.Contains(rep1.Deduplication, "Listen") {
		t.Fatalf("first drain: %d records, deduplication %q", rep1.Records, rep1.Deduplication)
	}
	gate.open()
	rep2 := e.drain(newMirror(), mirror.Limits{})
	if rep2.Records != 100 || alreadyMirrored(rep2) != 0 {
		t.Fatalf("second drain: %d records, %d found; want all 100 sent again: %v", rep2.Records, alreadyMirrored(rep2), rep2.Lines())
	}
	lines := strings.Join(rep2.Lines(), "\n")
	if n := strings.Count(lines, "lack the Listen right"); n != 1 {
		t.Fatalf("want the missing right in one line, got %d:\n%s", n, lines)
	}
	counts := e.tally(topic, 4)
	for p := range int32(4) {
		for off := range int64(25) {
			if counts[provenance{topic, p, off}] != 2 {
				t.Fatalf("%s/%d/%d in the hub %d times, want 2 (at-least-once)", topic, p, off, counts[provenance{topic, p, off}])
			}
		}
	}
}

// TestDedupIgnoresForgedProvenance: an event with a record's exact
// provenance but other content (another deployment mirroring a topic of
// the same name into the same hub) does not stand for the record: the
// record is sent.
func TestDedupIgnoresForgedProvenance(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test4"
	gate := newCommitGate(e)
	e.produceKeyed(topic, 1, 40, "real")
	opts := mirror.Options{Deduplicate: true, Partitioning: mirror.PartitionPreserve, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test4$`)}}
	gate.cut()
	rep1 := e.drain(e.newMirror(opts), mirror.Limits{MaxRecords: 10})
	if rep1.Records == 0 || rep1.Records >= 40 {
		t.Fatalf("first drain sent %d records: %v", rep1.Records, rep1.Lines())
	}
	// Forge offset 30 of partition 0: same provenance and message id,
	// another body.
	sink := e.newSink()
	ctx := context.Background()
	forged := mirror.EventFor(&mirror.Record{Topic: topic, Partition: 0, Offset: 30, Key: []byte("k13"), Value: []byte("forged")})
	b, err := sink.NewBatch(ctx, topic, "0")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(&forged); err != nil {
		t.Fatal(err)
	}
	if err := sink.Send(ctx, b); err != nil {
		t.Fatal(err)
	}
	gate.open()
	rep2 := e.drain(e.newMirror(opts), mirror.Limits{})
	if rep1.Records+rep2.Records != 40 || alreadyMirrored(rep2) != rep1.Records {
		t.Fatalf("drains sent %d + %d, second found %d: %v", rep1.Records, rep2.Records, alreadyMirrored(rep2), rep2.Lines())
	}
	var real bool
	for _, recs := range e.mirrored(topic, 4) {
		for _, r := range recs {
			if r.Partition == 0 && r.Offset == 30 && string(r.Value) == "real-0-30" {
				real = true
			}
		}
	}
	if !real {
		t.Fatal("record 30 was skipped because of a forged event")
	}
}

// TestDedupResolvesLostAcknowledgements: Event Hubs stores the events but
// its acknowledgements do not come back before the drain ends (unknown
// outcome: nothing acknowledged, nothing committed). The next drain reads
// them back instead of guessing and sends none of them again.
func TestDedupResolvesLostAcknowledgements(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test5"
	for i := range 20 { // one batch each: one fetch each
		for p := range int32(4) {
			e.produce(&kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "a-%d-%d", p, i)})
		}
	}
	opts := mirror.Options{Deduplicate: true, FetchBytes: 1, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test5$`)}}
	slowFetches(e, 20*time.Millisecond)
	// Once the drain is sending (its floors read), acknowledgements stop.
	go func() {
		for range 500 {
			n := 0
			for p := range 4 {
				n += len(e.emu.Events(topic, p))
			}
			if n >= 10 {
				e.emu.Faults().DelayDispositions(1500 * time.Millisecond)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	rep1 := e.drain(e.newMirror(opts), mirror.Limits{MaxDuration: 3 * time.Second})
	stored := 0
	for _, n := range e.tally(topic, 4) {
		stored += n
	}
	if rep1.Records >= int64(stored) {
		t.Fatalf("first drain: %d acknowledged, %d stored; want acknowledgements lost: %v", rep1.Records, stored, rep1.Lines())
	}
	e.emu.Faults().Reset()
	rep2 := e.drain(e.newMirror(opts), mirror.Limits{})
	if alreadyMirrored(rep2) == 0 || rep2.Records != 80-int64(stored) {
		t.Fatalf("second drain sent %d, found %d; %d were stored: %v", rep2.Records, alreadyMirrored(rep2), stored, rep2.Lines())
	}
	exactlyOnce(t, e, topic, map[string]int64{topic: 20})
}

// TestDedupUnreadHubPartitionIsSentAgain: hash partitioning spreads one
// Kafka partition over every hub partition; when one hub partition is not
// read back (here: its floor is missing from the commit), the records that
// went there are sent again and none is lost, while those found elsewhere
// are not.
func TestDedupUnreadHubPartitionIsSentAgain(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test2"
	gate := newCommitGate(e)
	e.produceKeyed(topic, 1, 60, "a")
	opts := mirror.Options{Deduplicate: true, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test2$`)}}
	gate.cut()
	if rep := e.drain(e.newMirror(opts), mirror.Limits{}); rep.Records != 60 {
		t.Fatalf("first drain: %v", rep.Lines())
	}
	gate.open()
	src := e.newSource()
	md := e.committedMetadata(src, topic, 0)
	if !strings.Contains(md, " seq=0:") || !strings.Contains(md, ",3:") {
		t.Fatalf("metadata without floors of every hub partition: %q", md)
	}
	before := e.tally(topic, 4)
	inThree := int64(len(e.mirrored(topic, 4)[3]))
	if inThree == 0 || inThree == 60 {
		t.Fatalf("hash put %d of 60 records into hub partition 3; the test needs some", inThree)
	}
	// Drop hub partition 3's floor.
	i := strings.Index(md, ",3:")
	j := strings.IndexAny(md[i+1:], ", ")
	cut := md[:i]
	if j >= 0 {
		cut += md[i+1+j:]
	}
	e.commitAs(src, topic, 0, 0, cut)

	rep := e.drain(e.newMirror(opts), mirror.Limits{})
	if rep.Records != inThree || alreadyMirrored(rep) != 60-inThree {
		t.Fatalf("sent %d, found %d; want %d sent again (hub partition 3) and %d found: %v", rep.Records, alreadyMirrored(rep), inThree, 60-inThree, rep.Lines())
	}
	after := e.tally(topic, 4)
	for off := range int64(60) {
		p := provenance{topic, 0, off}
		if after[p] == 0 || after[p] > before[p]+1 {
			t.Fatalf("%v: %d in the hub (before %d)", p, after[p], before[p])
		}
	}
}

// TestDedupFollowingDrain: a drain that follows its partitions sends
// records that arrived after it started, on partitions that were caught up
// when it began, and its commits are cut. The next drain finds them all.
func TestDedupFollowingDrain(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test3"
	gate := newCommitGate(e)
	opts := mirror.Options{Deduplicate: true, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test3$`)}}
	e.produceKeyed(topic, 4, 5, "a")
	m := e.newMirror(opts)
	if rep := e.drain(m, mirror.Limits{}); rep.Records != 20 {
		t.Fatalf("first drain: %v", rep.Lines())
	}
	gate.cut()
	done := make(chan *mirror.Report)
	go func() {
		rep, err := m.Drain(context.Background(), "follow", mirror.Limits{MaxDuration: 30 * time.Second, FollowUntil: time.Now().Add(2 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	time.Sleep(500 * time.Millisecond)
	e.produceKeyed(topic, 4, 10, "b") // offsets 5..14 of each partition
	rep2 := <-done
	if rep2.Records != 40 {
		t.Fatalf("following drain sent %d, want 40: %v", rep2.Records, rep2.Lines())
	}
	gate.open()
	rep3 := e.drain(e.newMirror(opts), mirror.Limits{})
	if rep3.Records != 0 || alreadyMirrored(rep3) != 40 {
		t.Fatalf("drain after the following one sent %d, found %d; want 0 and 40: %v", rep3.Records, alreadyMirrored(rep3), rep3.Lines())
	}
	exactlyOnce(t, e, topic, map[string]int64{topic: 15})
}

// TestDedupZombieStopsBeforeTheNewOwner: process A drains while its link to
// the group coordinator hangs (its heartbeats and rejoin go unanswered; its
// fetches and Event Hubs still work). A notices its claim ended and stops
// publishing before the coordinator expires its session and process B
// takes the partitions over, reconciles and drains the rest: no record is
// published twice, none is lost.
func TestDedupZombieStopsBeforeTheNewOwner(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test4"
	const n = 400
	for i := range n { // one batch each: one fetch each
		for p := range int32(4) {
			e.produce(&kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i%17), Value: fmt.Appendf(nil, "a-%d-%d", p, i)})
		}
	}
	opts := mirror.Options{Deduplicate: true, FetchBytes: 1, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test4$`)}}
	// A would still be draining when its session expires (about 10 s).
	slowFetches(e, 25*time.Millisecond)

	// A held request is never answered: kfake then reads nothing more on
	// that connection, which is what a hung link looks like to a client.
	// (Not SleepControl: kfake races on a request that queued behind a
	// sleeping one and then sleeps itself.)
	var member atomic.Value // A's member id, from its first heartbeat
	var hold atomic.Bool
	for _, key := range []kmsg.Key{kmsg.Heartbeat, kmsg.JoinGroup} {
		e.cluster.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			e.cluster.KeepControl()
			var id string
			switch r := req.(type) {
			case *kmsg.HeartbeatRequest:
				id = r.MemberID
				member.CompareAndSwap(nil, id)
			case *kmsg.JoinGroupRequest:
				id = r.MemberID
			}
			held := hold.Load() && id != "" && id == member.Load()
			return nil, nil, held
		})
	}

	start := time.Now()
	repA := make(chan *mirror.Report, 1)
	go func() {
		rep, err := e.newMirror(opts).Drain(context.Background(), "A", mirror.Limits{MaxDuration: 60 * time.Second})
		if err != nil {
			t.Error(err)
		}
		repA <- rep
	}()
	for e.emu.Stats().EventsStored < 100 && time.Since(start) < 20*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if member.Load() == nil {
		t.Fatal("A sent no heartbeat")
	}
	hold.Store(true)
	heldAt := time.Now()

	b := e.newMirror(opts)
	repB := make(chan *mirror.Report, 1)
	go func() {
		rep, err := b.Drain(context.Background(), "B", mirror.Limits{MaxDuration: 60 * time.Second})
		if err != nil {
			t.Error(err)
		}
		repB <- rep
	}()
	a := <-repA
	aEnded := time.Since(heldAt)
	if a.Stopped != mirror.StopRebalanced {
		t.Fatalf("A stopped: %q, want %q: %v", a.Stopped, mirror.StopRebalanced, a.Lines())
	}
	rb := <-repB
	t.Logf("A ended %v after its coordinator link hung, having sent %d; B sent %d, found %d already in the hub: %s",
		aEnded.Round(time.Millisecond), a.Records, rb.Records, alreadyMirrored(rb), rb.Stopped)
	for rb.Stopped != mirror.StopCaughtUp {
		rb = e.drain(b, mirror.Limits{})
	}
	exactlyOnce(t, e, topic, map[string]int64{topic: n})
}

// TestDedupSendOutcomeUnknownAtTheDeadline: Event Hubs is slow to store a
// batch, the drain gives up on it at its deadline (outcome unknown), and the
// batch is stored after that. The next drain of the same process, on the
// same connection, reads the hub back only once nothing sent before can
// still land, so it finds the batch and sends nothing twice.
func TestDedupSendOutcomeUnknownAtTheDeadline(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test2"
	e.produceKeyed(topic, 4, 20, "a")
	opts := mirror.Options{Deduplicate: true, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test2$`)}}
	m := e.newMirror(opts)
	e.emu.Faults().DelayIngest(2 * time.Second)
	rep1 := e.drain(m, mirror.Limits{MaxDuration: time.Second})
	e.emu.Faults().Reset()
	if rep1.Records == 80 {
		t.Fatalf("first drain had every send acknowledged: the delay did not bite: %v", rep1.Lines())
	}
	rep2 := e.drain(m, mirror.Limits{})
	t.Logf("first drain: %d acknowledged, stopped: %s; second: %d sent, %d found in the hub", rep1.Records, rep1.Stopped, rep2.Records, alreadyMirrored(rep2))
	exactlyOnce(t, e, topic, map[string]int64{topic: 20})
}

// TestDedupSendsNothingWithoutStoredFloors: when the commit that stores a
// drain's sequence numbers before it sends fails, the drain sends nothing:
// the group's last commit is a clean mark, so a drain after it would not
// read back what this one sent.
func TestDedupSendsNothingWithoutStoredFloors(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test5"
	gate := newCommitGate(e)
	opts := mirror.Options{Deduplicate: true, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test5$`)}}
	e.produceKeyed(topic, 4, 5, "a")
	if rep := e.drain(e.newMirror(opts), mirror.Limits{}); rep.Records != 20 {
		t.Fatalf("first drain: %v", rep.Lines())
	}
	e.produceKeyed(topic, 4, 5, "b")
	gate.closed.Store(true) // every commit fails, the first one too
	rep2 := e.drain(e.newMirror(opts), mirror.Limits{MaxDuration: 5 * time.Second})
	if rep2.Records != 0 || !rep2.Failed() {
		t.Fatalf("drain without stored sequence numbers sent %d records (failed: %v), want 0 and a failure: %v", rep2.Records, rep2.Failed(), rep2.Lines())
	}
	gate.open()
	rep3 := e.drain(e.newMirror(opts), mirror.Limits{})
	t.Logf("drain without stored floors: %s; next: %d sent", rep2.Lines()[1], rep3.Records)
	exactlyOnce(t, e, topic, map[string]int64{topic: 10})
}

// TestDedupConnectionLostBeforeTheAcknowledgement: the connection drops
// after Event Hubs stored a batch and before its acknowledgement arrived.
// With deduplication the batch is not sent again (neither by the SDK nor by
// the drain); the next drain reads it back and sends only what is missing.
func TestDedupConnectionLostBeforeTheAcknowledgement(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test4"
	e.produceKeyed(topic, 4, 20, "a")
	opts := mirror.Options{Deduplicate: true, Topics: mirror.TopicFilter{Include: regexp.MustCompile(`^prod\.test4$`)}}
	m := e.newMirror(opts)
	e.emu.Faults().DelayDispositions(time.Second)
	dropped := make(chan bool, 1)
	go func() {
		// Stored, its acknowledgement held back for a second: cut now.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if e.emu.Stats().EventsStored > 0 {
				dropped <- e.emu.Faults().DropConnections() > 0
				return
			}
		}
		dropped <- false
	}()
	rep1 := e.drain(m, mirror.Limits{MaxDuration: 20 * time.Second})
	e.emu.Faults().Reset()
	if !<-dropped {
		t.Fatalf("no connection was dropped with a batch stored and unacknowledged: %v", rep1.Lines())
	}
	rep2 := e.drain(m, mirror.Limits{})
	t.Logf("connection lost: %s; next: %d sent, %d found in the hub", rep1.Summary(), rep2.Records, alreadyMirrored(rep2))
	exactlyOnce(t, e, topic, map[string]int64{topic: 20})
}
