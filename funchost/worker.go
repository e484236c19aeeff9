package funchost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

// worker is one handler process.
type worker struct {
	id     string
	port   int // FUNCTIONS_CUSTOMHANDLER_PORT: fixed per ScriptHost
	cmd    *exec.Cmd
	ready  chan struct{} // closed when GET / answered
	exited chan struct{} // closed when the process has exited
	// handled is closed once the host has applied its exit policy (the
	// replacement, if any, is started).
	handled chan struct{}
	// disposed is set when the host kills or replaces the worker on
	// purpose; its exit then triggers no policy.
	disposed atomic.Bool
	// calls counts the invocations sent to this worker and not yet
	// answered.
	calls  atomic.Int64
	stderr *lineWriter
	stdout *lineWriter
}

func (w *worker) kill() error {
	if w.cmd.Process == nil {
		return errors.New("funchost: handler process not started")
	}
	// Process.Kill is SIGKILL on Unix, like .NET's Process.Kill().
	if err := w.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("funchost: kill handler: %w", err)
	}
	return nil
}

func (w *worker) interrupt() error {
	if err := interruptProcess(w.cmd.Process); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("funchost: interrupt handler: %w", err)
	}
	return nil
}

func (w *worker) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.exited:
		return true
	case <-t.C:
		return false
	}
}

var (
	envRefRE        = regexp.MustCompile(`%([^%]+)%`)
	unresolvedRefRE = regexp.MustCompile(`%\S+?%`)
)

// expandEnv is .NET's Environment.ExpandEnvironmentVariables: %NAME% is
// replaced when NAME is set and left as is otherwise.
func expandEnv(s string, lookup func(string) (string, bool)) string {
	return envRefRE.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := lookup(ref[1 : len(ref)-1]); ok {
			return v
		}
		return ref
	})
}

// command builds the handler command line the way DefaultWorkerProcessFactory
// does: <exe> <expanded arguments…> ["<defaultWorkerPath>"] <workerArguments…>.
func (h *Host) command() (path string, args []string, dir string, err error) {
	ch := h.app.Host.CustomHandler
	root, err := filepath.Abs(h.app.Root)
	if err != nil {
		return "", nil, "", fmt.Errorf("app root: %w", err)
	}
	exe := expandEnv(ch.DefaultExecutablePath, h.settings)
	switch {
	case filepath.IsAbs(exe):
		path = exe
	default:
		// Joined with the app root only if that file exists; otherwise a
		// command on PATH.
		candidate := filepath.Join(root, exe)
		if _, statErr := os.Stat(candidate); statErr == nil {
			path = candidate
		} else if path, err = exec.LookPath(exe); err != nil {
			return "", nil, "", fmt.Errorf("defaultExecutablePath %q: not found in the app root %s nor on PATH", ch.DefaultExecutablePath, root)
		}
	}
	for _, a := range ch.Arguments {
		a = expandEnv(a, h.settings)
		// DefaultWorkerProcessFactory.SanitizeExpandedArgument removes
		// references that did not resolve.
		args = append(args, unresolvedRefRE.ReplaceAllString(a, ""))
	}
	if ch.DefaultWorkerPath != "" {
		args = append(args, filepath.Join(root, expandEnv(ch.DefaultWorkerPath, h.settings)))
	}
	for _, a := range ch.WorkerArguments {
		args = append(args, unresolvedRefRE.ReplaceAllString(expandEnv(a, h.settings), ""))
	}
	dir = root
	if wd := ch.WorkingDirectory; wd != "" {
		wd = expandEnv(wd, h.settings)
		if filepath.IsAbs(wd) {
			dir = wd
		} else {
			dir = filepath.Join(root, wd)
		}
	}
	return path, args, dir, nil
}

// startWorker starts a handler process on port and its readiness probe.
func (h *Host) startWorker(port int) (*worker, error) {
	path, args, dir, err := h.command()
	if err != nil {
		return nil, err
	}
	root, _ := filepath.Abs(h.app.Root)
	w := &worker{id: newGUID(), port: port, ready: make(chan struct{}), exited: make(chan struct{}), handled: make(chan struct{})}
	portText := strconv.Itoa(port)
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), h.env...),
		functions.EnvPort+"="+portText,
		functions.EnvLegacyPort+"="+portText,
		functions.EnvWorkerID+"="+w.id,
		functions.EnvLegacyWorkerID+"="+w.id,
		functions.EnvAppRoot+"="+root,
	)
	w.stdout = h.newLineWriter(h.opts.Stdout, false, 0)
	w.stderr = h.newLineWriter(h.opts.Stderr, true, stderrTailLines)
	cmd.Stdout, cmd.Stderr = w.stdout, w.stderr
	cmd.WaitDelay = time.Second
	setProcAttr(cmd)
	w.cmd = cmd
	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("start handler %s: %w (the file must be executable; the host only adds the bit on Linux Consumption)", path, err)
		}
		return nil, fmt.Errorf("start handler %s: %w", path, err)
	}
	h.log.Info("Started the handler process", "category", dispatcherLogCategory, "pid", cmd.Process.Pid, "workerId", w.id, "path", path, "port", port)
	go h.wait(w)
	go h.probe(w)
	return w, nil
}

