package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// Environment variables of the package.
const (
	// soakEnv enables the long soak (TestSoak*).
	soakEnv = "EHMIRROR_SOAK"
	// logEnv sends every component's logs to stderr (debugging).
	logEnv = "EHMIRROR_FAULTS_LOG"
)

// defaultTopics are the topics of a scenario; each has a hub of its name.
// They match the handler's default KAFKA_TOPICS_INCLUDE (prod\..*).
var defaultTopics = []string{"prod.f1", "prod.f2", "prod.f3"}

// envConfig describes the Kafka cluster and Event Hubs namespace of one
// scenario.
type envConfig struct {
	// Topics are created with Partitions partitions each; every topic has a
	// hub of the same name with HubPartitions partitions unless listed in
	// NoHub.
	Topics        []string
	Partitions    int32
	HubPartitions int
	NoHub         []string
	// HubMaxMessageSize, when positive, is the largest delivery the topics'
	// hubs accept (the emulator's default is 1 MiB).
	HubMaxMessageSize int64
	// ExtraHubs are created besides the topics' hubs.
	ExtraHubs []emulator.HubConfig
	// Restartable runs kfake on a fixed port with a data directory, so that
	// restartKafka brings it back with its log and committed offsets.
	Restartable bool
	// KafkaOpts are added to kfake's options (SASL, TLS, ...).
	KafkaOpts []kfake.Opt
	// ProducerOpts are added to the test producer's and reader's options
	// (SASL, TLS matching KafkaOpts).
	ProducerOpts []kgo.Opt
	// EmulatorKey is the emulator's shared access key (default: the
	// emulator's default).
	EmulatorKey string
	// Quota is the namespace's ingress quota (default: none).
	Quota emulator.Quota
}

// env is one scenario's world: a real Kafka (kfake), a real Event Hubs
// emulator, the committed-offset monitor and the duplicate-bound ledger.
// Nothing is mocked.
type env struct {
	t     testing.TB
	cfg   envConfig
	log   *slog.Logger
	group string
	start time.Time

	mu       sync.RWMutex // guards cluster and down
	cluster  *kfake.Cluster
	down     bool
	kopts    []kfake.Opt
	restarts int

	emu  *emulator.Server
	hubs map[string]int // hub -> partition count

	injected atomic.Int64 // fault injections so far
	drains   atomic.Int64
	mon      *offsetMonitor
	ledger   *boundLedger

	reportsMu sync.Mutex
	reports   []*mirror.Report // every in-process drain's report, settling included
}

// drainReports returns the reports of every in-process drain so far.
func (e *env) drainReports() []*mirror.Report {
	e.reportsMu.Lock()
	defer e.reportsMu.Unlock()
	return slices.Clone(e.reports)
}

// addHub creates an event hub while the scenario runs (the operator creates
// a missing hub); verify reads it too.
func (e *env) addHub(h emulator.HubConfig) error {
	if err := e.emu.AddHub(h); err != nil {
		return fmt.Errorf("creating event hub %s: %w", h.Name, err)
	}
	e.hubs[h.Name] = h.PartitionCount
	return nil
}

