package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/functions/appbuild"
)

// ModuleRoot returns the directory holding this module's go.mod, from dir
// upwards.
func ModuleRoot(dir string) (string, error) { return appbuild.ModuleRoot(dir) }

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startToReady starts the handler binary with valid settings and returns
// the time from exec to its first answer to GET / on the custom handler
// port, polled every pollEvery as the Functions host does (faster).
func startToReady(ctx context.Context, bin string, settings map[string]string, pollEvery time.Duration) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(bin)
	cmd.Env = os.Environ()
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, functions.EnvPort+"="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting the handler: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	deadline := t0.Add(10 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, fmt.Errorf("probe request: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			d := time.Since(t0)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			return d, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("waiting for the handler: %w", ctx.Err())
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("handler not ready after 10 s: %w", err)
		}
		time.Sleep(pollEvery)
	}
}

// handlerSettings are valid app settings pointing at the benchmark's Kafka
// and emulator.
func handlerSettings(brokers []string, connectionString string) map[string]string {
	return map[string]string{
		config.KafkaBrokers:        strings.Join(brokers, ","),
		config.KafkaGroup:          "bench-handler",
		config.EventHubsConnection: connectionString,
	}
}

// buildApp lays out the function app (host.json, function folders, the
// handler binary) in cfg.OutDir/app and returns that directory.
func buildApp(ctx context.Context, cfg Config) (string, error) {
	appDir := filepath.Join(cfg.OutDir, "app")
	cfg.Logger.Info("building the function app", "dir", appDir)
	if err := appbuild.Build(ctx, cfg.ModuleRoot, appDir); err != nil {
		return "", err
	}
	return appDir, nil
}

// startHost starts the real handler of appDir under the project's
// Functions host, failing when the host could not index every function.
func startHost(ctx context.Context, appDir string, opts funchost.Options) (*funchost.Host, error) {
	h, err := funchost.New(appDir, opts)
	if err != nil {
		return nil, fmt.Errorf("functions host: %w", err)
	}
	if errs := h.FunctionErrors(); len(errs) > 0 {
		return nil, fmt.Errorf("functions host could not index every function: %v", errs)
	}
	if err := h.Start(ctx); err != nil {
		_ = h.Stop()
		return nil, fmt.Errorf("starting the handler: %w", err)
	}
	return h, nil
}

// interruptHost stops h for a local run (SIGINT to the handler, which
// shuts down gracefully), killing it after 30 s.
func interruptHost(ctx context.Context, h *funchost.Host) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = h.Interrupt(ictx)
}
