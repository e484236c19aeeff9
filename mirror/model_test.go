package mirror_test

// The model-based test of the position machine (issue 22): random
// sequences of operations over kfake and the emulator, with two processes
// sharing one consumer group, checked after every step against the
// engine's contract (docs/delivery-contract.md). Each invariant there
// names the check that enforces it (model_oracle_test.go).
//
// Budget: EHMIRROR_MODEL_CHECKS sequences (default 4) of up to
// EHMIRROR_MODEL_STEPS operations (default 18); `make soak` runs more. A
// failure prints rapid's seed and the shrunk sequence; rerun it with
// -rapid.seed=N.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// modelTopics are the mirrored topics with their initial partition counts.
// "m.c" has no hub until the createHub operation makes it.
var modelTopics = map[string]int{"m.a": 3, "m.b": 2, "m.c": 2}

// modelHubs are the hubs that exist from the start, with partition counts.
var modelHubs = map[string]int{"m.a": 4, "m.b": 2}

// modelRecord is one produced record as the oracle knows it; the value is
// unique across the whole run, so events of a recreated topic's earlier
// generation never stand for a record of the new one.
type modelRecord struct {
	offset int64
	value  string
}

// modelProc is one mirror process: its own Kafka source (a group member of
// its own), Event Hubs sink and service.
type modelProc struct {
	src  *kafka.Source
	sink *eventhubs.Sink
	svc  *mirror.Service
	m    *mirror.Mirror
}

// model is the state of one sequence: the peers, the processes and what
// the oracle knows.
type model struct {
	t     *testing.T
	e     *env
	gate  *commitGate
	admin *kafka.Source
	opts  mirror.Options
	procs [2]*modelProc
	hubC  bool // the hub of m.c exists
	// deployed: the group has committed an offset (its first deployment
	// is over).
	deployed bool
	addedA   bool // m.a grew a partition
	seq      int

	parts    map[string]int
	produced map[mirror.TopicPartition][]modelRecord
	// missingOK are records the contract lets be absent below a committed
	// offset: removed by retention before they were mirrored, or skipped by
	// an applied reset. copiesOK are extra copies a backward reset allows.
	missingOK map[mirror.TopicPartition]map[int64]bool
	copiesOK  map[mirror.TopicPartition]map[int64]int
	// committed is the last committed offset seen per partition; reset
	// marks partitions an applied reset may move anywhere.
	committed map[mirror.TopicPartition]int64
	reset     map[mirror.TopicPartition]bool
	paused    map[string]bool
	// resend are the copies of records an applied backward reset said
	// it sends again: each must be in Event Hubs that many times once
	// committed past (contract reset-resends).
	resend map[mirror.TopicPartition]map[int64]int
	// tickEnd is when the last scheduled invocation's window ended.
	tickEnd time.Time
	log     []string
}

