package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/scripts/produce/randmsg"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

const testKey = "not-the-public-emulator-key"

// TestCommandAgainstTheRealMirror runs the command before and after a drain
// of the real mirror engine (kafka source, eventhubs sink): it fails with
// exit status 1 while nothing is mirrored, passes afterwards even with
// -fail-on-duplicates -fail-on-pending, reports an unreachable hub without
// printing the connection string's key, and refuses to run without Event
// Hubs settings.
func TestCommandAgainstTheRealMirror(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topics := randmsg.TopicNames("c", 2)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	brokers := strings.Join(kc.ListenAddrs(), ",")
	var hubs []emulator.HubConfig
	for _, tp := range topics {
		hubs = append(hubs, emulator.HubConfig{Name: tp, PartitionCount: 2})
	}
	emu, err := emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Key: testKey, Hubs: hubs})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	if _, err := randmsg.Produce(ctx, kafkaconn.Config{Brokers: kc.ListenAddrs()}, randmsg.Options{TopicBase: "c", Topics: 2, Count: 300, Keys: 10, Headers: true}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"EVENTHUBS": emu.ConnectionString()}
	getenv := func(k string) string { return env[k] }
	cmd := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(append([]string{"-brokers", brokers, "-idle-timeout", "10s"}, args...), getenv, &out, &errOut, false)
		all := out.String() + errOut.String()
		if strings.Contains(all, testKey) || (err != nil && strings.Contains(err.Error(), testKey)) {
			t.Fatalf("the connection string's key was printed:\n%s%v", all, err)
		}
		return out.String(), err
	}

	out, err := cmd()
	if !errors.Is(err, errFailed) || !strings.Contains(out, "FAIL: 300 missing") {
		t.Fatalf("before mirroring: err %v, output:\n%s", err, out)
	}

	drain(t, ctx, kc.ListenAddrs(), emu.ConnectionString())
	out, err = cmd("-fail-on-duplicates", "-fail-on-pending")
	if err != nil || !strings.Contains(out, "OK: 300 Kafka records, 300 Event Hubs events") || !strings.Contains(out, "prod.c1") {
		t.Fatalf("after mirroring: err %v, output:\n%s", err, out)
	}

	out, err = cmd("-routes", `prod\.(.*)=>elsewhere-$1`)
	if !errors.Is(err, errFailed) || !strings.Contains(out, "hub elsewhere-c1: cannot read the hub") {
		t.Fatalf("missing hubs: err %v, output:\n%s", err, out)
	}

	out, err = cmd("-topics", `prod\.nothing`)
	if !errors.Is(err, errFailed) || !strings.Contains(out, "no Kafka topic matched") {
		t.Fatalf("no topic: err %v, output:\n%s", err, out)
	}

	env = map[string]string{}
	if _, err := cmd(); err == nil || errors.Is(err, errFailed) || !strings.Contains(err.Error(), "EVENTHUBS") {
		t.Fatalf("without Event Hubs settings: err %v, want a usage error", err)
	}
}

// drain mirrors everything once with the real mirror engine and group
// "ehmirror", as the handler would.
func drain(t *testing.T, ctx context.Context, brokers []string, connectionString string) {
	t.Helper()
	src, err := kafka.NewSource(kafka.Options{Brokers: brokers, Group: "ehmirror"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: connectionString, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(ctx)
	filter, err := mirror.CompileTopicFilter(`prod\..*`, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := mirror.New(src, sink, mirror.Options{Topics: filter, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := m.Drain(ctx, "test", mirror.Limits{MaxDuration: time.Minute})
	if err != nil || rep.Failed() || rep.Records != 300 {
		t.Fatalf("drain: %v %v", err, rep.Lines())
	}
}
