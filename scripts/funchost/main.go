// Command funchost runs a function app folder with the local Functions host
// of package funchost, for machines without Azure Functions Core
// Tools:
//
//	go run ./scripts/funchost -app build/app [-port 7071] [-settings local.settings.json]
//
// It loads the Values of local.settings.json into the handler's
// environment, starts the handler, prints the function URLs and a function
// key, runs the timer functions on their schedules (or back to back with
// -timers loop), serves the HTTP functions, and stops on SIGINT or SIGTERM,
// giving the handler -grace to exit after a SIGINT before killing it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/functions"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "funchost:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("funchost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	appDir := fs.String("app", "build/app", "function app folder (host.json, <Function>/function.json, the handler)")
	port := fs.Int("port", 0, "public HTTP port (default: Host.LocalHttpPort of the settings file, else 7071)")
	settingsPath := fs.String("settings", "", "local.settings.json to load (default: ./local.settings.json, else <app>/local.settings.json, when present)")
	timers := fs.String("timers", "schedule", "timer functions: schedule (NCRONTAB, as the host), loop (back to back, for demos) or off")
	key := fs.String("key", "", "function (host) key to accept and print; default: the one in -keys-file")
	keysFile := fs.String("keys-file", ".cache/funchost-keys.json", "file keeping the master and default keys across restarts (created with random keys when missing; empty: new random keys each start)")
	grace := fs.Duration("grace", 10*time.Second, "on SIGINT/SIGTERM, how long the handler may take to exit after a SIGINT before SIGKILL (0: SIGKILL at once, like the host)")
	level := fs.String("log-level", "info", "host log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))

	settings, settingsFile, err := loadSettings(*settingsPath, *appDir)
	if err != nil {
		return err
	}
	if *port == 0 {
		*port = 7071
		if settings.LocalHTTPPort != 0 {
			*port = settings.LocalHTTPPort
		}
	}
	var keys funchost.Keys
	if *keysFile != "" {
		keys, err = funchost.LoadOrCreateKeys(*keysFile)
	} else {
		keys, err = funchost.GenerateKeys()
	}
	if err != nil {
		return err
	}
	if *key != "" {
		keys.Host["default"] = *key
	}
	h, err := funchost.New(*appDir, funchost.Options{
		Settings:        settings.Values,
		SettingDefaults: functions.SettingDefaults(),
		Stdout:          stdout,
		Stderr:          stderr,
		Logger:          logger,
		Keys:            keys,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer h.Stop()

	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		return fmt.Errorf("listen on port %d: %w", *port, err)
	}
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second}
	if settingsFile != "" {
		fmt.Fprintf(stdout, "Loaded %d app settings from %s\n", len(settings.Values), settingsFile)
	}
	if err := h.Start(ctx); err != nil {
		return fmt.Errorf("start the handler: %w", err)
	}
	printFunctions(stdout, h, *port)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("HTTP front end stopped", "error", err)
		}
	}()
	timersCtx, stopTimers := context.WithCancel(ctx)
	defer stopTimers()
	wg.Add(1)
	go func() {
		defer wg.Done()
		runTimers(timersCtx, h, *timers, logger)
	}()

	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "Stopping…")
	case <-h.Done():
	}
	stopTimers()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(shutdownCtx)
	cancel()
	if *grace > 0 {
		graceCtx, cancel := context.WithTimeout(context.Background(), *grace)
		if err := h.Interrupt(graceCtx); err != nil {
			logger.Warn("handler did not exit in time; killed it", "error", err)
		}
		cancel()
	}
	h.Stop()
	wg.Wait()
	return h.Err()
}

func loadSettings(path, appDir string) (funchost.LocalSettings, string, error) {
	if path == "" {
		for _, p := range []string{"local.settings.json", filepath.Join(appDir, "local.settings.json")} {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
		if path == "" {
			return funchost.LocalSettings{}, "", nil
		}
	}
	ls, err := funchost.ReadLocalSettings(path)
	return ls, path, err
}

func printFunctions(w io.Writer, h *funchost.Host, port int) {
	routes := map[string]funchost.Route{}
	for _, r := range h.Routes() {
		routes[r.Function] = r
	}
	errs := h.FunctionErrors()
	fmt.Fprintln(w, "\nFunctions:")
	for _, fn := range h.App().Functions {
		switch r, ok := routes[fn.Name]; {
		case errs[fn.Name] != nil:
			fmt.Fprintf(w, "\n\t%s: error: %v\n", fn.Name, errs[fn.Name])
		case ok:
			methods := strings.Join(r.Methods, ",")
			if methods == "" {
				methods = "GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS"
			}
			fmt.Fprintf(w, "\n\t%s: [%s] http://localhost:%d%s (authLevel %s)\n", fn.Name, methods, port, r.Template, r.AuthLevel)
		default:
			detail := fn.Trigger().Type
			if s, ok := h.Schedule(fn.Name); ok {
				detail += " (" + s.String() + ")"
			}
			fmt.Fprintf(w, "\n\t%s: %s\n", fn.Name, detail)
		}
	}
	keys := h.Keys()
	fmt.Fprintf(w, "\nFunction key (?code= or x-functions-key): %s\nMaster key (admin API, e.g. POST /admin/functions/<name>): %s\n\n", keys.DefaultKey(), keys.Master)
}

// runTimers drives the timer functions until ctx ends.
func runTimers(ctx context.Context, h *funchost.Host, mode string, logger *slog.Logger) {
	switch mode {
	case "off":
		<-ctx.Done()
	case "loop":
		var wg sync.WaitGroup
		for _, fn := range h.App().Functions {
			if _, ok := h.Schedule(fn.Name); !ok {
				continue
			}
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				for ctx.Err() == nil {
					if _, err := h.InvokeTimer(ctx, name, funchost.TimerInvocation{}); err != nil {
						logger.Error("timer loop stopped", "function", name, "error", err)
						return
					}
				}
			}(fn.Name)
		}
		wg.Wait()
	default:
		if mode != "schedule" {
			logger.Warn("unknown -timers mode; using schedule", "mode", mode)
		}
		if err := h.RunSchedules(ctx); err != nil {
			logger.Error("schedules stopped", "error", err)
		}
	}
}