func modelBudget(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestModelPositions is the model-based test: see the file comment.
func TestModelPositions(t *testing.T) {
	if testing.Short() {
		t.Skip("model-based test: not in -short runs")
	}
	for name, def := range map[string]int{"rapid.checks": modelBudget("EHMIRROR_MODEL_CHECKS", 4), "rapid.steps": modelBudget("EHMIRROR_MODEL_STEPS", 18)} {
		if f := flag.Lookup(name); f != nil && f.Value.String() == f.DefValue {
			_ = f.Value.Set(strconv.Itoa(def))
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		md := newModel(t, rt)
		defer md.close()
		rt.Repeat(map[string]func(*rapid.T){
			"produce":  md.produce,
			"drain":    md.drain,
			"follow":   md.follow,
			"catchUp":  md.catchUp,
			"both":     md.drainBoth,
			"kill":     md.kill,
			"unknown":  md.commitsUnanswered,
			"throttle": md.throttle,
			"ackLate":  md.ackLate,
			"cutConn":  md.cutConnections,
			"detach":   md.detachLinks,
			"truncate": md.truncate,
			"addPart":  md.addPartition,
			"hub":      md.createHub,
			"recreate": md.recreate,
			"reset":    md.resetOffsets,
			"pause":    md.operatorPause,
			"pauseRun": md.pauseWhileFollowing,
			"expire":   md.expire,
			// The deployed shape (model_deploy_test.go).
			"tick":         md.tick,
			"pauseResume":  md.pauseResumeTick,
			"opCatchUp":    md.operatorCatchUp,
			"hubSilent":    md.hubSilentAtStart,
			"recreateLate": md.recreateLate,
			"ackedReset":   md.ackedThenReset,
			"":             md.check,
		})
		md.settle(rt)
	})
}

func newModel(t *testing.T, rt *rapid.T) *model {
	opts := mirror.Options{
		Topics:       mirror.TopicFilter{Include: regexp.MustCompile(`^m\.[abc]$`)},
		Deduplicate:  rapid.Bool().Draw(rt, "deduplicate"),
		Partitioning: rapid.SampledFrom([]mirror.Partitioning{mirror.PartitionByHash, mirror.PartitionPreserve, mirror.PartitionRoundRobin}).Draw(rt, "partitioning"),
		GapPolicy:    rapid.SampledFrom([]mirror.GapPolicy{mirror.GapFail, mirror.GapResumeEarliest}).Draw(rt, "gap policy"),
		StartOffset:  rapid.SampledFrom([]mirror.StartOffset{mirror.StartEarliest, mirror.StartLatest}).Draw(rt, "start offset"),
	}
	md := &model{
		t: t, opts: opts,
		parts:     make(map[string]int),
		produced:  make(map[mirror.TopicPartition][]modelRecord),
		missingOK: make(map[mirror.TopicPartition]map[int64]bool),
		copiesOK:  make(map[mirror.TopicPartition]map[int64]int),
		committed: make(map[mirror.TopicPartition]int64),
		reset:     make(map[mirror.TopicPartition]bool),
		paused:    make(map[string]bool),
		resend:    make(map[mirror.TopicPartition]map[int64]int),
	}
	var seeds []kfake.Opt
	for name, n := range modelTopics {
		seeds = append(seeds, kfake.SeedTopics(int32(n), name))
		md.parts[name] = n
	}
	cluster, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, seeds...)...)
	if err != nil {
		t.Fatal(err)
	}
	var hubs []emulator.HubConfig
	for name, n := range modelHubs {
		hubs = append(hubs, emulator.HubConfig{Name: name, PartitionCount: n})
	}
	emu, err := emulator.Start(context.Background(), emulator.Config{Listen: "127.0.0.1:0", Hubs: hubs})
	if err != nil {
		cluster.Close()
		t.Fatal(err)
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	md.e = &env{t: t, cluster: cluster, emu: emu, client: client, group: fmt.Sprintf("model-%d", time.Now().UnixNano())}
	md.gate = newCommitGate(md.e)
	md.admin, err = kafka.NewSource(kafka.Options{Brokers: cluster.ListenAddrs(), Group: md.e.group, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range md.procs {
		md.procs[i] = md.newProc()
	}
	md.logf("model: %+v", opts)
	return md
}

func (md *model) newProc() *modelProc {
	src, err := kafka.NewSource(kafka.Options{Brokers: md.e.cluster.ListenAddrs(), Group: md.e.group, Logger: testLogger()})
	if err != nil {
		md.t.Fatal(err)
	}
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: md.e.emu.ConnectionString(), Logger: testLogger()})
	if err != nil {
		md.t.Fatal(err)
	}
	opts := md.opts
	opts.Control, opts.Logger, opts.CommitInterval = src, testLogger(), 100*time.Millisecond
	opts.CatchUpMaxDuration = 10 * time.Second
	m, err := mirror.New(src, sink, opts)
	if err != nil {
		md.t.Fatal(err)
	}
	return &modelProc{src: src, sink: sink, m: m, svc: mirror.NewService(m, mirror.Limits{MaxDuration: 8 * time.Second})}
}

func (p *modelProc) close() {
	p.svc.Close()
	_ = p.src.Close()
	_ = p.sink.Close(context.Background())
}

func (md *model) close() {
	for _, p := range md.procs {
		p.close()
	}
	_ = md.admin.Close()
	md.e.client.Close()
	_ = md.e.emu.Close()
	md.e.cluster.Close()
}

func (md *model) logf(format string, args ...any) {
	md.log = append(md.log, fmt.Sprintf(format, args...))
}

func (md *model) topic(rt *rapid.T) string {
	return rapid.SampledFrom([]string{"m.a", "m.b", "m.c"}).Draw(rt, "topic")
}

func (md *model) proc(rt *rapid.T) (int, *modelProc) {
	i := rapid.IntRange(0, 1).Draw(rt, "process")
	return i, md.procs[i]
}

