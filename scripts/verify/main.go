// Command verify compares Kafka topics with the event hubs they are mirrored
// into, using the provenance properties on each event, and prints a table
// per topic: Kafka records, Event Hubs events, missing, pending, duplicates,
// mismatches, order violations and the mirror's lag.
//
//	EVENTHUBS='Endpoint=sb://…' go run ./scripts/verify -brokers 127.0.0.1:9092
//	go run ./scripts/verify -brokers host:9093 -tls -sasl scram-sha-512 -user me -namespace myns.servicebus.windows.net
//	go run ./scripts/verify -brokers host:9093 -tls -ca-file ca.pem -cert-file client.pem -key-file client.key
//
// Event Hubs is reached with the connection string in $EVENTHUBS, or with
// -namespace and Microsoft Entra ID (DefaultAzureCredential: az login, a
// managed identity, or the AZURE_* environment). The Kafka SASL password is
// read from $KAFKA_SASL_PASSWORD, the password of an encrypted client key
// (-key-file, mutual TLS) from $KAFKA_TLS_KEY_PASSWORD.
//
// Exit status: 0 when nothing is missing, mismatched, out of order or
// misrouted (duplicates and lag pass unless -fail-on-duplicates or
// -fail-on-pending); 1 when the verification found problems; 2 when it could
// not be done.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/verify"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// errFailed marks a verification that ran and found problems.
var errFailed = errors.New("verification failed")

func main() {
	err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr, isTerminal(os.Stderr))
	switch {
	case err == nil:
	case errors.Is(err, errFailed):
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "verify:", err)
		os.Exit(2)
	}
}

// run verifies; progress goes to stderr when it is a terminal.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer, terminal bool) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kf := kafkaconn.RegisterFlags(fs, getenv)
	topics := fs.String("topics", envOr(getenv, "KAFKA_TOPICS_INCLUDE", verify.DefaultTopics), "regular expression of the topics to verify (whole name)")
	exclude := fs.String("exclude", getenv("KAFKA_TOPICS_EXCLUDE"), "regular expression of topics to leave out")
	routes := fs.String("routes", getenv("MIRROR_ROUTES"), "the mirror's MIRROR_ROUTES, REGEX=>HUB;… (default: hub = topic name)")
	partitioning := fs.String("partitioning", envOr(getenv, "MIRROR_PARTITIONING", "hash"), "the mirror's MIRROR_PARTITIONING: decides which order is checked")
	group := fs.String("group", envOr(getenv, "KAFKA_GROUP", verify.DefaultGroup), "the mirror's consumer group: absent records after its committed offset are pending, not missing; empty = every absent record is missing")
	namespace := fs.String("namespace", getenv("EVENTHUBS__fullyQualifiedNamespace"), "Event Hubs namespace host for Microsoft Entra ID (default: the connection string in $EVENTHUBS)")
	consumerGroup := fs.String("consumer-group", verify.DefaultConsumerGroup, "Event Hubs consumer group to read with")
	failDups := fs.Bool("fail-on-duplicates", false, "fail when an event is duplicated (delivery is at-least-once, so duplicates pass by default)")
	failPending := fs.Bool("fail-on-pending", false, "fail when records are not mirrored yet (lag)")
	idle := fs.Duration("idle-timeout", verify.DefaultIdleTimeout, "give up on a partition that delivers nothing for this long")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("flags: %w", err)
	}
	*quiet = *quiet || !terminal

	cfg := verify.Config{
		Partitioning:     mirror.Partitioning(*partitioning),
		Group:            *group,
		FailOnDuplicates: *failDups,
		FailOnPending:    *failPending,
		IdleTimeout:      *idle,
	}
	var err error
	if cfg.Kafka, err = kf.Config(getenv); err != nil {
		return err
	}
	if cfg.Topics, err = mirror.CompileTopicFilter(*topics, *exclude); err != nil {
		return fmt.Errorf("-topics/-exclude: %w", err)
	}
	if cfg.Routes, err = mirror.ParseRoutes(*routes); err != nil {
		return fmt.Errorf("-routes: %w", err)
	}
	cfg.EventHubs.ConsumerGroup = *consumerGroup
	switch cs := getenv("EVENTHUBS"); {
	case *namespace != "":
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return fmt.Errorf("Microsoft Entra ID credential: %w", err)
		}
		cfg.EventHubs.Namespace, cfg.EventHubs.Credential = *namespace, cred
	case cs != "":
		cfg.EventHubs.ConnectionString = cs
	default:
		return errors.New("no Event Hubs: set $EVENTHUBS to a namespace connection string, or pass -namespace NAME.servicebus.windows.net")
	}
	if !*quiet {
		cfg.Progress = progressPrinter(stderr)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := verify.Run(ctx, cfg)
	if !*quiet {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil {
		return err
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	} else {
		if err := rep.WriteTable(stdout); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		if err := rep.WriteFindings(stdout); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		fmt.Fprintln(stdout, rep.Verdict())
	}
	if !rep.OK() {
		return errFailed
	}
	return nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// progressPrinter rewrites one stderr line at most every 200 ms.
func progressPrinter(w io.Writer) func(verify.Progress) {
	var last time.Time
	return func(p verify.Progress) {
		if time.Since(last) < 200*time.Millisecond && p.Done < p.Total {
			return
		}
		last = time.Now()
		what := "reading Kafka"
		if p.Phase == "eventhubs" {
			what = "reading Event Hubs"
		}
		fmt.Fprintf(w, "\r\033[K%s: %d/%d", what, p.Done, p.Total)
	}
}