// newEnv starts kfake and the emulator for cfg and the offset monitor.
func newEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	if len(cfg.Topics) == 0 {
		cfg.Topics = defaultTopics
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 4
	}
	if cfg.HubPartitions == 0 {
		cfg.HubPartitions = 4
	}
	e := &env{
		t:      t,
		cfg:    cfg,
		log:    testLogger(t),
		group:  "mirror-" + strings.ReplaceAll(t.Name(), "/", "-"),
		start:  time.Now(),
		hubs:   map[string]int{},
		ledger: &boundLedger{},
	}
	e.kopts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(cfg.Partitions, cfg.Topics...)}, cfg.KafkaOpts...)
	if cfg.Restartable {
		port := freePort(t)
		// A restarted broker restores the group's members; a short minimum
		// session timeout lets the mirror's rejoin complete quickly.
		e.kopts = append(e.kopts, kfake.Ports(port), kfake.DataDir(t.TempDir()), kfake.GroupMinSessionTimeout(time.Second))
	}
	cluster, err := kfake.NewCluster(e.kopts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	e.cluster = cluster
	t.Cleanup(e.closeKafka)

	var hubs []emulator.HubConfig
	for _, topic := range cfg.Topics {
		if slices.Contains(cfg.NoHub, topic) {
			continue
		}
		hubs = append(hubs, emulator.HubConfig{Name: topic, PartitionCount: cfg.HubPartitions, MaxMessageSize: cfg.HubMaxMessageSize})
	}
	hubs = append(hubs, cfg.ExtraHubs...)
	for _, h := range hubs {
		e.hubs[h.Name] = h.PartitionCount
	}
	emu, err := emulator.Start(context.Background(), emulator.Config{Listen: "127.0.0.1:0", Hubs: hubs, Key: cfg.EmulatorKey, Logger: componentLogger("emulator"), Quota: cfg.Quota})
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	e.emu = emu
	t.Cleanup(func() { _ = emu.Close() })

	e.mon = newOffsetMonitor(e)
	t.Cleanup(e.mon.stop)
	return e
}

// testLogger logs to stderr when EHMIRROR_FAULTS_LOG is set.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv(logEnv) == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

// componentLogger is testLogger for components built without a test.
func componentLogger(name string) *slog.Logger {
	if os.Getenv(logEnv) == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", name)
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// brokers returns the Kafka bootstrap addresses (stable across restarts).
func (e *env) brokers() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cluster.ListenAddrs()
}

// withKafka runs fn with the cluster when it is up; it reports false when
// the broker is down (kfake blocks admin calls on a closed cluster).
func (e *env) withKafka(fn func(c *kfake.Cluster)) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.down {
		return false
	}
	fn(e.cluster)
	return true
}

func (e *env) closeKafka() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.down {
		e.cluster.Close()
		e.down = true
	}
}

// restartKafka closes the broker, keeps it down for downtime, and starts it
// again on the same port with the same data directory.
func (e *env) restartKafka(downtime time.Duration) error {
	if !e.cfg.Restartable {
		return errors.New("environment is not restartable")
	}
	e.mu.Lock()
	e.cluster.Close()
	e.down = true
	e.mu.Unlock()
	time.Sleep(downtime)
	c, err := kfake.NewCluster(e.kopts...)
	if err != nil {
		return fmt.Errorf("restarting kfake: %w", err)
	}
	e.mu.Lock()
	e.cluster, e.down = c, false
	e.restarts++
	e.mu.Unlock()
	return nil
}

// eventHubsConnection is the emulator's connection string.
func (e *env) eventHubsConnection() string { return e.emu.ConnectionString() }

// sourceOptions are the Kafka adapter's options for this environment.
func (e *env) sourceOptions() kafka.Options {
	o := kafka.Options{Brokers: e.brokers(), Group: e.group, Logger: componentLogger("kafka")}
	if e.cfg.Restartable {
		o.SessionTimeout, o.HeartbeatInterval = 2*time.Second, 300*time.Millisecond
	}
	return o
}

