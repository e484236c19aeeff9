package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/cutover/filter"
	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/internal/azurite"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestCommand runs the command against kfake, the emulator (two topics
// routed into one hub) and Azurite: refused (exit status 1) while the
// mirror is behind the group, a dry run that writes nothing, then
// checkpoints and a watermarks file the filter reads; no key is printed.
func TestCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	storage := azurite.Start(t)
	cc := azurite.NewContainer(t, storage, "checkpoints")
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	emu, err := emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Hubs: []emulator.HubConfig{{Name: "ab", PartitionCount: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: []string{"a", "b"}[i%2], Partition: int32(i/2) % 2, Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The application's group committed 4 of the 10 records of every partition.
	app, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumerGroup("app"), kgo.ConsumeTopics("a", "b"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	commits := map[string]map[int32]kgo.EpochOffset{"a": {0: {Epoch: -1, Offset: 4}, 1: {Epoch: -1, Offset: 4}}, "b": {0: {Epoch: -1, Offset: 4}, 1: {Epoch: -1, Offset: 4}}}
	var commitErr error
	app.CommitOffsetsSync(ctx, commits, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					commitErr = err
				}
			}
		}
	})
	app.Close()
	if commitErr != nil {
		t.Fatal(commitErr)
	}

	env := map[string]string{"EVENTHUBS": emu.ConnectionString(), "CUTOVER_STORAGE": storage, "MIRROR_ROUTES": "a|b=>ab", "KAFKA_GROUP": "mirror"}
	getenv := func(k string) string { return env[k] }
	brokers := strings.Join(kc.ListenAddrs(), ",")
	cmd := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"-brokers", brokers}, args...), getenv, &out, &errOut, nil)
		all := out.String() + errOut.String()
		if strings.Contains(all, azurite.Key) || (err != nil && strings.Contains(err.Error(), azurite.Key)) {
			t.Fatalf("the storage key was printed: %s %v", all, err)
		}
		return out.String(), err
	}
	if _, err := cmd("-group", "app"); !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "mirrored to 0 of 4") {
		t.Fatalf("before mirroring: %v, want refused saying how far the mirror is", err)
	}

	src, err := kafka.NewSource(kafka.Options{Brokers: kc.ListenAddrs(), Group: "mirror", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: emu.ConnectionString(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	routes, _ := mirror.ParseRoutes("a|b=>ab")
	m, err := mirror.New(src, sink, mirror.Options{Routes: routes, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := m.Drain(ctx, "test", mirror.Limits{MaxDuration: time.Minute}); err != nil || rep.LagAfter != 0 {
		t.Fatalf("drain: %v %+v", err, rep)
	}

	out, err := cmd("-group", "app")
	if err != nil || !strings.Contains(out, "dry run of the cut-over of app") || !strings.Contains(out, "ab   ") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	namespace := func() string {
		p, err := azeventhubs.ParseConnectionString(emu.ConnectionString())
		if err != nil {
			t.Fatal(err)
		}
		return p.FullyQualifiedNamespace
	}()
	bs, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cps, err := bs.ListCheckpoints(ctx, namespace, "ab", "$Default", nil); err != nil || len(cps) != 0 {
		t.Fatalf("the dry run wrote %v, %v", cps, err)
	}
	wm := filepath.Join(t.TempDir(), "watermarks.json")
	out, err = cmd("-group", "app", "-container", "checkpoints", "-confirm", "-watermarks", wm)
	if err != nil || !strings.Contains(out, "4 checkpoint blob(s)") {
		t.Fatalf("confirm: %v\n%s", err, out)
	}
	if cps, err := bs.ListCheckpoints(ctx, namespace, "ab", "$Default", nil); err != nil || len(cps) != 2 {
		t.Fatalf("checkpoints %v, %v; want 2", cps, err)
	}
	data, err := os.ReadFile(wm)
	if err != nil {
		t.Fatal(err)
	}
	f, err := filter.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Processed(map[string]any{"kafka.topic": "b", "kafka.partition": int64(1), "kafka.offset": int64(3)}) ||
		f.Processed(map[string]any{"kafka.topic": "b", "kafka.partition": int64(1), "kafka.offset": int64(4)}) {
		t.Fatalf("the watermarks file does not hold the group's commits: %s", data)
	}
	if _, err := cmd(); err == nil || !strings.Contains(err.Error(), "-group") {
		t.Fatalf("without -group: %v", err)
	}
	checkBackward(ctx, t, cmd, bs, namespace)
	checkStoreFailsFast(t, cmd, env, storage)
}

// checkBackward: a consumer on Event Hubs checkpointed further than the
// cut-over's plan; re-applying it is refused naming the partition with
// both values, the dry run shows it with the flag, -allow-backward writes.
func checkBackward(ctx context.Context, t *testing.T, cmd func(...string) (string, error), bs *checkpoints.BlobStore, namespace string) {
	t.Helper()
	out, err := cmd("-group", "app", "-json")
	if err != nil {
		t.Fatal(err)
	}
	var plan cutover.Result
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	p0 := plan.Partitions[0]
	stored := func() int64 {
		cps, err := bs.ListCheckpoints(ctx, namespace, p0.Hub, "$Default", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range cps {
			if cp.PartitionID == p0.PartitionID {
				return *cp.SequenceNumber
			}
		}
		return -2
	}
	newer, off := p0.Checkpoint.Sequence+3, "999"
	if err := bs.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: namespace, EventHubName: p0.Hub, ConsumerGroup: "$Default",
		PartitionID: p0.PartitionID, SequenceNumber: &newer, Offset: &off}, nil); err != nil {
		t.Fatal(err)
	}
	naming := fmt.Sprintf("%s/%s stored %d, planned %d", p0.Hub, p0.PartitionID, newer, p0.Checkpoint.Sequence)
	if _, err := cmd("-group", "app", "-container", "checkpoints", "-confirm"); !errors.Is(err, errRefused) || !strings.Contains(err.Error(), naming) {
		t.Fatalf("re-applied over a newer checkpoint: %v; want refused naming %q", err, naming)
	}
	if got := stored(); got != newer {
		t.Fatalf("the refused cut-over moved the checkpoint from %d to %d", newer, got)
	}
	out, err = cmd("-group", "app", "-container", "checkpoints")
	if err != nil || !strings.Contains(out, naming) || !strings.Contains(out, "unless -allow-backward") {
		t.Fatalf("dry run: %v\n%s; want the partition and the flag", err, out)
	}
	out, err = cmd("-group", "app", "-container", "checkpoints", "-confirm", "-allow-backward")
	if err != nil || !strings.Contains(out, "moved backward, as allowed") || stored() != p0.Checkpoint.Sequence {
		t.Fatalf("-allow-backward: %v, stored %d\n%s", err, stored(), out)
	}
}

// checkStoreFailsFast: a missing container and an unreachable store fail
// in one line, at once, before the hubs are scanned.
func checkStoreFailsFast(t *testing.T, cmd func(...string) (string, error), env map[string]string, storage string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	host := storage[strings.Index(storage, "BlobEndpoint=http://")+len("BlobEndpoint=http://"):]
	host = host[:strings.Index(host, "/")]
	for _, c := range []struct{ storage, container, want string }{
		{storage, "nope", `container "nope" does not exist`},
		{strings.Replace(storage, host, closed, 1), "checkpoints", "unreachable"},
	} {
		env["CUTOVER_STORAGE"] = c.storage
		start := time.Now()
		_, err := cmd("-group", "app", "-container", c.container, "-confirm")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || time.Since(start) > 10*time.Second {
			t.Errorf("%s: %v after %v; want one line saying %q at once", c.container, err, time.Since(start), c.want)
		}
	}
	// A dry run still plans against an unreachable store, and says the
	// stored checkpoints were not compared.
	env["CUTOVER_STORAGE"] = strings.Replace(storage, host, closed, 1)
	out, err := cmd("-group", "app", "-container", "checkpoints")
	if err != nil || !strings.Contains(out, "the checkpoint store did not answer") || !strings.Contains(out, "unreachable") {
		t.Errorf("dry run with an unreachable store: %v\n%s; want the plan and one note on the store", err, out)
	}
	env["CUTOVER_STORAGE"] = storage
}