// produce writes keyed and keyless records, with headers and tombstones.
func (md *model) produce(rt *rapid.T) {
	topic := md.topic(rt)
	n := rapid.IntRange(1, 40).Draw(rt, "records")
	recs := md.records(rt, topic, n)
	md.e.produceFresh(recs...)
	md.produced1(recs)
	md.logf("produce %d to %s", n, topic)
}

// produced1 records what was produced; a tombstone is known by the value
// its "tomb" header carries.
func (md *model) produced1(recs []*kgo.Record) {
	for _, r := range recs {
		v := string(r.Value)
		for _, h := range r.Headers {
			if h.Key == "tomb" {
				v = string(h.Value)
			}
		}
		tp := mirror.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		md.produced[tp] = append(md.produced[tp], modelRecord{offset: r.Offset, value: v})
		if md.opts.StartOffset == mirror.StartLatest && !md.deployed {
			// KAFKA_START_OFFSET=latest: what is there before the
			// group's first deployment is not mirrored.
			md.allowMissing(tp, r.Offset)
		}
	}
}

func (md *model) records(rt *rapid.T, topic string, n int) []*kgo.Record {
	keyed := rapid.Bool().Draw(rt, "keyed")
	var recs []*kgo.Record
	for i := range n {
		md.seq++
		r := &kgo.Record{Topic: topic, Partition: int32(md.seq % md.parts[topic]), Value: fmt.Appendf(nil, "v%d", md.seq)}
		if keyed {
			r.Key = fmt.Appendf(nil, "k%d", md.seq%7)
		}
		switch i % 5 {
		case 1:
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: nil}}
		case 3:
			if keyed {
				r.Value = nil // a tombstone: the oracle matches it by its key
				r.Headers = []kgo.RecordHeader{{Key: "tomb", Value: fmt.Appendf(nil, "v%d", md.seq)}}
			}
		}
		recs = append(recs, r)
	}
	return recs
}

// drain runs one timer drain of one process.
func (md *model) drain(rt *rapid.T) {
	i, p := md.proc(rt)
	rep, err := p.svc.Drain(context.Background(), "model")
	md.logf("drain p%d: %s", i, summary(rep, err))
	md.checkHealth(rt, p, rep)
}

// follow runs one following drain while records arrive.
func (md *model) follow(rt *rapid.T) {
	i, p := md.proc(rt)
	topic := md.topic(rt)
	recs := md.records(rt, topic, rapid.IntRange(1, 20).Draw(rt, "records"))
	done := make(chan struct{})
	var rep *mirror.Report
	var err error
	go func() {
		defer close(done)
		rep, err = p.svc.DrainFollowing(context.Background(), "model-follow", time.Now().Add(1500*time.Millisecond))
	}()
	time.Sleep(300 * time.Millisecond)
	md.e.produceFresh(recs...)
	md.produced1(recs)
	<-done
	md.logf("follow p%d while producing %d to %s: %s", i, len(recs), topic, summary(rep, err))
	md.checkHealth(rt, p, rep)
}

// catchUp runs one drain narrowed to one topic.
func (md *model) catchUp(rt *rapid.T) {
	i, p := md.proc(rt)
	topic := md.topic(rt)
	narrow := mirror.TopicFilter{Include: regexp.MustCompile("^" + regexp.QuoteMeta(topic) + "$")}
	rep, err := p.m.Drain(context.Background(), "model-catchup", mirror.Limits{MaxDuration: 8 * time.Second, Topics: &narrow})
	md.logf("catch-up p%d %s: %s", i, topic, summary(rep, err))
}

// drainBoth runs a drain of each process at the same time: they share the
// group and rebalance each other.
func (md *model) drainBoth(rt *rapid.T) {
	done := make(chan string, 2)
	for i, p := range md.procs {
		go func() {
			rep, err := p.m.Drain(context.Background(), "model-both", mirror.Limits{MaxDuration: 8 * time.Second})
			done <- fmt.Sprintf("p%d: %s", i, summary(rep, err))
		}()
	}
	md.logf("both: %s | %s", <-done, <-done)
}

