package funchost

// This file is how the handler process is replaced, restarted and stopped:
// by the host's policies (replace), by the platform (Kill, Restart,
// RestartHost, Stop) and locally (Interrupt).

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// replace disposes of old (SIGKILL, wait up to 1 s as WorkerProcess.Dispose
// does) and starts a new worker. countError records a worker error event
// (exit with an error code, initialization timeout) as opposed to a
// restart (function timeout, exit code 200, Restart).
func (h *Host) replace(old *worker, reason string, countError bool, cause error) {
	h.mu.Lock()
	if h.state != stateRunning || h.cur != old {
		h.mu.Unlock()
		return
	}
	old.disposed.Store(true)
	h.setCurrentLocked(nil)
	gaveUp := countError && h.errorEventLocked(cause)
	h.mu.Unlock()

	old.kill()
	old.waitExit(disposeWait)
	h.transport.CloseIdleConnections()
	if gaveUp {
		return
	}
	h.log.Info("Restarting the handler process", "category", dispatcherLogCategory, "reason", reason, "oldWorkerId", old.id)
	h.mu.Lock()
	if h.state == stateRunning && h.cur == nil {
		h.launchLocked()
	}
	h.mu.Unlock()
}

// Kill sends SIGKILL to the handler process, as a crash or the platform
// would, and returns once the host has applied its exit policy (an error
// event and a restart, or giving up). For tests.
func (h *Host) Kill() error {
	h.mu.Lock()
	w := h.cur
	h.mu.Unlock()
	if w == nil {
		return errors.New("funchost: no handler process")
	}
	if err := w.kill(); err != nil {
		return err
	}
	select {
	case <-w.handled:
	case <-time.After(5 * time.Second):
		return errors.New("funchost: handler did not exit after SIGKILL")
	}
	return nil
}

// Restart kills the handler (SIGKILL) and starts a new one, without
// counting an error, and waits until it is ready.
func (h *Host) Restart(ctx context.Context) error {
	h.mu.Lock()
	w, state := h.cur, h.state
	h.mu.Unlock()
	if state != stateRunning {
		return ErrStopped
	}
	if w != nil {
		h.replace(w, "restart requested", false, nil)
	}
	_, err := h.readyWorker(ctx)
	return err
}

// Stop kills the handler with SIGKILL, as the host does on shutdown (it
// never sends SIGTERM), and waits up to a second for it to exit. It is safe
// to call more than once.
func (h *Host) Stop() error {
	h.mu.Lock()
	w := h.cur
	h.stopLocked(nil)
	h.mu.Unlock()
	if w != nil {
		w.waitExit(disposeWait)
	}
	h.transport.CloseIdleConnections()
	return nil
}

// Interrupt stops the host for a local run: it sends SIGINT to the handler
// so it can shut down gracefully, waits until it exits or ctx ends, then
// kills it. The real host never does this; use Stop to reproduce it.
func (h *Host) Interrupt(ctx context.Context) error {
	h.mu.Lock()
	w := h.cur
	if w != nil {
		w.disposed.Store(true) // its exit is expected: no restart
	}
	h.mu.Unlock()
	var err error
	if w != nil {
		if err = w.interrupt(); err == nil {
			select {
			case <-w.exited:
			case <-ctx.Done():
				err = fmt.Errorf("funchost: handler did not exit after SIGINT: %w", ctx.Err())
			}
		}
	}
	h.Stop()
	return err
}

// OrphanWait bounds how long an overlapping restart (RestartHost) lets the
// old handler finish the invocations it is running before it is killed:
// WebJobsScriptHostService.StopAsync waits at most 10 s for the orphaned
// ScriptHost, then disposing it kills the handler process.
const OrphanWait = 10 * time.Second

// RestartHost restarts the ScriptHost as the host's RestartHostAsync does
// (host src/WebJobs.Script.WebHost/WebJobsScriptHostService.cs: a file
// change, /admin/host/restart, an app-setting change, resume after drain),
// unless SequentialJobHostRestart is set: the new ScriptHost, with a new
// handler process on a new FUNCTIONS_CUSTOMHANDLER_PORT, starts before the
// old one is orphaned. New invocations go to the new handler at once; the
// old one finishes the invocations it is running and is then killed
// (SIGKILL, never SIGTERM), at the latest after OrphanWait. Work the old
// handler does between invocations (a drain handed over between ticks, a
// background catch-up) gets no notice: it dies with the process.
//
// RestartHost returns once the new handler is ready; the old one may still
// be running: the returned channel is closed once it is gone.
func (h *Host) RestartHost(ctx context.Context) (orphaned <-chan struct{}, err error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("funchost: %w", err)
	}
	h.mu.Lock()
	if h.state != stateRunning {
		h.mu.Unlock()
		return nil, ErrStopped
	}
	old := h.cur
	if old != nil {
		// Its exit is expected: no exit policy, no error event.
		old.disposed.Store(true)
	}
	h.port = port
	h.setCurrentLocked(nil)
	h.launchLocked()
	h.mu.Unlock()
	h.log.Info("Restarting the host: the new ScriptHost starts before the old one is orphaned", "category", hostGeneralLogCategory, "handlerPort", port)

	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if old == nil {
			return
		}
		deadline := time.Now().Add(OrphanWait)
		for old.calls.Load() > 0 && time.Now().Before(deadline) {
			select {
			case <-old.exited:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		h.log.Info("Disposing of the orphaned ScriptHost's handler process", "category", dispatcherLogCategory, "workerId", old.id, "invocationsRunning", old.calls.Load())
		old.kill()
		old.waitExit(disposeWait)
	}()
	if _, err := h.readyWorker(ctx); err != nil {
		return gone, err
	}
	return gone, nil
}
