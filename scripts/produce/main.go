// Command produce is the seed's RandomMessage: it writes -count messages
// "This is message number N" to topics chosen at random among
// prod.<topic-base>1 .. prod.<topic-base>5 and prints each one as the seed
// did, "Topic: prod.test3. Message: This is message number 9704".
//
//	go run ./scripts/produce -brokers 127.0.0.1:9092 -count 10000
//	go run ./scripts/produce -brokers host:9093 -tls -sasl scram-sha-512 -user me -keys 100 -headers -quiet
//	go run ./scripts/produce -brokers host:9093 -tls -ca-file ca.pem -cert-file client.pem -key-file client.key
//	go run ./scripts/produce -brokers 127.0.0.1:9092 -count 0 -commit-group orders-app   # a group half-way through each partition
//
// With -commit-group it then commits, for that consumer group, the offsets
// a consumer that processed -commit-fraction (default half) of each
// partition of the topics would have committed: a group to try the
// cut-over on (docs/cutover.md).
//
// The SASL password is read from $KAFKA_SASL_PASSWORD, the password of an
// encrypted client key from $KAFKA_TLS_KEY_PASSWORD. It exits non-zero
// with a one-line error on failure.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ehmirror/ehmirror/scripts/produce/randmsg"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	kf := kafkaconn.RegisterFlags(fs, os.Getenv)
	var o randmsg.Options
	var quiet bool
	var seed uint64
	fs.StringVar(&o.TopicBase, "topic-base", randmsg.DefaultTopicBase, "topics are prod.<topic-base>1 .. prod.<topic-base>5")
	fs.IntVar(&o.Count, "count", 10000, "number of messages")
	fs.IntVar(&o.Keys, "keys", 0, "number of distinct keys key-<i mod N>; 0 = no keys")
	fs.IntVar(&o.KeyEvery, "key-every", 1, "give a key to every Nth message only")
	fs.BoolVar(&o.Headers, "headers", false, "add headers (a text one, a repeated key, binary bytes)")
	fs.IntVar(&o.HeaderEvery, "header-every", 1, "add headers to every Nth message only")
	fs.IntVar(&o.Size, "size", 0, "pad each value to at least N bytes")
	fs.Uint64Var(&seed, "seed", 0, "seed of the random topic choice; 0 = random")
	fs.BoolVar(&quiet, "quiet", false, "do not print each message")
	commitGroup := fs.String("commit-group", "", "then commit, for this consumer group, the offsets a consumer that processed -commit-fraction of each partition would have (the group must have no members)")
	commitFraction := fs.Float64("commit-fraction", 0.5, "the part of each partition (0 to 1) -commit-group commits past")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return fmt.Errorf("flags: %w", err)
	}
	cluster, err := kf.Config(os.Getenv)
	if err != nil {
		return err
	}
	o.Seed = seed
	if !quiet {
		o.Out = os.Stdout
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := randmsg.Produce(ctx, cluster, o)
	if err != nil {
		return fmt.Errorf("after %d messages: %w", res.Written, err)
	}
	fmt.Fprintf(os.Stderr, "produced %d messages in %s (%.0f msg/s) to %v\n", res.Written, res.Duration.Round(1e6), res.Rate(), res.PerTopic)
	if *commitGroup == "" {
		return nil
	}
	commits, err := randmsg.CommitPart(ctx, cluster, *commitGroup, randmsg.TopicNames(o.TopicBase, randmsg.DefaultTopics), *commitFraction)
	if err != nil {
		return err
	}
	for _, c := range commits {
		fmt.Fprintf(os.Stderr, "group %s committed %s/%d at %d (log %d..%d)\n", *commitGroup, c.Topic, c.Partition, c.Offset, c.Start, c.End)
	}
	return nil
}
