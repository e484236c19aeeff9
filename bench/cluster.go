package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// ClusterLayout is one of issue 48's cluster-sized cases: many partitions
// or many topics, mirrored by the real handler under funchost.
type ClusterLayout struct {
	// Name is the case's row ("1x1000", "200-topics/routed", ...).
	Name string `json:"name"`
	// Topics each have Partitions partitions.
	Topics     []string `json:"-"`
	Partitions int      `json:"partitions_per_topic"`
	// Hubs each have HubPartitions partitions; Routes is MIRROR_ROUTES
	// (empty: each topic into the hub of its name).
	Hubs          []string `json:"-"`
	HubPartitions int      `json:"hub_partitions"`
	Routes        string   `json:"routes,omitempty"`
}

// numbered is n names prefix000, prefix001, ...
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// ClusterLayouts are the layouts of the case named name: "1x1000" (one
// topic of 1,000 partitions) or "200-topics" (200 topics of 5 partitions
// routed into 20 hubs, then 100 topics one-to-one into 100 hubs).
func ClusterLayouts(name string) ([]ClusterLayout, bool) {
	switch name {
	case "1x1000":
		return []ClusterLayout{{Name: "1x1000", Topics: []string{"prod.wide"}, Partitions: 1000, Hubs: []string{"prod.wide"}, HubPartitions: 32}}, true
	case "200-topics":
		return []ClusterLayout{
			{Name: "200-topics/routed-into-20", Topics: numbered("prod.t", 200), Partitions: 5, Hubs: numbered("h", 20), HubPartitions: 4, Routes: `^prod\.t(\d\d)\d$=>h0$1`},
			{Name: "200-topics/100-one-to-one", Topics: numbered("prod.t", 100), Partitions: 5, Hubs: numbered("prod.t", 100), HubPartitions: 4},
		}, true
	}
	return nil, false
}

// ClusterConfig configures the cluster-sized cases.
type ClusterConfig struct {
	// Layouts are the cases to run.
	Layouts []ClusterLayout
	// PerPartition is the backlog of each partition, in 1 KiB keyed
	// records. Default 300 (300,000 records over 1,000 partitions).
	PerPartition int64
	// Idle is how long the handler follows with nothing to read after the
	// catch-up while its Kafka requests and connections are counted.
	// Default 60 s.
	Idle time.Duration
}

// ClusterResult is one cluster-sized case's run.
type ClusterResult struct {
	Layout ClusterLayout `json:"layout"`
	// Records and Bytes are the backlog (values).
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// CatchUpSeconds is from the first invocation until the group
	// committed the end of every partition; FirstSentSeconds until the
	// emulator stored the first event.
	CatchUpSeconds   float64 `json:"catch_up_seconds"`
	FirstSentSeconds float64 `json:"first_sent_seconds"`
	// PeakRSS is the handler's VmHWM after the catch-up; IdleRSS its RSS
	// after the idle follow.
	PeakRSS int64 `json:"peak_rss_bytes"`
	IdleRSS int64 `json:"idle_rss_bytes"`
	// InFlightBytes is the bound the handler ran with.
	InFlightBytes int64 `json:"inflight_bytes"`
	// Brokers is kfake's broker count. KafkaConnsCatchUp and KafkaConnsIdle
	// are the most client connections open at the brokers' proxies during
	// the catch-up and the idle follow; IdleRequestsPerSec the Kafka
	// requests a second during the idle follow.
	Brokers           int   `json:"brokers"`
	KafkaConnsCatchUp int64 `json:"kafka_connections_catch_up"`
	KafkaConnsIdle    int64 `json:"kafka_connections_idle"`
	// KafkaConnsIdleEnd are the connections open when the idle follow
	// ended: fewer than KafkaConnsIdle when the most were an overlap (a
	// drain handed over at a tick), as many when connections stay open.
	KafkaConnsIdleEnd  int64   `json:"kafka_connections_idle_end"`
	IdleRequestsPerSec float64 `json:"kafka_requests_per_s_idle"`
	IdleSeconds        float64 `json:"idle_seconds"`
	// EventHubsConns is the most AMQP connections the emulator had open.
	EventHubsConns int64 `json:"eventhubs_connections"`
	// Invocations are the timer invocations fired (follow mode on: each
	// follows until just before the next minute).
	Invocations int `json:"invocations"`
	// LoadAvg is the machine's load average at the start and the end.
	LoadAvg [2]string `json:"loadavg_start_end"`
}