// wait reaps the process and applies the host's exit policy
// (WorkerProcess.OnProcessExited): exit code 0 is left alone (no restart),
// 200 restarts without counting an error, anything else is a worker error
// and a restart.
func (h *Host) wait(w *worker) {
	defer close(w.handled)
	err := w.cmd.Wait()
	w.stdout.flush()
	w.stderr.flush()
	close(w.exited)
	if w.disposed.Load() {
		return
	}
	code := w.cmd.ProcessState.ExitCode()
	switch {
	case err == nil && code == 0:
		h.log.Warn("The handler exited with code 0; the host does not restart it, so invocations fail until it is restarted", "category", dispatcherLogCategory, "workerId", w.id)
	case code == intentionalRestartCode:
		h.log.Info("The handler exited with code 200 (intentional restart)", "category", dispatcherLogCategory, "workerId", w.id)
		h.replace(w, "exit code 200", false, nil)
	default:
		cause := fmt.Errorf("handler process exited: %s%s", w.cmd.ProcessState, w.stderr.tailText())
		h.log.Error("The handler process exited", "category", dispatcherLogCategory, "workerId", w.id, "error", cause)
		h.replace(w, "handler exited", true, cause)
	}
}

// probe polls GET / every 25 ms until any HTTP response arrives (ready),
// or the initialization timeout (a worker error and a restart). Only
// connection failures (refused, reset) mean "not ready yet".
func (h *Host) probe(w *worker) {
	timeout := h.opts.InitializationTimeout
	if timeout <= 0 {
		timeout = h.app.Host.CustomHandler.InitializationTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-w.exited:
			if w.disposed.Load() {
				cancel()
			}
		}
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/", w.port)
	start := time.Now()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := h.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			h.log.Info("Worker ready", "category", dispatcherLogCategory, "workerId", w.id, "probeStatus", resp.StatusCode, "after", time.Since(start).Round(time.Millisecond))
			close(w.ready)
			return
		}
		if ctx.Err() == nil && !connectionFailure(err) {
			// The host treats any other failure as "ready" too.
			h.log.Warn("Readiness probe failed with a non-connection error; the host treats that as ready", "category", dispatcherLogCategory, "error", err)
			close(w.ready)
			return
		}
		select {
		case <-ctx.Done():
			if w.disposed.Load() {
				return
			}
			cause := fmt.Errorf("Initializing HttpWorker timed out: the handler did not answer GET / on 127.0.0.1:%d within %v", w.port, timeout)
			h.log.Error(cause.Error(), "category", dispatcherLogCategory, "workerId", w.id)
			h.replace(w, "initialization timeout", true, cause)
			return
		case <-time.After(readinessPollInterval):
		}
	}
}

func connectionFailure(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// lineWriter splits a stream into lines and hands each to a sink.
type lineWriter struct {
	mu    sync.Mutex
	buf   []byte
	sink  func(line string)
	tail  []string
	tailN int
}

func (h *Host) newLineWriter(dst io.Writer, stderr bool, tailN int) *lineWriter {
	lw := &lineWriter{tailN: tailN}
	switch {
	case dst != nil:
		lw.sink = func(line string) {
			h.outMu.Lock()
			defer h.outMu.Unlock()
			io.WriteString(dst, line+"\n")
		}
	case stderr:
		lw.sink = func(line string) {
			level := slog.LevelError
			if strings.Contains(strings.ToLower(line), "warn") {
				level = slog.LevelWarn
			}
			h.log.Log(context.Background(), level, line, "category", consoleLogCategory)
		}
	default:
		lw.sink = func(line string) { h.log.Info(line, "category", consoleLogCategory) }
	}
	return lw
}

// Write implements io.Writer: complete lines go to the sink.
func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(string(bytes.TrimRight(l.buf[:i], "\r")))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineWriter) emit(line string) {
	if l.tailN > 0 {
		l.tail = append(l.tail, line)
		if len(l.tail) > l.tailN {
			l.tail = l.tail[len(l.tail)-l.tailN:]
		}
	}
	l.sink(line)
}

func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(string(l.buf))
		l.buf = nil
	}
}

func (l *lineWriter) tailText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tail) == 0 {
		return ""
	}
	return "; stderr: " + strings.Join(l.tail, " | ")
}
