package mirror_test

// The model's fault operations: a process killed, commits whose outcome the
// mirror cannot know, and Event Hubs refusing, acknowledging late, cutting
// connections or detaching links (model_test.go draws them).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"pgregory.net/rapid"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// kill is a process dying after it sent: its commits after the first few
// are cut, and it is replaced by a new process.
func (md *model) kill(rt *rapid.T) {
	i, p := md.proc(rt)
	rep, err := md.drainThenKill(i, p, rapid.IntRange(1, 3).Draw(rt, "commits before the kill"), "model-killed")
	md.logf("kill p%d after: %s", i, summary(rep, err))
}

// drainThenKill drains with process i, p, letting its first commits
// through and cutting the rest, then replaces it with a new process.
func (md *model) drainThenKill(i int, p *modelProc, commits int, name string) (*mirror.Report, error) {
	md.gate.allow.Store(int32(commits))
	md.gate.closed.Store(true)
	rep, err := p.m.Drain(context.Background(), name, mirror.Limits{MaxDuration: 8 * time.Second})
	p.close()
	md.gate.open()
	md.procs[i] = md.newProc()
	return rep, err
}

// commitsUnanswered makes the group coordinator apply the next commits
// but answer them REQUEST_TIMED_OUT, as a broker that timed out waiting for
// its replicas does: commits whose outcome the mirror cannot know. With
// "then killed" drawn, the process dies after them (its later commits
// cut), so the last commit that took effect is one it never saw succeed.
func (md *model) commitsUnanswered(rt *rapid.T) {
	md.produce(rt) // something to commit
	n := rapid.IntRange(1, 4).Draw(rt, "commits answered timed out")
	h := md.e.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: md.e.group, Err: kerr.RequestTimedOut, Count: n})
	defer h.Remove()
	i, p := md.proc(rt)
	if !rapid.Bool().Draw(rt, "then killed") {
		rep, err := p.svc.Drain(context.Background(), "model-unanswered")
		md.checkHealth(rt, p, rep)
		md.logf("%d commits unanswered, drain p%d: %s (%d hit)", n, i, summary(rep, err), h.Hits())
		return
	}
	rep, err := md.drainThenKill(i, p, rapid.IntRange(1, n).Draw(rt, "commits before the kill"), "model-unanswered-killed")
	md.logf("%d commits unanswered, kill p%d after: %s (%d hit)", n, i, summary(rep, err), h.Hits())
}

// throttle makes Event Hubs refuse the next sends as server-busy, then
// drains.
func (md *model) throttle(rt *rapid.T) {
	n := rapid.IntRange(1, 6).Draw(rt, "refused sends")
	md.e.emu.Faults().RejectSends(n, "com.microsoft:server-busy")
	i, p := md.proc(rt)
	rep, err := p.svc.Drain(context.Background(), "model-throttled")
	md.e.emu.Faults().Reset()
	md.logf("throttle %d, drain p%d: %s", n, i, summary(rep, err))
}

// ackLate delays Event Hubs' acknowledgements (the events are stored at
// once) past a short drain's deadline: its last sends end with an unknown
// outcome, which the next drain must settle without loss (and, with
// deduplication, without a second copy).
func (md *model) ackLate(rt *rapid.T) {
	delay := time.Duration(rapid.IntRange(100, 1500).Draw(rt, "ack delay ms")) * time.Millisecond
	md.e.emu.Faults().DelayDispositions(delay)
	i, p := md.proc(rt)
	rep, err := p.m.Drain(context.Background(), "model-ack-late", mirror.Limits{MaxDuration: time.Second})
	md.e.emu.Faults().Reset()
	md.logf("acks %v late, drain p%d: %s", delay, i, summary(rep, err))
}

// cutConnections cuts the next deliveries' connections in the middle of a
// batch (nothing of the batch is stored). Without deduplication only; with
// it, a connection lost with a batch on the wire is one of the windows the
// README states (the SDK's quick resend after a link error).
func (md *model) cutConnections(rt *rapid.T) {
	if md.opts.Deduplicate {
		return
	}
	n := rapid.IntRange(1, 3).Draw(rt, "cut deliveries")
	md.e.emu.Faults().DropNextTransfers(n)
	i, p := md.proc(rt)
	rep, err := p.svc.Drain(context.Background(), "model-cut")
	md.e.emu.Faults().Reset()
	md.logf("cut %d connections, drain p%d: %s", n, i, summary(rep, err))
}

// detachLinks detaches every producer link in the middle of a drain.
// Without deduplication only: the SDK's quick resend after a detached link
// is one of the windows the README states.
func (md *model) detachLinks(rt *rapid.T) {
	if md.opts.Deduplicate {
		return
	}
	i, p := md.proc(rt)
	done := make(chan string, 1)
	go func() {
		rep, err := p.svc.Drain(context.Background(), "model-detached")
		done <- summary(rep, err)
	}()
	time.Sleep(time.Duration(rapid.IntRange(0, 300).Draw(rt, "detach after ms")) * time.Millisecond)
	n := md.e.emu.Faults().DetachProducers(emulator.ConditionDetachForced, "model: link detached")
	md.logf("detach %d producer links during a drain of p%d: %s", n, i, <-done)
}
