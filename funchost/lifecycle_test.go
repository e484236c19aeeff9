package funchost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestFunctionTimeoutKillsAndRestarts: on functionTimeout the whole handler
// is SIGKILLed (never SIGTERM) and a new one started.
func TestFunctionTimeoutKillsAndRestarts(t *testing.T) {
	t.Parallel()
	app := newApp(t, `{"version":"2.0","functionTimeout":"00:00:01","customHandler":{"description":{"defaultExecutablePath":"handler"}}}`,
		map[string]string{"SleepTimer": timerFn(yearly, true), "EchoTimer": timerFn(yearly, true)})
	th := startHost(t, app, Options{Settings: map[string]string{"TEST_SLEEP_MS": "10000"}})
	pid, worker := th.PID(), th.WorkerID()

	res := invokeTimer(t, th, "SleepTimer", TimerInvocation{})
	if !errors.Is(res.Err, ErrFunctionTimeout) || res.Duration < time.Second || res.Duration > 4*time.Second {
		t.Fatalf("err %v after %v; want a function timeout after ~1s", res.Err, res.Duration)
	}
	if !strings.Contains(res.Err.Error(), "functionTimeout 00:00:01") {
		t.Errorf("timeout message: %v", res.Err)
	}
	f := factsOf(t, invokeTimer(t, th, "EchoTimer", TimerInvocation{}))
	if f.Pid == pid || th.WorkerID() == worker || f.Env[functions.EnvWorkerID] != th.WorkerID() {
		t.Errorf("handler not replaced: pid %d→%d, worker %s→%s", pid, f.Pid, worker, th.WorkerID())
	}
	if f.Env[functions.EnvPort] != fmt.Sprint(th.HandlerPort()) {
		t.Errorf("restart changed the port")
	}
	waitFor(t, func() bool { return !alive(pid) })
	if s := th.stderr.String(); strings.Contains(s, "got signal") {
		t.Errorf("the handler received a signal it could catch (the host only SIGKILLs): %s", s)
	}
	if !strings.Contains(th.log.String(), "A function timeout has occurred. Restarting worker process executing invocationId '"+res.InvocationID+"'.") {
		t.Errorf("log lacks the host's timeout message:\n%s", th.log)
	}
	if th.Err() != nil {
		t.Errorf("timeout restarts must not count as errors: %v", th.Err())
	}
}

// TestExitPolicy: a crash is an error event and a restart; the third within
// 30 minutes shuts the host down.
func TestExitPolicy(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{"CrashTimer": timerFn(yearly, true), "EchoTimer": timerFn(yearly, true)})
	th := startHost(t, app, Options{})
	for i := 1; i <= 3; i++ {
		pid := th.PID()
		res := invokeTimer(t, th, "CrashTimer", TimerInvocation{})
		if res.Err == nil || res.Status != 0 {
			t.Fatalf("crash %d: err %v status %d", i, res.Err, res.Status)
		}
		if i < 3 {
			f := factsOf(t, invokeTimer(t, th, "EchoTimer", TimerInvocation{}))
			if f.Pid == pid {
				t.Errorf("crash %d: not restarted", i)
			}
		}
	}
	select {
	case <-th.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("host still running after 3 crashes")
	}
	if err := th.Err(); !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "failed 3 times") || !strings.Contains(err.Error(), "crashing on purpose") {
		t.Errorf("Err = %v", err)
	}
	res := invokeTimer(t, th, "EchoTimer", TimerInvocation{})
	if !errors.Is(res.Err, ErrStopped) {
		t.Errorf("after shutdown: %v", res.Err)
	}
}

