package funchost

import (
	"context"
	"fmt"
	"time"
)

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