// newMirror returns a mirror with its own Kafka source (its own group
// member) and Event Hubs sink: the real adapters, as the handler builds them.
func (e *env) newMirror(opts mirror.Options) *mirror.Mirror {
	e.t.Helper()
	src, err := kafka.NewSource(e.sourceOptions())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = src.Close() })
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: e.eventHubsConnection(), Logger: componentLogger("eventhubs")})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sink.Close(ctx)
	})
	if opts.Logger == nil {
		opts.Logger = componentLogger("mirror")
	}
	if opts.CommitInterval == 0 {
		opts.CommitInterval = 200 * time.Millisecond
	}
	m, err := mirror.New(src, sink, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// inject counts one fault injection; drains overlapping it count against
// the duplicate bound.
func (e *env) inject(what string) {
	e.injected.Add(1)
	e.log.Info("fault injected", "fault", what)
}

// accounted runs one drain-like unit of work (a drain, an invocation) and,
// when it was faulted (by its own account, or because a fault was injected
// while it ran), adds the records in flight during it to the duplicate
// bound.
func (e *env) accounted(work func() (faulted bool, err error)) error {
	e.drains.Add(1)
	before := e.ledger.open(e)
	injected := e.injected.Load()
	faulted, err := work()
	if e.injected.Load() != injected {
		faulted = true
	}
	e.ledger.close(e, before, faulted)
	return err
}

// runDrain runs one drain of m, accounted in the duplicate ledger. A drain
// counts as faulted when it could not start, reported a failure, or ended
// by a rebalance or cancellation.
func (e *env) runDrain(ctx context.Context, m *mirror.Mirror, run string, lim mirror.Limits) (*mirror.Report, error) {
	var rep *mirror.Report
	err := e.accounted(func() (bool, error) {
		var err error
		rep, err = m.Drain(ctx, run, lim)
		if rep != nil {
			e.reportsMu.Lock()
			e.reports = append(e.reports, rep)
			e.reportsMu.Unlock()
		}
		if err != nil {
			return true, err
		}
		e.log.Info("drain", "run", run, "summary", rep.Summary())
		for _, l := range rep.Lines()[1:] {
			e.log.Debug(l)
		}
		return rep.Failed() || rep.Stopped == mirror.StopRebalanced || rep.Stopped == mirror.StopCanceled, nil
	})
	return rep, err
}

// settle clears every fault, then drains with m until the group has no lag
// or the deadline passes. It returns the last report.
func (e *env) settle(ctx context.Context, m *mirror.Mirror, lim mirror.Limits) *mirror.Report {
	e.t.Helper()
	e.emu.Faults().Reset()
	deadline := time.Now().Add(90 * time.Second)
	var last *mirror.Report
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if lim.MaxDuration == 0 {
			lim.MaxDuration = 20 * time.Second
		}
		rep, err := e.runDrain(ctx, m, "settle", lim)
		if err != nil {
			e.log.Warn("settling drain could not start", "err", err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		last = rep
		if rep.Stopped == mirror.StopRebalanced {
			// The settling mirror is the group's only member: say who
			// else was there.
			e.t.Logf("settling drain ended by a rebalance after %s: %s", rep.Duration.Round(time.Millisecond), rep.Summary())
			e.diagnoseGroup()
		}
		lag, err := m.Lag(ctx, nil)
		if err == nil && lag.Total == 0 && !rep.Failed() {
			return rep
		}
		if rep.Records == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if last != nil {
		e.t.Errorf("mirror did not catch up: %s\n%s", last.Summary(), strings.Join(last.Lines(), "\n"))
	} else {
		e.t.Errorf("mirror did not catch up: no drain could start")
	}
	e.diagnose()
	return last
}

// diagnose logs the group's state at the broker (members, assignments) and
// every partition's log bounds and committed offset, for a failing check.
func (e *env) diagnose() {
	e.t.Helper()
	e.diagnoseGroup()
	snap, _ := e.offsets()
	tps := make([]mirror.TopicPartition, 0, len(snap))
	for tp := range snap {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b mirror.TopicPartition) int { return strings.Compare(a.String(), b.String()) })
	for _, tp := range tps {
		o := snap[tp]
		e.t.Logf("diagnosis:   %s log %d..%d committed %d", tp, o.start, o.end, o.committed)
	}
}

// diagnoseGroup logs the group's state, members and assignments at the
// broker.
func (e *env) diagnoseGroup() {
	e.t.Helper()
	e.withKafka(func(c *kfake.Cluster) {
		gi := c.GroupInfo(e.group)
		if gi == nil {
			e.t.Logf("diagnosis: group %s does not exist", e.group)
			return
		}
		e.t.Logf("diagnosis: group %s state %s generation %d, %d members", gi.Group, gi.State, gi.Epoch, len(gi.Members))
		for _, m := range gi.Members {
			e.t.Logf("diagnosis:   member %s client %s host %s: %v", m.MemberID, m.ClientID, m.ClientHost, m.Assignment)
		}
	})
}

// partitionOffsets are one partition's log bounds and the group's commit.
type partitionOffsets struct {
	start, end int64
	committed  int64 // mirror.NoOffset when none
}

// offsets reads, at the broker, every scenario partition's log bounds and
// the group's committed offsets; ok is false when the broker is down.
func (e *env) offsets() (map[mirror.TopicPartition]partitionOffsets, bool) {
	out := map[mirror.TopicPartition]partitionOffsets{}
	ok := e.withKafka(func(c *kfake.Cluster) {
		var commits map[string]map[int32]kfake.GroupCommit
		if gi := c.GroupInfo(e.group); gi != nil {
			commits = gi.Commits
		}
		for _, topic := range e.cfg.Topics {
			for _, pi := range c.PartitionInfos(topic) {
				po := partitionOffsets{start: pi.LogStartOffset, end: pi.HighWatermark, committed: mirror.NoOffset}
				if gc, ok := commits[topic][pi.Partition]; ok {
					po.committed = gc.Offset
				}
				out[mirror.TopicPartition{Topic: topic, Partition: pi.Partition}] = po
			}
		}
	})
	return out, ok
}

// boundLedger accumulates the duplicate bound: for every faulted drain, the
// records that were in flight during it, i.e. for each partition the records
// between the group's committed offset when the drain started (or the log
// start) and the log end when it finished. Only those records can have been
// handed to Event Hubs without their offset being committed, so only they
// can be sent again, once per faulted drain.
type boundLedger struct {
	mu      sync.Mutex
	total   int64
	faulted int
	last    map[mirror.TopicPartition]partitionOffsets // last snapshot taken while the broker was up
	pending []map[mirror.TopicPartition]partitionOffsets
}

// open snapshots the offsets before a drain (the last good snapshot when the
// broker is down, which is older and so conservative).
func (l *boundLedger) open(e *env) map[mirror.TopicPartition]partitionOffsets {
	snap, ok := e.offsets()
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.last = snap
		return snap
	}
	return l.last
}

// close adds the drain's in-flight records when it was faulted. When the
// broker is down the end offsets are taken at the next snapshot that
// succeeds (later, so conservative).
func (l *boundLedger) close(e *env, before map[mirror.TopicPartition]partitionOffsets, faulted bool) {
	after, ok := e.offsets()
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.last = after
		for _, p := range l.pending {
			l.total += inFlight(p, after)
		}
		l.pending = nil
	}
	if !faulted || before == nil {
		return
	}
	l.faulted++
	if !ok {
		l.pending = append(l.pending, before)
		return
	}
	l.total += inFlight(before, after)
}