// MBPerSecond is the catch-up's throughput in value megabytes.
func (r ClusterResult) MBPerSecond() float64 { return ratio(float64(r.Bytes)/1e6, r.CatchUpSeconds) }

// Targets of issue 48 for the cluster-sized cases.
const (
	// TargetClusterRSSFactor and TargetClusterRSSOverhead: peak RSS ≤
	// factor × MIRROR_INFLIGHT_BYTES + overhead.
	TargetClusterRSSFactor   = 2
	TargetClusterRSSOverhead = 200e6
	// TargetClusterVs20: MB/s ≥ this × the 20-partition 1 KiB keyed case.
	TargetClusterVs20 = 0.8
	// TargetIdleRequestsPerBroker and TargetIdleConnsPerBroker bound the
	// idle follow.
	TargetIdleRequestsPerBroker = 10.0
	TargetIdleConnsPerBroker    = 3
	// TargetFirstSent: first record sent after the invocation.
	TargetFirstSent = 5 * time.Second
)

// runCluster runs every layout of cc on a fresh Kafka and emulator.
func runCluster(ctx context.Context, cfg Config, cc ClusterConfig) ([]ClusterResult, error) {
	if cc.PerPartition <= 0 {
		cc.PerPartition = 300
	}
	if cc.Idle <= 0 {
		cc.Idle = 60 * time.Second
	}
	appDir, err := buildApp(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: cluster cases: %w", err)
	}
	var out []ClusterResult
	for _, l := range cc.Layouts {
		cfg.Logger.Info("case " + l.Name)
		r, err := clusterRun(ctx, cfg, appDir, l, cc)
		if err != nil {
			return out, fmt.Errorf("bench: case %s: %w", l.Name, err)
		}
		cfg.Logger.Info("cluster case", "case", l.Name, "mb_per_s", round2(r.MBPerSecond()), "catch_up_s", round2(r.CatchUpSeconds), "first_sent_s", round2(r.FirstSentSeconds),
			"peak_rss_mb", mb(r.PeakRSS), "kafka_conns_catch_up", r.KafkaConnsCatchUp, "kafka_conns_idle", r.KafkaConnsIdle, "kafka_req_per_s_idle", round2(r.IdleRequestsPerSec),
			"eventhubs_conns", r.EventHubsConns, "loadavg", r.LoadAvg)
		out = append(out, r)
	}
	return out, nil
}

// clusterInfra starts kfake with l's topics, a counting proxy in front of
// its broker, the emulator with l's hubs, and loads the backlog.
func clusterInfra(ctx context.Context, l ClusterLayout, perPartition int64) (*kfake.Cluster, []*Proxy, *emulator.Server, error) {
	var proxies []*Proxy
	closeProxies := func() {
		for _, p := range proxies {
			_ = p.Close()
		}
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(l.Partitions), l.Topics...),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(kfakeSegmentBytes)}), kfake.ListenFn(proxiedListen(&proxies)))
	if err != nil {
		closeProxies()
		return nil, nil, nil, fmt.Errorf("starting kfake: %w", err)
	}
	for _, p := range proxies {
		p.CountKafkaRequests()
	}
	hubs := make([]emulator.HubConfig, len(l.Hubs))
	for i, h := range l.Hubs {
		hubs[i] = emulator.HubConfig{Name: h, PartitionCount: l.HubPartitions, MaxPartitionBytes: emulatorPartitionBytes}
	}
	emu, err := emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Hubs: hubs})
	if err != nil {
		cluster.Close()
		closeProxies()
		return nil, nil, nil, fmt.Errorf("starting the emulator: %w", err)
	}
	fail := func(err error) (*kfake.Cluster, []*Proxy, *emulator.Server, error) {
		_ = emu.Close()
		cluster.Close()
		closeProxies()
		return nil, nil, nil, err
	}
	// The loader goes through the proxy too (the broker advertises it); it
	// is closed before the handler starts.
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(200_000),
		kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	if err != nil {
		return fail(fmt.Errorf("starting the kgo producer: %w", err))
	}
	defer producer.Close()
	value := make([]byte, 1<<10)
	_, _ = rand.Read(value)
	var failed atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	for off := range perPartition {
		for _, t := range l.Topics {
			for p := range l.Partitions {
				key := []byte(fmt.Sprintf("k%d-%d", p, off))
				producer.Produce(ctx, &kgo.Record{Topic: t, Partition: int32(p), Key: key, Value: value}, done)
			}
		}
	}
	if err := producer.Flush(ctx); err != nil {
		return fail(fmt.Errorf("flushing the loader: %w", err))
	}
	if errp := failed.Load(); errp != nil {
		return fail(fmt.Errorf("loading records: %w", *errp))
	}
	return cluster, proxies, emu, nil
}

