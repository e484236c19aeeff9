// Command handler is the Azure Functions custom handler of the Kafka to
// Event Hubs mirror. The Functions host starts it, tells it the port in
// FUNCTIONS_CUSTOMHANDLER_PORT, and posts invocations of the MirrorTimer,
// CatchUp and Status functions to /<FunctionName>.
//
// main only wires: settings from the environment, the Kafka source, the
// Event Hubs sink, the mirror service, and the HTTP routes.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"
	_ "time/tzdata" // WEBSITE_TIME_ZONE names resolve without the system zoneinfo

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/mirror"
)

// shutdownGrace bounds how long a SIGTERM/SIGINT waits for the current drain
// to commit what Event Hubs acknowledged.
const shutdownGrace = 10 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// stdout is logged by the host at Information, stderr at Error. Every
	// line passes through the redactor so that no secret reaches the logs.
	redactor := newRedactor(config.Secrets(os.Getenv))
	logger := slog.New(slog.NewTextHandler(redactor.Writer(os.Stdout), nil))
	slog.SetDefault(logger)

	port, err := functions.HandlerPort(os.LookupEnv)
	if err != nil {
		return err
	}
	// Listen first: the host polls GET / and must get an answer within a
	// second of start; clients are created without network I/O.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("listening on port %d: %w", port, err)
	}

	a := newApp(os.Getenv, logger, redactor)
	a.unknownSettings = config.UnknownSettings(os.Environ())
	sizeGC(logger, a.settings.InFlightBytes)
	// Setting problems go to stderr, which the host logs at Error, as
	// structured lines with time and level.
	errLogger := slog.New(slog.NewTextHandler(redactor.Writer(os.Stderr), nil))
	for _, p := range a.problems {
		errLogger.Error("setting problem: "+p.String(), "setting", p.Setting, "remedy", p.Remedy, "doc", p.Doc)
	}
	for _, p := range a.unknownSettings {
		errLogger.Warn("setting problem: "+p.String(), "setting", p.Setting, "remedy", p.Remedy, "doc", p.Doc)
	}
	// Each HTTP function gets its own deadline: the host never cancels a
	// request to the handler.
	srv := &http.Server{
		Handler:     deadlines{next: newServer(a), capAt: a.settings.HTTPDeadline, logger: errLogger, redact: redactor.Redact},
		BaseContext: func(net.Listener) context.Context { return ctx },
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("handler ready", "port", port, "settings_ok", len(a.problems) == 0 && len(a.unknownSettings) == 0, "unknown_settings", len(a.unknownSettings))
	go a.logReadiness(ctx)
	if a.instances != nil {
		go a.instances.Run(ctx, func() ([]mirror.RunningDrain, []*mirror.Report) {
			return a.service.Mirror().Running(), a.service.Reports()
		})
	}

	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving: %w", err)
		}
	case <-ctx.Done():
		logger.Info("stopping: no new work; committing what Event Hubs acknowledged")
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("stopping the HTTP server", "err", err)
	}
	a.Close(shutdownCtx)
	return nil
}

// sizeGC sets the garbage collector's soft memory limit from the in-flight
// bound (see config.MemoryLimit), unless GOMEMLIMIT sets it, and logs it.
func sizeGC(logger *slog.Logger, inFlight int64) {
	available := config.AvailableMemory()
	limit, ok := config.MemoryLimit(os.Getenv, inFlight, available)
	if !ok {
		logger.Info("garbage collector's memory limit from GOMEMLIMIT", "memory_limit_mb", debug.SetMemoryLimit(-1)>>20)
		return
	}
	debug.SetMemoryLimit(limit)
	logger.Info("garbage collector's memory limit set from MIRROR_INFLIGHT_BYTES", "memory_limit_mb", limit>>20, "available_mb", available>>20)
}