// addWindow adds the records in flight between two snapshots (a fault that
// spans several drains, or a kill).
func (l *boundLedger) addWindow(before, after map[mirror.TopicPartition]partitionOffsets) {
	l.addWindows(before, after, 1)
}

// addWindows adds the records in flight between two snapshots once for
// each of n faulted drains that ran between them (a catch-up run's drains).
func (l *boundLedger) addWindows(before, after map[mirror.TopicPartition]partitionOffsets, n int) {
	if n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faulted += n
	l.total += int64(n) * inFlight(before, after)
}

func inFlight(before, after map[mirror.TopicPartition]partitionOffsets) int64 {
	var n int64
	for tp, a := range after {
		b, ok := before[tp]
		from := a.start
		if ok {
			from = max(b.committed, b.start)
		}
		n += max(a.end-from, 0)
	}
	return n
}

func (l *boundLedger) bound() (int64, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.faulted
}

// offsetMonitor samples the group's committed offsets while a scenario runs
// and records every one seen to move backwards. It has two independent
// sources, each checked on its own sample sequence: the broker's group state
// (kfake GroupInfo, every 5 ms) and OffsetFetch requests sent by a separate
// franz-go client (every 20 ms). A partition with no commit reads as -1
// from OffsetFetch; -1 after a commit counts as a regression.
type offsetMonitor struct {
	e      *env
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	last map[string]map[mirror.TopicPartition]int64 // source -> highest seen
	// paused topics are being deleted and recreated; epoch changes with
	// every pause and resume, and a sample started in another epoch is
	// dropped (it may predate the deletion).
	paused      map[string]bool
	epoch       int
	samples     int64
	regressions []string
}

