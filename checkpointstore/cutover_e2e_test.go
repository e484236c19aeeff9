package checkpointstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/checkpointstore"
	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/cutover/filter"
	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/internal/azurite"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// perPartition is how many records each Kafka partition gets.
const perPartition = 25

// scenarioTopics: orders (keyed) and audit (keyless) share hub "shared"
// with metrics (keyless, not consumed by the group); clicks (keyed) has a
// hub of its own.
var scenarioTopics = []struct {
	name       string
	partitions int
	keyed      bool
	hub        string
	hubParts   int
}{
	{"orders", 3, true, "shared", 4},
	{"audit", 2, false, "shared", 4},
	{"metrics", 1, false, "shared", 4},
	{"clicks", 2, true, "clicks", 2},
}

// groupCommits is where the application's group "app" stands: audit/1 has
// no commit (nothing processed), orders/2 and clicks/0 are done.
var groupCommits = map[string]map[int32]int64{
	"orders": {0: 0, 1: 12, 2: perPartition},
	"audit":  {0: 5},
	"clicks": {0: perPartition, 1: 9},
}

func testLogger() *slog.Logger {
	if os.Getenv("CUTOVER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// TestCutoverProcessorStartsExactly: records in several topics (keyed and
// keyless, three of them into one hub) are partly processed by a Kafka
// consumer group, which commits; the cut-over refuses while the group has
// members and while the mirror is behind it; the project's mirror engine
// mirrors everything; the cut-over writes checkpoints on Azurite; then the
// azeventhubs Processor with checkpoints.NewBlobStore receives every
// record the group had not processed (0 missing), exactly the events the
// plan counted, and with the filter nothing the group had processed.
//
// The JavaScript and Python SDKs' processors read the checkpoints too
// (once: they are slow to start); Python's bundled blob client needs
// Azurite's loose mode.
func TestCutoverProcessorStartsExactly(t *testing.T) {
	conn := azurite.Start(t)
	jsDir := installJSProcessor(t)
	py := pythonWithSDK(t)
	pyStorage := azurite.StartLoose(t)
	for i, c := range []struct {
		mode  mirror.Partitioning
		dedup bool
	}{
		{mirror.PartitionByHash, true},
		{mirror.PartitionByKafkaMurmur2, false},
		{mirror.PartitionPreserve, true},
		{mirror.PartitionRoundRobin, false},
	} {
		t.Run(fmt.Sprintf("%s/dedup=%v", c.mode, c.dedup), func(t *testing.T) {
			var others *otherSDKs
			if i == 0 {
				others = &otherSDKs{jsDir: jsDir, python: py, pyStorage: pyStorage}
			}
			runScenario(t, conn, "cp"+strconv.Itoa(i), c.mode, c.dedup, others)
		})
	}
}

// otherSDKs are the processors of other SDKs that read the checkpoints:
// the JavaScript one installed in jsDir, the Python one run by python on
// pyStorage (an Azurite in loose mode).
type otherSDKs struct {
	jsDir, python, pyStorage string
}

// runScenario runs the scenario with one partitioning mode; with others
// set, the JavaScript and Python SDKs' processors also read the
// checkpoints.
func runScenario(t *testing.T, storage, containerName string, mode mirror.Partitioning, dedup bool, others *otherSDKs) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kopts := []kfake.Opt{kfake.NumBrokers(1)}
	hubs := map[string]int{}
	for _, tt := range scenarioTopics {
		kopts = append(kopts, kfake.SeedTopics(int32(tt.partitions), tt.name))
		hubs[tt.hub] = tt.hubParts
	}
	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(cluster.Close)
	var hubConfigs []emulator.HubConfig
	for name, n := range hubs {
		hubConfigs = append(hubConfigs, emulator.HubConfig{Name: name, PartitionCount: n})
	}
	cert, certPEM, _, err := emulator.SelfSignedCertificate("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	emu, err := emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Hubs: hubConfigs, WebSocketListen: "127.0.0.1:0", TLSCertificate: &cert})
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	addrs := cluster.ListenAddrs()

	produceAll(ctx, t, addrs)
	app := processPart(ctx, t, addrs)

	src, err := kafka.NewSource(kafka.Options{Brokers: addrs, Group: "mirror", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: emu.ConnectionString(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	cc := azurite.NewContainer(t, storage, containerName)
	store, err := checkpointstore.New(checkpointstore.Options{ConnectionString: storage, Container: containerName})
	if err != nil {
		t.Fatal(err)
	}
	props, err := azeventhubs.ParseConnectionString(emu.ConnectionString())
	if err != nil {
		t.Fatal(err)
	}
	var routes []cutover.TopicRoute
	var tps []mirror.TopicPartition
	for _, tt := range scenarioTopics {
		routes = append(routes, cutover.TopicRoute{Topic: tt.name, Partitions: tt.partitions, Hub: tt.hub})
		for p := range tt.partitions {
			tps = append(tps, mirror.TopicPartition{Topic: tt.name, Partition: int32(p)})
		}
	}
	request := func(confirm, force bool) cutover.Request {
		mirrored, err := src.Committed(ctx, tps)
		if err != nil {
			t.Fatal(err)
		}
		return cutover.Request{Group: "app", Topics: routes, MirrorCommitted: mirrored, Namespace: props.FullyQualifiedNamespace,
			ConsumerGroup: azeventhubs.DefaultConsumerGroup, Confirm: confirm, Force: force, By: "test"}
	}

	// The group still consumes: refused, unless forced (then the mirror
	// is still behind).
	if _, err := cutover.Run(ctx, src, sink, store, request(false, false), testLogger()); !errors.Is(err, cutover.ErrGroupActive) {
		t.Fatalf("cut-over with a member: %v, want ErrGroupActive", err)
	}
	_, err = cutover.Run(ctx, src, sink, store, request(true, true), testLogger())
	if !errors.Is(err, cutover.ErrMirrorBehind) || !strings.Contains(err.Error(), "orders/1 mirrored to 0 of 12") {
		t.Fatalf("forced cut-over before mirroring: %v, want ErrMirrorBehind saying orders/1 mirrored to 0 of 12", err)
	}
	app.Close() // leaves the group
	waitNoMembers(ctx, t, src)

	routesOpt, err := mirror.ParseRoutes("orders|audit|metrics=>shared")
	if err != nil {
		t.Fatal(err)
	}
	m, err := mirror.New(src, sink, mirror.Options{Routes: routesOpt, Partitioning: mode, Deduplicate: dedup,
		CommitInterval: 100 * time.Millisecond, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// A first drain of a few records leaves the mirror behind the group.
	if _, err := m.Drain(ctx, "test", mirror.Limits{MaxRecords: 3, MaxDuration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := cutover.Run(ctx, src, sink, store, request(true, false), testLogger()); !errors.Is(err, cutover.ErrMirrorBehind) {
		t.Fatalf("cut-over with the mirror partly done: %v, want ErrMirrorBehind", err)
	}
	for i := 0; ; i++ {
		rep, err := m.Drain(ctx, "test", mirror.Limits{MaxDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if rep.LagAfter == 0 && len(rep.Errors) == 0 {
			break
		}
		if i == 20 {
			t.Fatalf("the mirror did not catch up: lag %d, errors %v", rep.LagAfter, rep.Errors)
		}
	}

	dry, err := cutover.Run(ctx, src, sink, store, request(false, false), testLogger())
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if dry.Written || len(dry.Blobs) != 0 || len(dry.Partitions) != 6 || strings.Join(dry.Hubs, ",") != "clicks,shared" {
		t.Fatalf("dry run: written %v, blobs %v, %d partitions, hubs %v", dry.Written, dry.Blobs, len(dry.Partitions), dry.Hubs)
	}
	if n := len(dry.Watermarks); n != 7 {
		t.Fatalf("%d watermarks, want 7 (the group's partitions; metrics is not the group's): %+v", n, dry.Watermarks)
	}
	res, err := cutover.Run(ctx, src, sink, store, request(true, false), testLogger())
	if err != nil {
		t.Fatalf("cut-over: %v", err)
	}
	if !res.Written || len(res.Blobs) != 12 { // "$Default" and "$default", 6 partitions
		t.Fatalf("cut-over: written %v, blobs %q", res.Written, res.Blobs)
	}

	var fws []filter.Watermark
	for _, w := range res.Watermarks {
		fws = append(fws, filter.Watermark{Topic: w.Topic, Partition: w.Partition, Offset: w.Offset})
	}
	f, err := filter.New(fws)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantPerHub := map[string]int64{}
	for _, p := range res.Partitions {
		wantPerHub[p.Hub] += p.Delivered
	}
	goEvents := map[string][]receivedEvent{}
	for _, hub := range res.Hubs {
		goEvents[hub] = receiveWithProcessor(ctx, t, emu.ConnectionString(), hub, bs, wantPerHub[hub])
	}
	checkReceived(t, "the Go processor", res, goEvents, f)
	if others == nil {
		return
	}
	// The JavaScript SDK names the namespace by the endpoint's host
	// without the port (the emulator's has one; Azure's has none): the
	// checkpoints are written again under that spelling, as a user
	// passes "namespace" to match the consumers.
	jsReq := request(true, false)
	if host, _, err := net.SplitHostPort(jsReq.Namespace); err == nil {
		jsReq.Namespace = host
	}
	if _, err := cutover.Run(ctx, src, sink, store, jsReq, testLogger()); err != nil {
		t.Fatalf("cut-over for the JavaScript consumers: %v", err)
	}
	jsEvents := map[string][]receivedEvent{}
	for _, hub := range res.Hubs {
		jsEvents[hub] = receiveWithJavaScript(ctx, t, others.jsDir, emu.ConnectionString(), hub, storage, containerName, wantPerHub[hub], res.Watermarks, f)
	}
	checkReceived(t, "the JavaScript processor", res, jsEvents, f)

	// The Python consumers reach the emulator over WebSockets as
	// "localhost", which names their checkpoints.
	azurite.NewContainer(t, others.pyStorage, containerName)
	pyStore, err := checkpointstore.New(checkpointstore.Options{ConnectionString: others.pyStorage, Container: containerName})
	if err != nil {
		t.Fatal(err)
	}
	pyReq := request(true, false)
	pyReq.Namespace = "localhost"
	if _, err := cutover.Run(ctx, src, sink, pyStore, pyReq, testLogger()); err != nil {
		t.Fatalf("cut-over for the Python consumers: %v", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	_, wsPort, _ := net.SplitHostPort(emu.WebSocketAddr())
	ep := pyEndpoint{conn: "Endpoint=sb://localhost/;SharedAccessKeyName=" + emulator.DefaultKeyName + ";SharedAccessKey=" + emulator.DefaultKey,
		ca: ca, wss: "https://localhost:" + wsPort}
	pyEvents := map[string][]receivedEvent{}
	for _, hub := range res.Hubs {
		pyEvents[hub] = receiveWithPython(ctx, t, others.python, ep, hub, others.pyStorage, containerName, wantPerHub[hub], res.Watermarks, f)
	}
	checkReceived(t, "the Python processor", res, pyEvents, f)
}

// checkReceived checks what a processor received from the cut-over's
// checkpoints, per hub: every record the group had not processed (0
// missing), exactly the planned number of events per partition, and with
// the filter exactly the processed records dropped.
func checkReceived(t *testing.T, who string, res *cutover.Result, byHub map[string][]receivedEvent, f *filter.Filter) {
	t.Helper()
	plans := map[string]cutover.PartitionPlan{}
	for _, p := range res.Partitions {
		plans[p.Hub+"/"+p.PartitionID] = p
	}
	received := map[mirror.TopicPartition]map[int64]int{}
	var redelivered, kept int64
	for _, hub := range res.Hubs {
		counts := map[string]int64{}
		for _, ev := range byHub[hub] {
			counts[ev.partition]++
			tp, o, ok := cutover.ProvenanceOf(ev.props)
			if !ok {
				t.Fatalf("%s: hub %s partition %s: an event without provenance", who, hub, ev.partition)
			}
			if received[tp] == nil {
				received[tp] = map[int64]int{}
			}
			received[tp][o]++
			if f.Processed(ev.props) {
				redelivered++
				if c, ok := groupCommits[tp.Topic][tp.Partition]; !ok || o >= c {
					t.Fatalf("%s: the filter drops %s@%d, which the group had not processed", who, tp, o)
				}
				continue
			}
			kept++
			if c, ok := groupCommits[tp.Topic][tp.Partition]; ok && o < c {
				t.Fatalf("%s: after the filter, %s@%d is delivered, which the group had processed (committed %d)", who, tp, o, c)
			}
		}
		for _, p := range res.Partitions {
			if p.Hub == hub && counts[p.PartitionID] != p.Delivered {
				t.Errorf("%s: hub %s partition %s: received %d events, the plan says %d from checkpoint %+v", who, hub, p.PartitionID, counts[p.PartitionID], p.Delivered, p.Checkpoint)
			}
		}
	}
	var missing []string
	for _, tt := range scenarioTopics {
		if tt.name == "metrics" {
			continue
		}
		for p := range int32(tt.partitions) {
			tp := mirror.TopicPartition{Topic: tt.name, Partition: p}
			c, committed := groupCommits[tt.name][p]
			if !committed {
				c = 0
			}
			for o := c; o < perPartition; o++ {
				if received[tp][o] == 0 {
					missing = append(missing, fmt.Sprintf("%s@%d", tp, o))
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s: %d record(s) the group had not processed were not received: %v", who, len(missing), missing)
	}
	if redelivered != res.Redelivered {
		t.Errorf("%s: the filter dropped %d events, the cut-over announced %d", who, redelivered, res.Redelivered)
	}
	t.Logf("%s: %d events kept, %d re-delivered and dropped by the filter", who, kept, redelivered)
}

// produceAll writes perPartition records into every partition of every
// topic, keyed where the topic is.
func produceAll(ctx context.Context, t *testing.T, addrs []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, tt := range scenarioTopics {
		for p := range int32(tt.partitions) {
			for i := range perPartition {
				r := &kgo.Record{Topic: tt.name, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", tt.name, p, i)}
				if tt.keyed {
					r.Key = fmt.Appendf(nil, "key-%d", (i*7+int(p))%11)
				}
				recs = append(recs, r)
			}
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// processPart runs the application's consumer group "app" on orders,
// audit and clicks, lets it read, and commits groupCommits (what it
// processed). The returned client is still a member.
func processPart(ctx context.Context, t *testing.T, addrs []string) *kgo.Client {
	t.Helper()
	app, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup("app"), kgo.ConsumeTopics("orders", "audit", "clicks"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	for read := 0; read < perPartition*7; {
		fs := app.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("app poll: %v", err)
		}
		read += fs.NumRecords()
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range groupCommits {
		offsets[topic] = map[int32]kgo.EpochOffset{}
		for p, o := range ps {
			offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
	}
	var commitErr error
	app.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err != nil {
			return
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					commitErr = fmt.Errorf("%s/%d: %w", rt.Topic, rp.Partition, err)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("app commit: %v", commitErr)
	}
	return app
}

func waitNoMembers(ctx context.Context, t *testing.T, src *kafka.Source) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := src.MembersOf(ctx, "app")
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group still has %d member(s) (%v) after its consumer left", n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type receivedEvent struct {
	partition string
	sequence  int64
	props     map[string]any
}

// receiveWithProcessor runs an azeventhubs Processor on hub with the Blob
// checkpoint store (default start positions: latest, the SDK's default)
// until want events arrived and then 3 s more for any extra one.
func receiveWithProcessor(ctx context.Context, t *testing.T, conn, hub string, store azeventhubs.CheckpointStore, want int64) []receivedEvent {
	t.Helper()
	cc, err := azeventhubs.NewConsumerClientFromConnectionString(conn, hub, azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close(context.Background())
	proc, err := azeventhubs.NewProcessor(cc, store, &azeventhubs.ProcessorOptions{
		LoadBalancingStrategy: azeventhubs.ProcessorStrategyGreedy, UpdateInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	var got []receivedEvent
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			pc := proc.NextPartitionClient(pctx)
			if pc == nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer pc.Close(context.Background())
				for pctx.Err() == nil {
					rctx, cancel := context.WithTimeout(pctx, time.Second)
					evs, err := pc.ReceiveEvents(rctx, 100, nil)
					cancel()
					mu.Lock()
					for _, ev := range evs {
						got = append(got, receivedEvent{partition: pc.PartitionID(), sequence: ev.SequenceNumber, props: ev.Properties})
					}
					mu.Unlock()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) && pctx.Err() == nil {
						t.Errorf("hub %s partition %s: %v", hub, pc.PartitionID(), err)
						return
					}
				}
			}()
		}
	}()
	runErr := make(chan error, 1)
	go func() { runErr <- proc.Run(pctx) }()
	count := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return int64(len(got))
	}
	deadline := time.Now().Add(90 * time.Second)
	for count() < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	stop()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("processor on %s: %v", hub, err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if int64(len(got)) != want {
		t.Errorf("hub %s: the processor received %d events, the cut-over plans %d", hub, len(got), want)
	}
	return got
}