// clusterRun mirrors one layout's backlog with one handler in follow mode,
// then lets it follow an idle cluster for cc.Idle.
func clusterRun(ctx context.Context, cfg Config, appDir string, l ClusterLayout, cc ClusterConfig) (ClusterResult, error) {
	total := cc.PerPartition * int64(l.Partitions) * int64(len(l.Topics))
	res := ClusterResult{Layout: l, Records: total, Bytes: total << 10, LoadAvg: [2]string{DescribeMachine(time.Now()).LoadAvg}}
	cluster, proxies, emu, err := clusterInfra(ctx, l, cc.PerPartition)
	if err != nil {
		return res, err
	}
	defer func() {
		_ = emu.Close()
		cluster.Close()
		for _, p := range proxies {
			_ = p.Close()
		}
	}()
	res.Brokers = len(proxies)
	eng, err := mirror.New(nil, nil, engineOptions(nil))
	if err != nil {
		return res, err
	}
	res.InFlightBytes = eng.Options().InFlightBytes

	group := "bench-" + l.Name
	settings := handlerSettings(cluster.ListenAddrs(), emu.ConnectionString())
	settings[config.KafkaGroup] = group
	settings[FollowSetting] = "true"
	settings[functions.MirrorScheduleSetting] = functions.DefaultMirrorSchedule // fired by hand here
	if l.Routes != "" {
		settings[config.MirrorRoutes] = l.Routes
	}
	logf, err := os.Create(filepath.Join(cfg.OutDir, "cluster-"+filepath.Base(l.Name)+".log"))
	if err != nil {
		return res, fmt.Errorf("handler log: %w", err)
	}
	defer logf.Close()
	h, err := startHost(ctx, appDir, funchost.Options{Settings: settings, Stdout: logf, Stderr: logf, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return res, err
	}
	defer interruptHost(ctx, h)
	watcher, err := kafka.NewSource(kafka.Options{Brokers: cluster.ListenAddrs(), Group: group, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return res, fmt.Errorf("kafka source: %w", err)
	}
	watcherOpen := true
	closeWatcher := func() {
		if watcherOpen {
			_ = watcher.Close()
			watcherOpen = false
		}
	}
	defer closeWatcher()
	var tps []mirror.TopicPartition
	for _, t := range l.Topics {
		for p := range l.Partitions {
			tps = append(tps, mirror.TopicPartition{Topic: t, Partition: int32(p)})
		}
	}
	kafkaConns := func() int64 {
		var n int64
		for _, p := range proxies {
			n += p.Stats().Open
		}
		return n
	}
	// The watcher's own connection counts at the proxies too.
	if _, err := watcher.Committed(ctx, tps[:1]); err != nil {
		return res, fmt.Errorf("watcher: %w", err)
	}
	watcherConns := kafkaConns()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var invocations atomic.Int64
	var fireErr error
	t0 := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			// Fired as the schedule fires it (its occurrence now), so the
			// drain follows until just before the next minute's tick. The
			// schedule never fires just before its tick; an invocation
			// fired there would not follow (mirror.MinFollowWindow) and
			// return at once, again and again until the tick.
			now := time.Now()
			if tick := now.Truncate(time.Minute).Add(time.Minute); tick.Sub(now) < 2*time.Second {
				select {
				case <-runCtx.Done():
					return
				case <-time.After(time.Until(tick)):
				}
				now = time.Now()
			}
			st := &functions.ScheduleStatus{Last: now.Add(-time.Minute), Next: now, LastUpdated: now}
			invocations.Add(1)
			_, err := h.InvokeTimer(runCtx, timerFunctionName, funchost.TimerInvocation{Status: st})
			if err != nil && runCtx.Err() == nil {
				fireErr = err
				return
			}
		}
	}()
	defer func() { stop(); wg.Wait() }()

	deadline := t0.Add(15 * time.Minute)
	for caught := false; !caught; {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the backlog was not committed in 15 minutes (%v)", fireErr)
		}
		if res.FirstSentSeconds == 0 && emu.Stats().EventsStored > 0 {
			res.FirstSentSeconds = time.Since(t0).Seconds()
		}
		res.KafkaConnsCatchUp = max(res.KafkaConnsCatchUp, kafkaConns()-watcherConns)
		res.EventHubsConns = max(res.EventHubsConns, emu.Stats().ConnectionsOpen)
		committed, err := watcher.Committed(runCtx, tps)
		if err != nil {
			continue
		}
		caught = true
		for _, off := range committed {
			if off < cc.PerPartition {
				caught = false
				break
			}
		}
	}
	res.CatchUpSeconds = time.Since(t0).Seconds()
	if pid := h.PID(); pid > 0 {
		res.PeakRSS = procStatusOf("/proc/"+strconv.Itoa(pid)+"/status", "VmHWM")
	}
	if got := emu.Stats().EventsStored; got < total {
		return res, fmt.Errorf("the group committed every partition's end but the emulator stored %d events of %d", got, total)
	}

	// The idle follow: nothing to read, the handler keeps following. The
	// watcher is closed, so every connection and request counted is the
	// handler's.
	closeWatcher()
	time.Sleep(200 * time.Millisecond) // its connections close at the proxy
	watcherConns = 0
	requests := func() int64 {
		var n int64
		for _, p := range proxies {
			n += p.Stats().Requests
		}
		return n
	}
	r0, i0 := requests(), time.Now()
	for end := i0.Add(cc.Idle); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(time.Second):
		}
		res.KafkaConnsIdle = max(res.KafkaConnsIdle, kafkaConns()-watcherConns)
		res.EventHubsConns = max(res.EventHubsConns, emu.Stats().ConnectionsOpen)
	}
	res.IdleSeconds = time.Since(i0).Seconds()
	res.KafkaConnsIdleEnd = kafkaConns() - watcherConns
	res.IdleRequestsPerSec = float64(requests()-r0) / res.IdleSeconds
	if pid := h.PID(); pid > 0 {
		res.IdleRSS = procStatusOf("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS")
	}
	res.Invocations = int(invocations.Load())
	res.LoadAvg[1] = DescribeMachine(time.Now()).LoadAvg
	if fireErr != nil {
		return res, fireErr
	}
	return res, nil
}

