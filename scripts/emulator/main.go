// Command emulator runs the Event Hubs emulator: an AMQP 1.0 server that the
// azeventhubs SDK publishes to and reads from over plain TCP.
//
// Usage:
//
//	emulator [-config Config.json] [-listen 127.0.0.1:5672] [-key-name NAME] [-key KEY] [-accept-any-token] [-entra-trust-loopback] [-data-dir DIR]
//
// Without -config it serves the hubs prod.test1..prod.test5 with 4 partitions
// each. Once it accepts connections it prints the connection string
//
//	Endpoint=sb://HOST:PORT;SharedAccessKeyName=NAME;SharedAccessKey=KEY;UseDevelopmentEmulator=true
//
// as the first line of standard output, logs to standard error and runs until
// SIGINT or SIGTERM. A bad configuration file is reported on one line of
// standard error, naming the file and the field, with exit status 2.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/ehmirror/ehmirror/emulator"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "hubs from a Microsoft Event Hubs emulator `Config.json` (default: prod.test1..prod.test5, 4 partitions each)")
	listen := fs.String("listen", emulator.DefaultListen, "TCP `address` to listen on")
	keyName := fs.String("key-name", emulator.DefaultKeyName, "shared access key `name` that SAS tokens must use")
	key := fs.String("key", emulator.DefaultKey, "shared access `key` that SAS tokens are signed with")
	acceptAny := fs.Bool("accept-any-token", false, "accept any SAS token without checking it")
	namespace := fs.String("namespace", emulator.DefaultNamespace, "namespace `name` used in error descriptions")
	dataDir := fs.String("data-dir", "", "keep events, sequence numbers and offsets in this `directory` across restarts (default: memory only)")
	trustLoopback := fs.Bool("entra-trust-loopback", false, "accept Entra ID tokens from loopback clients without checking their signature (roles from -config still apply)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "emulator: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "emulator: -log-level: %v\n", err)
		return 2
	}

	fileCfg := emulator.Config{Hubs: defaultHubs()}
	if *configPath != "" {
		var err error
		if fileCfg, err = emulator.LoadConfig(*configPath); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *trustLoopback {
		fileCfg.EntraID.TrustUnsignedFromLoopback = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv, err := emulator.Start(ctx, emulator.Config{
		Listen:         *listen,
		Namespace:      *namespace,
		KeyName:        *keyName,
		Key:            *key,
		AcceptAnyToken: *acceptAny,
		Hubs:           fileCfg.Hubs,
		Policies:       fileCfg.Policies,
		EntraID:        fileCfg.EntraID,
		DataDir:        *dataDir,
		Logger:         logger,
	})
	if err != nil {
		fmt.Fprintf(stderr, "emulator: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, srv.ConnectionString())
	<-ctx.Done()
	logger.Info("shutting down")
	if err := srv.Close(); err != nil {
		logger.Error("close", "err", err)
		return 1
	}
	return 0
}

// defaultHubs are the hubs served without -config.
func defaultHubs() []emulator.HubConfig {
	hubs := make([]emulator.HubConfig, 0, 5)
	for i := 1; i <= 5; i++ {
		hubs = append(hubs, emulator.HubConfig{Name: "prod.test" + strconv.Itoa(i), PartitionCount: 4})
	}
	return hubs
}