// truncate removes records by retention.
func (md *model) truncate(rt *rapid.T) {
	topic := md.topic(rt)
	part := int32(rapid.IntRange(0, md.parts[topic]-1).Draw(rt, "partition"))
	tp := mirror.TopicPartition{Topic: topic, Partition: part}
	recs := md.produced[tp]
	if len(recs) == 0 {
		return
	}
	cut := recs[rapid.IntRange(0, len(recs)-1).Draw(rt, "cut at")].offset
	if err := md.e.cluster.DeleteRecords(topic, part, cut); err != nil {
		md.logf("truncate %s below %d: %v", tp, cut, err) // below the log start already
		return
	}
	committed := md.committedNow()[tp]
	for _, r := range recs {
		if r.offset < cut && r.offset >= committed {
			md.allowMissing(tp, r.offset)
		}
		if r.offset < cut {
			delete(md.resend[tp], r.offset) // gone before it was sent again
		}
	}
	md.logf("truncate %s below %d (committed %d)", tp, cut, committed)
}

// addPartition grows m.a by one partition (once).
func (md *model) addPartition(rt *rapid.T) {
	if md.addedA {
		return
	}
	md.addedA = true
	md.e.addPartitions("m.a", 4)
	md.parts["m.a"] = 4
	md.logf("m.a grows to 4 partitions")
}

// createHub creates the hub of m.c (once).
func (md *model) createHub(rt *rapid.T) {
	if md.hubC {
		return
	}
	md.hubC = true
	if err := md.e.emu.AddHub(emulator.HubConfig{Name: "m.c", PartitionCount: 2}); err != nil {
		md.t.Fatal(err)
	}
	md.logf("hub m.c created")
}

// recreate deletes m.b and creates it again: a new log under the same name.
func (md *model) recreate(rt *rapid.T) {
	if err := md.e.cluster.DeleteTopic("m.b"); err != nil {
		md.t.Fatal(err)
	}
	if err := md.e.cluster.CreateTopic("m.b", int32(md.parts["m.b"]), nil); err != nil {
		md.t.Fatal(err)
	}
	// Kafka deletes the group's offsets of a deleted topic's partitions.
	for p := range md.parts["m.b"] {
		tp := mirror.TopicPartition{Topic: "m.b", Partition: int32(p)}
		delete(md.produced, tp)
		delete(md.missingOK, tp)
		delete(md.copiesOK, tp)
		delete(md.resend, tp)
		md.reset[tp] = true
	}
	md.logf("m.b deleted and created again")
}

// pauseWhileFollowing pauses or resumes a topic, from either process, while
// a following drain runs and records of the topic arrive before and after:
// the drain stops reading a topic paused at its next pause check (within
// 2 s), still sends and commits what it read, and hands its partitions
// back; a topic resumed meanwhile waits for the next drain.
func (md *model) pauseWhileFollowing(rt *rapid.T) {
	i, p := md.proc(rt)
	topic := md.topic(rt)
	before := md.records(rt, topic, rapid.IntRange(1, 20).Draw(rt, "records before"))
	after := md.records(rt, topic, rapid.IntRange(1, 20).Draw(rt, "records after"))
	at := time.Duration(rapid.IntRange(0, 1000).Draw(rt, "pause after ms")) * time.Millisecond
	j, by := md.proc(rt)
	paused := !md.paused[topic]
	start := time.Now()
	done := make(chan struct{})
	var rep *mirror.Report
	var err error
	go func() {
		defer close(done)
		rep, err = p.svc.DrainFollowing(context.Background(), "model-pause-running", start.Add(3500*time.Millisecond))
	}()
	time.Sleep(300 * time.Millisecond)
	md.e.produceFresh(before...)
	md.produced1(before)
	time.Sleep(at)
	if _, perr := by.m.SetPaused(context.Background(), topic, paused, "model", "model"); perr != nil {
		rt.Fatalf("pause %s=%v during a drain: %v", topic, paused, perr)
	}
	md.paused[topic] = paused
	time.Sleep(time.Until(start.Add(2600 * time.Millisecond))) // past the drain's next pause check
	md.e.produceFresh(after...)
	md.produced1(after)
	<-done
	md.logf("follow p%d, %d + %d records to %s, p%d sets paused=%v after %v: %s", i, len(before), len(after), topic, j, paused, at, summary(rep, err))
	md.checkHealth(rt, p, rep)
}

// expire does what Kafka's offset expiry does to topics a group with
// members no longer subscribes to (KIP-496).
func (md *model) expire(rt *rapid.T) {
	expired := md.e.expireUnsubscribed([]string{"m.a", "m.b", "m.c"})
	md.logf("offset expiry: %v", expired)
}
