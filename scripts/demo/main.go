// Command demo is `make demo`: on a machine with only Go, it runs the whole
// mirror locally and proves it. It starts an embedded Kafka (kfake, the real
// Kafka protocol on loopback) and the Event Hubs emulator with hubs
// prod.test1 .. prod.test5; produces the seed's 10,000 messages ("This is
// message number N" on a random topic, some with keys and headers); builds
// the function app and runs the real handler binary under the local
// Functions host, firing MirrorTimer until the consumer group's lag is 0
// (and one catch-up through POST /api/catchup); then reads every event back
// through the Event Hubs SDK and compares it with every Kafka record.
//
// It prints a table per topic (Kafka records, Event Hubs events, missing,
// duplicates, order, lag, mirrored/s) and exits non-zero on any difference.
// Everything it starts, it stops, also on Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var o options
	fs.IntVar(&o.count, "count", 10000, "messages to produce")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of every topic and event hub")
	fs.IntVar(&o.maxRecords, "max-records", 2500, "MIRROR_MAX_RECORDS: records per drain, so that the timer runs several times (0 = no bound)")
	fs.IntVar(&o.catchUpAfter, "catch-up-after", 2, "start one catch-up (POST /api/catchup) after this many timer runs; 0 = none")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the random topic choice; 0 = random")
	fs.BoolVar(&o.oauth, "oauth", false, "run Kafka behind SASL/OAUTHBEARER: the handler gets JWTs from a local OIDC issuer (client credentials) and re-authenticates as its sessions end")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	st, err := os.Stdout.Stat()
	o.terminal = err == nil && st.Mode()&os.ModeCharDevice != 0

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if _, err := run(ctx, o, os.Stdout); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started is stopped")
		} else {
			fmt.Fprintln(os.Stderr, "demo:", err)
		}
		cancel()
		stop()
		os.Exit(1)
	}
}