// clusterTargets checks issue 48's targets; vs20 is the 20-partition 1 KiB
// keyed case's MB/s in the same run (0: not run).
func clusterTargets(rs []ClusterResult, vs20 float64) []Target {
	var out []Target
	for _, r := range rs {
		n := r.Layout.Name
		bound := TargetClusterRSSFactor*float64(r.InFlightBytes) + TargetClusterRSSOverhead
		out = append(out, verdict(float64(r.PeakRSS) <= bound, "%s: peak RSS %.0f MB (target ≤ %d × %.0f MB in flight + %.0f MB = %.0f MB)", n, mb(r.PeakRSS), TargetClusterRSSFactor, mb(r.InFlightBytes), TargetClusterRSSOverhead/1e6, bound/1e6))
		if vs20 > 0 {
			q := r.MBPerSecond() / vs20
			out = append(out, verdict(q >= TargetClusterVs20, "%s: %.1f MB/s = %.2f of the 20-partition case's %.1f MB/s (target ≥ %.1f)", n, r.MBPerSecond(), q, vs20, TargetClusterVs20))
		} else {
			out = append(out, Target{"n/a", fmt.Sprintf("%s: %.1f MB/s (run 1KiB-keyed in the same run for the ratio to 20 partitions)", n, r.MBPerSecond())})
		}
		brokers := float64(max(r.Brokers, 1))
		out = append(out,
			verdict(r.IdleRequestsPerSec/brokers <= TargetIdleRequestsPerBroker, "%s: idle follow %.1f Kafka requests/s per broker (target ≤ %.0f)", n, r.IdleRequestsPerSec/brokers, TargetIdleRequestsPerBroker),
			verdict(float64(r.KafkaConnsIdle)/brokers <= TargetIdleConnsPerBroker, "%s: idle follow %.0f Kafka connections per broker, %d during the catch-up (target ≤ %d)", n, float64(r.KafkaConnsIdle)/brokers, r.KafkaConnsCatchUp, TargetIdleConnsPerBroker),
			verdict(r.FirstSentSeconds <= TargetFirstSent.Seconds(), "%s: first record sent %.2f s after the invocation (target ≤ %.0f s); %d Event Hubs connections", n, r.FirstSentSeconds, TargetFirstSent.Seconds(), r.EventHubsConns),
			Target{"n/a", n + ": partitions moved per rebalance: not measured here (one process); the scale-out case counts the drains a rebalance ends"})
	}
	return out
}
