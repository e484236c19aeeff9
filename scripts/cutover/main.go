// Command cutover moves a Kafka consumer group to Event Hubs: it reads the
// group's committed offsets, finds in every hub partition the first event
// the group has not processed (by the Kafka provenance the mirror writes on
// every event), and writes the checkpoints that the Event Hubs SDKs' event
// processors read from Blob Storage, so they start exactly there. It is
// POST /api/cutover for a laptop, with no time limit on the scan.
//
//	EVENTHUBS='Endpoint=sb://…' go run ./scripts/cutover -brokers host:9092 -group orders-app
//	CUTOVER_STORAGE='DefaultEndpointsProtocol=…' go run ./scripts/cutover -group orders-app -container checkpoints -confirm
//	go run ./scripts/cutover -group orders-app -namespace myns.servicebus.windows.net \
//	    -storage-uri https://acct.blob.core.windows.net -container checkpoints -confirm
//
// Without -confirm it is a dry run: it prints the plan (per hub partition
// the start, the checkpoint, the events delivered again) and writes
// nothing (with -container it also reads and shows the stored checkpoints).
// It refuses while the group has members (unless -force), while the mirror
// has not mirrored up to the group's committed offsets, and when a planned
// checkpoint is older than the stored one (unless -allow-backward; each
// partition is named with both values). Checkpoints are written on the
// condition that the blob did not change since it was read; after a store
// failure halfway it prints what was written, and a re-run finishes. The
// watermarks for the consumer-side filter (package cutover/filter) are
// printed as JSON, and written to -watermarks FILE when given.
//
// Event Hubs is reached with the connection string in $EVENTHUBS, or with
// -namespace and Microsoft Entra ID (DefaultAzureCredential); Blob Storage
// with the connection string in $CUTOVER_STORAGE, or -storage-uri and
// Microsoft Entra ID. The Kafka flags are those of scripts/verify.
//
// Exit status: 0 on success, 1 when the cut-over was refused, 2 on other
// errors.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/ehmirror/ehmirror/checkpointstore"
	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// errRefused marks a cut-over that was refused (members, mirror behind).
var errRefused = errors.New("cut-over refused")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil)
	switch {
	case err == nil:
	case errors.Is(err, errRefused):
		fmt.Fprintln(os.Stderr, "cutover:", err)
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "cutover:", err)
		os.Exit(2)
	}
}

