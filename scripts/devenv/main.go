// Command devenv runs the local development environment in the foreground:
// an embedded Kafka (kfake, the real Kafka protocol) on 127.0.0.1:9092 with
// topics prod.test1 .. prod.test5, and the Event Hubs emulator on
// 127.0.0.1:5672 with event hubs of the same names, 4 partitions each. It
// prints the settings to put in local.settings.json (or, with -settings,
// writes them into that file), so `func start` (with Azurite for
// AzureWebJobsStorage), `make start`, or the produce and verify scripts can
// run against them. With -data-dir both keep their data (Kafka's records,
// topics and committed offsets; Event Hubs' events) across restarts.
// Ctrl-C stops both.
//
//	go run ./scripts/devenv                 # or: make dev-env
//	go run ./scripts/devenv -produce 10000  # and seed the topics
//	go run ./scripts/devenv -kafka 127.0.0.1:19092 -eventhubs 127.0.0.1:15672 -settings local.settings.json -data-dir .devenv
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/scripts/produce/randmsg"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	kafka      string
	eventHubs  string
	topicBase  string
	partitions int
	produce    int
	// dataDir, when set, keeps Kafka's state in dataDir/kafka and the
	// emulator's events in dataDir/eventhubs across restarts.
	dataDir string
	// settings, when set, is the local.settings.json whose KAFKA_BROKERS
	// and EVENTHUBS are pointed at this environment.
	settings string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("devenv", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.kafka, "kafka", "127.0.0.1:9092", "address of the embedded Kafka broker")
	fs.StringVar(&o.eventHubs, "eventhubs", emulator.DefaultListen, "address of the Event Hubs emulator (AMQP)")
	fs.StringVar(&o.topicBase, "topic-base", randmsg.DefaultTopicBase, "topics and hubs are prod.<topic-base>1 .. prod.<topic-base>5")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of each topic and event hub")
	fs.IntVar(&o.produce, "produce", 0, "produce this many messages the seed's way once both are up")
	fs.StringVar(&o.dataDir, "data-dir", "", "keep Kafka's records, topics and committed offsets and the emulator's events in this `directory` across restarts (default: memory only)")
	fs.StringVar(&o.settings, "settings", "", "point KAFKA_BROKERS and EVENTHUBS of this local.settings.json `file` at this environment (created from local.settings.json.example when missing)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("flags: %w", err)
	}
	env, err := start(ctx, o)
	if err != nil {
		return err
	}
	defer env.close(out)

	printSettings(out, env)
	if o.settings != "" {
		if err := writeSettings(o.settings, env); err != nil {
			return err
		}
		fmt.Fprintf(out, "Wrote KAFKA_BROKERS and EVENTHUBS into %s.\n\n", o.settings)
	}
	if o.produce > 0 {
		if err := produce(ctx, out, env, o); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "Running. Press Ctrl-C to stop.")
	<-ctx.Done()
	fmt.Fprintln(out)
	return nil
}

// env is the running environment.
type env struct {
	kafka  *kfake.Cluster
	hubs   *emulator.Server
	topics []string
}

// start starts Kafka and the emulator; on error nothing is left running.
func start(ctx context.Context, o options) (*env, error) {
	if o.partitions < 1 || o.partitions > emulator.MaxPartitionCount {
		return nil, fmt.Errorf("-partitions %d: want 1..%d", o.partitions, emulator.MaxPartitionCount)
	}
	topics := randmsg.TopicNames(o.topicBase, randmsg.DefaultTopics)
	kopts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(o.partitions), topics...),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(o.partitions),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, o.kafka) }),
	}
	var hubsDir string
	if o.dataDir != "" {
		kopts = append(kopts, kfake.DataDir(filepath.Join(o.dataDir, "kafka")))
		hubsDir = filepath.Join(o.dataDir, "eventhubs")
		if err := os.MkdirAll(hubsDir, 0o755); err != nil {
			return nil, fmt.Errorf("-data-dir: %w", err)
		}
	}
	kc, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("starting Kafka on %s: %w", o.kafka, err)
	}
	hubs := make([]emulator.HubConfig, len(topics))
	for i, t := range topics {
		hubs[i] = emulator.HubConfig{Name: t, PartitionCount: o.partitions}
	}
	srv, err := emulator.Start(ctx, emulator.Config{Listen: o.eventHubs, Hubs: hubs, DataDir: hubsDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		kc.Close()
		return nil, fmt.Errorf("starting the Event Hubs emulator on %s: %w", o.eventHubs, err)
	}
	return &env{kafka: kc, hubs: srv, topics: topics}, nil
}

func (e *env) close(out io.Writer) {
	if err := e.hubs.Close(); err != nil {
		fmt.Fprintln(out, "stopping the emulator:", err)
	}
	e.kafka.Close()
	fmt.Fprintln(out, "Stopped Kafka and the Event Hubs emulator.")
}

func printSettings(out io.Writer, e *env) {
	brokers := strings.Join(e.kafka.ListenAddrs(), ",")
	fmt.Fprintf(out, `Kafka (kfake)          %s   topics %s
Event Hubs (emulator)  %s   hubs   %s

Settings for local.settings.json "Values" (the rest as in local.settings.json.example;
the emulator's key is its public development key):

    "AzureWebJobsStorage": "UseDevelopmentStorage=true",
    "KAFKA_BROKERS": %q,
    "EVENTHUBS": %q,

Then, in another terminal:
    func start  (with Azurite running)  or  make start
    go run ./scripts/produce -brokers %s -count 10000
    EVENTHUBS='%s' go run ./scripts/verify -brokers %s

`, brokers, strings.Join(e.topics, ", "), e.hubs.Addr(), strings.Join(e.topics, ", "),
		brokers, e.hubs.ConnectionString(), brokers, e.hubs.ConnectionString(), brokers)
}

func produce(ctx context.Context, out io.Writer, e *env, o options) error {
	res, err := randmsg.Produce(ctx, kafkaconn.Config{Brokers: e.kafka.ListenAddrs()}, randmsg.Options{
		TopicBase: o.topicBase, Count: o.produce, Keys: 100, KeyEvery: 2, Headers: true, HeaderEvery: 4,
		Out: out, EchoLimit: 5,
		Progress: func(n int) { fmt.Fprintf(out, "\rproduced %d/%d", n, o.produce) },
	})
	fmt.Fprintln(out)
	if err != nil {
		return fmt.Errorf("producing: %w", err)
	}
	fmt.Fprintf(out, "Produced %d messages in %s: %v\n\n", res.Written, res.Duration.Round(1e6), res.PerTopic)
	return nil
}
