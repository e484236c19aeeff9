// Command emulator runs the Event Hubs emulator: an AMQP 1.0 server that the
// azeventhubs SDK publishes to and reads from over plain TCP.
//
// Usage:
//
//	emulator [-config Config.json] [-listen 127.0.0.1:5672] [-key-name NAME] [-key KEY] [-accept-any-token] [-entra-trust-loopback] [-data-dir DIR]
//	         [-tls-listen 127.0.0.1:5671] [-ws-listen 127.0.0.1:443] [-tls-cert cert.pem -tls-key key.pem]
//	         [-throughput-units N [-quota-period 1s] [-stats-interval 10s]]
//
// Without -config it serves the hubs prod.test1..prod.test5 with 4 partitions
// each. Once it accepts connections it prints the connection string
//
//	Endpoint=sb://HOST:PORT;SharedAccessKeyName=NAME;SharedAccessKey=KEY;UseDevelopmentEmulator=true
//
// as the first line of standard output, logs to standard error and runs until
// SIGINT or SIGTERM. A bad configuration file is reported on one line of
// standard error, naming the file and the field, with exit status 2.
//
// With -throughput-units (or a "Quota" in Config.json) the namespace's
// ingress is throttled like the service's (see emulator.Quota), and the
// count of throttled requests is logged every -stats-interval while it
// grows, and at shutdown.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

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
	tlsListen := fs.String("tls-listen", "", "also serve amqps (TLS) on this `address` (the service uses port 5671)")
	wsListen := fs.String("ws-listen", "", "also serve AMQP over WebSockets (path /$servicebus/websocket) on this `address`, over TLS")
	tlsCert := fs.String("tls-cert", "", "PEM certificate `file` for -tls-listen/-ws-listen; created with -tls-key as a self-signed certificate for localhost, 127.0.0.1 and ::1 if it does not exist")
	tlsKey := fs.String("tls-key", "", "PEM private key `file` of -tls-cert")
	dataDir := fs.String("data-dir", "", "keep events, sequence numbers and offsets in this `directory` across restarts (default: memory only)")
	trustLoopback := fs.Bool("entra-trust-loopback", false, "accept Entra ID tokens from loopback clients without checking their signature (roles from -config still apply)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	units := fs.Int("throughput-units", -1, "throttle the namespace's ingress to this many throughput `units` (1 MiB or 1,000 events per second each; 0 disables; default: the Quota of -config, else off)")
	quotaPeriod := fs.Duration("quota-period", 0, "the `period` a unit's 1 MiB or 1,000 events are for (default 1s; shorter compresses time, e.g. 100ms)")
	statsInterval := fs.Duration("stats-interval", 10*time.Second, "with a quota, log the throttled requests this `often` while they grow")
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
	if *units >= 0 {
		fileCfg.Quota.ThroughputUnits = *units
	}
	if *quotaPeriod != 0 {
		fileCfg.Quota.Period = *quotaPeriod
	}
	if *statsInterval <= 0 {
		fmt.Fprintf(stderr, "emulator: -stats-interval: %s is not positive\n", *statsInterval)
		return 2
	}

	var cert *tls.Certificate
	if *tlsListen != "" || *wsListen != "" {
		c, err := loadOrCreateCertificate(*tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintf(stderr, "emulator: %v\n", err)
			return 2
		}
		cert = &c
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv, err := emulator.Start(ctx, emulator.Config{
		Listen:          *listen,
		Namespace:       *namespace,
		KeyName:         *keyName,
		Key:             *key,
		AcceptAnyToken:  *acceptAny,
		Hubs:            fileCfg.Hubs,
		Policies:        fileCfg.Policies,
		EntraID:         fileCfg.EntraID,
		DataDir:         *dataDir,
		TLSListen:       *tlsListen,
		WebSocketListen: *wsListen,
		TLSCertificate:  cert,
		Logger:          logger,
		Quota:           fileCfg.Quota,
	})
	if err != nil {
		fmt.Fprintf(stderr, "emulator: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, srv.ConnectionString())
	if fileCfg.Quota.Enabled() {
		go logThrottling(ctx, srv, logger, *statsInterval)
	}
	<-ctx.Done()
	if fileCfg.Quota.Enabled() {
		logIngress(srv, logger)
	}
	logger.Info("shutting down")
	if err := srv.Close(); err != nil {
		logger.Error("close", "err", err)
		return 1
	}
	return 0
}

// logThrottling logs the ingress counters every interval in which the
// throttled requests grew, until ctx ends.
func logThrottling(ctx context.Context, srv *emulator.Server, logger *slog.Logger, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := srv.Stats().ThrottledRequests; n > last {
				last = n
				logIngress(srv, logger)
			}
		}
	}
}

// logIngress logs the namespace's ingress counters, ThrottledRequests as
// the service's metric of that name counts them.
func logIngress(srv *emulator.Server, logger *slog.Logger) {
	st := srv.Stats()
	logger.Info("ingress", "throttled_requests", st.ThrottledRequests, "events_stored", st.EventsStored, "bytes_stored", st.BytesStored)
}

// loadOrCreateCertificate loads the PEM certificate and key files, or
// creates a self-signed certificate for loopback names and writes both files
// when the certificate file does not exist yet. Without files it returns an
// in-memory self-signed certificate.
func loadOrCreateCertificate(certPath, keyPath string) (tls.Certificate, error) {
	if certPath == "" && keyPath == "" {
		c, _, _, err := emulator.SelfSignedCertificate("localhost", "127.0.0.1", "::1")
		return c, err
	}
	if certPath == "" || keyPath == "" {
		return tls.Certificate{}, fmt.Errorf("-tls-cert and -tls-key go together")
	}
	if _, err := os.Stat(certPath); errors.Is(err, os.ErrNotExist) {
		c, certPEM, keyPEM, err := emulator.SelfSignedCertificate("localhost", "127.0.0.1", "::1")
		if err != nil {
			return tls.Certificate{}, err
		}
		if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
			return tls.Certificate{}, fmt.Errorf("-tls-key: %w", err)
		}
		if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
			return tls.Certificate{}, fmt.Errorf("-tls-cert: %w", err)
		}
		return c, nil
	}
	c, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("-tls-cert/-tls-key: %w", err)
	}
	return c, nil
}

// defaultHubs are the hubs served without -config.
func defaultHubs() []emulator.HubConfig {
	hubs := make([]emulator.HubConfig, 0, 5)
	for i := 1; i <= 5; i++ {
		hubs = append(hubs, emulator.HubConfig{Name: "prod.test" + strconv.Itoa(i), PartitionCount: 4})
	}
	return hubs
}