// run parses args and cuts over; cred, when not nil, replaces
// DefaultAzureCredential.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, cred azcore.TokenCredential) error {
	fs := flag.NewFlagSet("cutover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kf := kafkaconn.RegisterFlags(fs, getenv)
	group := fs.String("group", "", "the application's Kafka consumer group to move to Event Hubs (required)")
	mirrorGroup := fs.String("mirror-group", envOr(getenv, "KAFKA_GROUP", "ehmirror"), "the mirror's consumer group (how far it has mirrored)")
	include := fs.String("topics", getenv("KAFKA_TOPICS_INCLUDE"), "the mirror's KAFKA_TOPICS_INCLUDE (regular expression, whole name; default every topic)")
	exclude := fs.String("exclude", getenv("KAFKA_TOPICS_EXCLUDE"), "the mirror's KAFKA_TOPICS_EXCLUDE")
	routes := fs.String("routes", getenv("MIRROR_ROUTES"), "the mirror's MIRROR_ROUTES, REGEX=>HUB;… (default: hub = topic name)")
	only := fs.String("only", "", "comma-separated topics to cut over (default: the mirrored topics the group committed on)")
	namespace := fs.String("namespace", getenv("EVENTHUBS__fullyQualifiedNamespace"), "Event Hubs namespace host for Microsoft Entra ID (default: the connection string in $EVENTHUBS)")
	cpNamespace := fs.String("checkpoint-namespace", "", "the namespace as the consumers pass it, which names the checkpoint blobs (default: the mirror's)")
	consumerGroup := fs.String("consumer-group", "$Default", "the Event Hubs consumer group of the consumers")
	storageURI := fs.String("storage-uri", getenv("CUTOVER_STORAGE__blobServiceUri"), "Blob service URI for Microsoft Entra ID (default: the connection string in $CUTOVER_STORAGE)")
	container := fs.String("container", getenv("CUTOVER_CONTAINER"), "the blob container of the consumers' checkpoint store")
	force := fs.Bool("force", false, "cut over although the group still has members")
	allowBackward := fs.Bool("allow-backward", false, "write checkpoints older than those already stored (a consumer read further); refused without it")
	confirm := fs.Bool("confirm", false, "write the checkpoints (default: dry run)")
	watermarks := fs.String("watermarks", "", "also write the watermarks (the filter's input) as JSON to this file")
	jsonOut := fs.Bool("json", false, "print the whole answer as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("flags: %w", err)
	}
	if *group == "" {
		return errors.New("-group: the application's Kafka consumer group is required")
	}
	kc, err := kf.Config(getenv)
	if err != nil {
		return err
	}
	tlsConfig, err := kc.TLSConfig()
	if err != nil {
		return err
	}
	filter, err := mirror.CompileTopicFilter(*include, *exclude)
	if err != nil {
		return fmt.Errorf("-topics/-exclude: %w", err)
	}
	rs, err := mirror.ParseRoutes(*routes)
	if err != nil {
		return fmt.Errorf("-routes: %w", err)
	}
	credential := func() (azcore.TokenCredential, error) {
		if cred != nil {
			return cred, nil
		}
		c, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("Microsoft Entra ID credential: %w", err)
		}
		return c, nil
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	src, err := kafka.NewSource(kafka.Options{Brokers: kc.Brokers, Group: *mirrorGroup, TLS: tlsConfig,
		SASL: kafka.SASL{Mechanism: kc.SASL, Username: kc.User, Password: kc.Password}, Logger: log})
	if err != nil {
		return err
	}
	defer src.Close()
	sinkOpts := eventhubs.Options{Logger: log}
	switch cs := getenv("EVENTHUBS"); {
	case *namespace != "":
		if sinkOpts.Credential, err = credential(); err != nil {
			return err
		}
		sinkOpts.FullyQualifiedNamespace = *namespace
	case cs != "":
		sinkOpts.ConnectionString = cs
	default:
		return errors.New("no Event Hubs: set $EVENTHUBS to a namespace connection string, or pass -namespace NAME.servicebus.windows.net")
	}
	sink, err := eventhubs.NewSink(sinkOpts)
	if err != nil {
		return err
	}
	defer sink.Close(context.WithoutCancel(ctx))
	var store cutover.CheckpointStore
	if *confirm && *container == "" {
		return errors.New("-container: the blob container of the checkpoint store is required with -confirm")
	}
	if *container != "" {
		opts := checkpointstore.Options{Container: *container}
		switch cs := getenv("CUTOVER_STORAGE"); {
		case *storageURI != "":
			if opts.Credential, err = credential(); err != nil {
				return err
			}
			opts.ContainerURL, opts.Container = strings.TrimSuffix(*storageURI, "/")+"/"+*container, ""
		case cs != "":
			opts.ConnectionString = cs
		case *confirm:
			return errors.New("no Blob Storage: set $CUTOVER_STORAGE to a storage connection string, or pass -storage-uri https://ACCOUNT.blob.core.windows.net")
		}
		if opts.ConnectionString != "" || opts.ContainerURL != "" {
			if store, err = checkpointstore.New(opts); err != nil {
				return err
			}
		}
	}
	var onlyTopics []string
	for _, t := range strings.Split(*only, ",") {
		if t = strings.TrimSpace(t); t != "" {
			onlyTopics = append(onlyTopics, t)
		}
	}
	m, err := cutover.Mirrored(ctx, src, filter, rs, onlyTopics)
	if err != nil {
		return err
	}
	req := cutover.Request{Group: *group, Topics: m.Topics, Explicit: len(onlyTopics) > 0, MirrorCommitted: m.Committed, MirrorEnds: m.Ends,
		Namespace: *cpNamespace, ConsumerGroup: *consumerGroup, Force: *force, AllowBackward: *allowBackward, Confirm: *confirm, By: "scripts/cutover"}
	if req.Namespace == "" {
		if req.Namespace, err = sink.Namespace(); err != nil {
			return err
		}
	}
	res, err := cutover.Run(ctx, src, sink, store, req, log)
	if err != nil {
		if res != nil && len(res.Blobs)+len(res.InPlace) > 0 {
			fmt.Fprintf(stdout, "in place before the failure (%d partition(s)): %s\n", res.WrittenPartitions, strings.Join(append(res.Blobs, res.InPlace...), ", "))
		}
		if errors.Is(err, cutover.ErrGroupActive) || errors.Is(err, cutover.ErrMirrorBehind) ||
			errors.Is(err, cutover.ErrBackward) || errors.Is(err, cutover.ErrCheckpointChanged) {
			return fmt.Errorf("%w: %w", errRefused, err)
		}
		return err
	}
	if *watermarks != "" {
		data, err := json.MarshalIndent(res.Watermarks, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*watermarks, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("-watermarks: %w", err)
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return writePlan(stdout, res)
}

// writePlan prints the plan as a table, the watermarks as JSON and what
// happened.
func writePlan(w io.Writer, res *cutover.Result) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "HUB\tPARTITION\tSTART\tCHECKPOINT SEQ\tCHECKPOINT OFFSET\tSTORED SEQ\tLAST\tDELIVERED\tREDELIVERED\tFOREIGN")
	for _, p := range res.Partitions {
		stored := "-"
		if p.Stored != nil {
			stored = strconv.FormatInt(p.Stored.Sequence, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\n", p.Hub, p.PartitionID, p.Start, p.Checkpoint.Sequence, p.Checkpoint.Offset, stored, p.Last, p.Delivered, p.Redelivered, p.Foreign)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	data, err := json.Marshal(res.Watermarks)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwatermarks (for the consumer-side filter): %s\n\n", data)
	fmt.Fprintln(w, cutover.Summary(res, "run with -confirm", "-allow-backward"))
	return nil
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
