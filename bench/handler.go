package bench

import (
	"bytes"
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
	"github.com/ehmirror/ehmirror/functions"
)

// modulePath is this repository's Go module.
const modulePath = "github.com/ehmirror/ehmirror"

// ModuleRoot returns the directory holding this module's go.mod, from dir
// upwards.
func ModuleRoot(dir string) (string, error) {
	for d := dir; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+modulePath+"\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of %s in %s or above", modulePath, dir)
		}
		d = parent
	}
}

// buildHandler builds ./handler of the module at root into out, as `make
// build` does (static, trimmed paths).
func buildHandler(ctx context.Context, root, out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build the handler: %w", err)
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-o", out, "./handler")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if data, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./handler: %w: %s", err, strings.TrimSpace(string(data)))
	}
	return nil
}

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