func TestStartupFailures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, code string
		errEvents  int
	}{
		{"exit 200 once restarts without counting", "200", 0},
		{"exit 1 once is an error and a restart", "1", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			app := newApp(t, "", map[string]string{"EchoTimer": timerFn(yearly, true)})
			th := startHost(t, app, Options{Settings: map[string]string{"TEST_EXIT_CODE": c.code, "TEST_EXIT_ONCE": filepath.Join(t.TempDir(), "marker")}})
			factsOf(t, invokeTimer(t, th, "EchoTimer", TimerInvocation{}))
			th.mu.Lock()
			n := len(th.errEvents)
			th.mu.Unlock()
			if n != c.errEvents {
				t.Errorf("%d error events, want %d", n, c.errEvents)
			}
		})
	}
	t.Run("exit 0 is not restarted; the initialization timeout is", func(t *testing.T) {
		t.Parallel()
		app := newApp(t, "", map[string]string{"EchoTimer": timerFn(yearly, true)})
		th := newHost(t, app, Options{InitializationTimeout: 300 * time.Millisecond, Settings: map[string]string{"TEST_EXIT_CODE": "0"}})
		err := th.Start(context.Background())
		if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "Initializing HttpWorker timed out") {
			t.Errorf("Start = %v", err)
		}
		if s := th.log.String(); !strings.Contains(s, "exited with code 0; the host does not restart it") {
			t.Errorf("log:\n%s", s)
		}
	})
	t.Run("not executable", func(t *testing.T) {
		t.Parallel()
		app := newApp(t, `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"handler.txt"}}}`, map[string]string{"EchoTimer": timerFn(yearly, true)})
		must(t, os.WriteFile(filepath.Join(app, "handler.txt"), []byte("#!/bin/sh\n"), 0o644))
		th := newHost(t, app, Options{})
		err := th.Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "must be executable") {
			t.Errorf("Start = %v", err)
		}
	})
	t.Run("missing executable", func(t *testing.T) {
		t.Parallel()
		app := newApp(t, `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"no-such-handler-binary"}}}`, map[string]string{"EchoTimer": timerFn(yearly, true)})
		th := newHost(t, app, Options{})
		if err := th.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "not found in the app root") {
			t.Errorf("Start = %v", err)
		}
	})
	t.Run("working directory and executable in a subfolder", func(t *testing.T) {
		t.Parallel()
		app := newApp(t, `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"bin/handler","workingDirectory":"bin"}}}`, map[string]string{"EchoTimer": timerFn(yearly, true)})
		must(t, os.MkdirAll(filepath.Join(app, "bin"), 0o755))
		must(t, os.Symlink(handlerBin, filepath.Join(app, "bin", "handler")))
		th := startHost(t, app, Options{})
		f := factsOf(t, invokeTimer(t, th, "EchoTimer", TimerInvocation{}))
		abs, _ := filepath.Abs(app)
		if f.Cwd != filepath.Join(abs, "bin") || f.Env[functions.EnvAppRoot] != abs {
			t.Errorf("cwd %q, app root %q", f.Cwd, f.Env[functions.EnvAppRoot])
		}
	})
}

func TestKillRestartStopInterrupt(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{"EchoTimer": timerFn(yearly, true)})
	th := startHost(t, app, Options{})
	pid := th.PID()
	must(t, th.Kill())
	f := factsOf(t, invokeTimer(t, th, "EchoTimer", TimerInvocation{}))
	if f.Pid == pid || alive(pid) {
		t.Errorf("Kill: pid %d → %d (old alive %v)", pid, f.Pid, alive(pid))
	}
	pid = f.Pid
	must(t, th.Restart(context.Background()))
	if th.PID() == pid || alive(pid) {
		t.Errorf("Restart: pid %d → %d", pid, th.PID())
	}
	pid = th.PID()
	must(t, th.Stop())
	must(t, th.Stop())
	if alive(pid) {
		t.Error("Stop left the handler running")
	}
	if s := th.stderr.String(); strings.Contains(s, "got signal") {
		t.Errorf("Stop sent a catchable signal: %s", s)
	}
	if res := invokeTimer(t, th, "EchoTimer", TimerInvocation{}); !errors.Is(res.Err, ErrStopped) {
		t.Errorf("invoke after Stop: %v", res.Err)
	}
	select {
	case <-th.Done():
	default:
		t.Error("Done not closed")
	}

	th2 := startHost(t, newApp(t, "", map[string]string{"EchoTimer": timerFn(yearly, true)}), Options{})
	pid = th2.PID()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	must(t, th2.Interrupt(ctx))
	if alive(pid) || !strings.Contains(th2.stderr.String(), "got signal interrupt") || !strings.Contains(th2.stdout.String(), "handler stopped") {
		t.Errorf("Interrupt: alive %v, stderr %q", alive(pid), th2.stderr)
	}
}
