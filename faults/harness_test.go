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
	// KafkaDelay is added before every Fetch, Topics, Watermarks and
	// Committed call of the mirrors' Kafka source (a far broker, seen from
	// the client: kfake's SleepControl races when two slept requests share
	// a connection).
	KafkaDelay time.Duration
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
	var source mirror.Source = src
	if e.cfg.KafkaDelay > 0 {
		source = &farSource{Source: src, delay: e.cfg.KafkaDelay}
	}
	m, err := mirror.New(source, sink, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
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