func newOffsetMonitor(e *env) *offsetMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &offsetMonitor{e: e, cancel: cancel, last: map[string]map[mirror.TopicPartition]int64{}, paused: map[string]bool{}}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.run(ctx, "broker", 5*time.Millisecond, m.sampleBroker)
	}()
	go func() {
		defer m.wg.Done()
		m.run(ctx, "offsetfetch", 20*time.Millisecond, m.sampleOffsetFetch(ctx))
	}()
	return m
}

func (m *offsetMonitor) run(ctx context.Context, source string, every time.Duration, sample func(context.Context) (map[mirror.TopicPartition]int64, bool)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		epoch := m.currentEpoch()
		if got, ok := sample(ctx); ok {
			m.observe(source, epoch, got)
		}
	}
}

func (m *offsetMonitor) sampleBroker(context.Context) (map[mirror.TopicPartition]int64, bool) {
	out := map[mirror.TopicPartition]int64{}
	ok := m.e.withKafka(func(c *kfake.Cluster) {
		gi := c.GroupInfo(m.e.group)
		if gi == nil {
			return
		}
		for topic, ps := range gi.Commits {
			for p, gc := range ps {
				out[mirror.TopicPartition{Topic: topic, Partition: p}] = gc.Offset
			}
		}
	})
	return out, ok
}

// sampleOffsetFetch returns a sampler sending OffsetFetch for every
// scenario partition through its own client.
func (m *offsetMonitor) sampleOffsetFetch(ctx context.Context) func(context.Context) (map[mirror.TopicPartition]int64, bool) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(m.e.brokers()...), kgo.RequestRetries(0), kgo.WithLogger(nil)}, m.e.cfg.ProducerOpts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		m.e.t.Errorf("offset monitor client: %v", err)
		return func(context.Context) (map[mirror.TopicPartition]int64, bool) { return nil, false }
	}
	context.AfterFunc(ctx, client.Close)
	return func(ctx context.Context) (map[mirror.TopicPartition]int64, bool) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = m.e.group
		for _, topic := range m.e.cfg.Topics {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic = topic
			for p := range m.e.cfg.Partitions {
				rt.Partitions = append(rt.Partitions, p)
			}
			req.Topics = append(req.Topics, rt)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := req.RequestWith(rctx, client)
		if err != nil || resp.ErrorCode != 0 {
			return nil, false
		}
		out := map[mirror.TopicPartition]int64{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					continue
				}
				out[mirror.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
			}
		}
		return out, true
	}
}

func (m *offsetMonitor) currentEpoch() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

func (m *offsetMonitor) observe(source string, epoch int, got map[mirror.TopicPartition]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != m.epoch {
		return
	}
	m.samples++
	last := m.last[source]
	if last == nil {
		last = map[mirror.TopicPartition]int64{}
		m.last[source] = last
	}
	for tp, off := range got {
		if m.paused[tp.Topic] {
			continue
		}
		prev, seen := last[tp]
		if seen && off < prev {
			if len(m.regressions) < 1000 {
				m.regressions = append(m.regressions, fmt.Sprintf("%s: %s committed %d after %d", source, tp, off, prev))
			}
			continue
		}
		last[tp] = off
	}
}

// pause stops checking topic (before it is deleted); resume starts it
// afresh (after it was recreated: its offsets restart).
func (m *offsetMonitor) pause(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused[topic] = true
	m.epoch++
}

func (m *offsetMonitor) resume(topic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	delete(m.paused, topic)
	for _, last := range m.last {
		for tp := range last {
			if tp.Topic == topic {
				delete(last, tp)
			}
		}
	}
}

func (m *offsetMonitor) stop() {
	m.cancel()
	m.wg.Wait()
}

// result returns the samples taken and the regressions seen.
func (m *offsetMonitor) result() (int64, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples, slices.Clone(m.regressions)
}
