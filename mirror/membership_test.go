package mirror_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

// groupRequests counts the group requests kfake receives.
type groupRequests struct{ join, sync, leave atomic.Int64 }

func (e *env) countGroupRequests() *groupRequests {
	g := &groupRequests{}
	for key, n := range map[int16]*atomic.Int64{
		int16(kmsg.JoinGroup): &g.join, int16(kmsg.SyncGroup): &g.sync, int16(kmsg.LeaveGroup): &g.leave,
	} {
		e.cluster.ControlKey(key, func(kmsg.Request) (kmsg.Response, error, bool) {
			e.cluster.KeepControl()
			n.Add(1)
			return nil, nil, false
		})
	}
	return g
}

// TestTimerAndCatchUpShareOneMembership: a timer drain that starts while a
// catch-up of the same process is draining works on what the catch-up does
// not hold instead of joining the group again: the group never rebalances
// (one SyncGroup: one member, one generation), nothing is sent twice, and
// the member leaves the group after its idle grace.
func TestTimerAndCatchUpShareOneMembership(t *testing.T) {
	e := newEnv(t)
	var recs []*kgo.Record
	for i := range 20_000 {
		recs = append(recs, &kgo.Record{Topic: seedTopics[i%5], Partition: int32(i / 5 % 4), Value: fmt.Appendf(nil, "%d", i)})
	}
	e.produce(recs...)
	reqs := e.countGroupRequests()
	var logs syncBuffer // the drains' log lines, shown when records were sent twice
	m := e.newMirror(mirror.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	// MaxRecords ends each drain; a deadline reached with sends in flight
	// (a loaded machine) would be an unclean end, at-least-once by design.
	lim := mirror.Limits{MaxDuration: 30 * time.Second, MaxRecords: 1500}
	svc := mirror.NewService(m, lim)
	defer svc.Close()

	st, started, err := svc.StartCatchUp(mirror.CatchUpRequest{MaxDuration: time.Minute})
	if err != nil || !started {
		t.Fatalf("catch-up: %v %v", st, err)
	}
	// Timer drains while the catch-up runs.
	var wg sync.WaitGroup
	timerDrains := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		cu, ok := svc.ActiveCatchUp()
		if !ok {
			break
		}
		if cu.Drains == 0 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		rep, err := svc.Drain(context.Background(), "timer")
		if err != nil {
			t.Fatalf("timer drain: %v", err)
		}
		timerDrains++
		t.Logf("timer drain during catch-up: %s", rep.Summary())
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	cu := svc.CatchUps()[0]
	if cu.State != mirror.CatchUpCaughtUp {
		t.Fatalf("catch-up %+v", cu)
	}
	if timerDrains == 0 {
		t.Fatal("no timer drain ran during the catch-up")
	}
	t.Logf("catch-up: %d drains; %d timer drains beside it; JoinGroup %d, SyncGroup %d, LeaveGroup %d",
		cu.Drains, timerDrains, reqs.join.Load(), reqs.sync.Load(), reqs.leave.Load())
	if n := reqs.sync.Load(); n != 1 {
		t.Errorf("%d SyncGroup requests, want 1 (one member, one generation, no rebalance)", n)
	}
	dups := 0
	for _, topic := range seedTopics {
		for p, n := range e.tally(topic, 4) {
			if n > 1 {
				dups += n - 1
				if dups < 5 {
					t.Errorf("%s sent %d times", p, n)
				}
			}
		}
	}
	if dups > 0 {
		for l := range strings.Lines(logs.String()) {
			t.Log(strings.TrimSuffix(l, "\n"))
		}
		t.Errorf("%d duplicates, want none", dups)
	}
	if reqs.leave.Load() != 0 {
		t.Errorf("member left right after the drains, want it kept for the idle grace")
	}
	// After the idle grace (kafka.DefaultIdleGrace, 5 s) the member leaves.
	end := time.Now()
	for reqs.leave.Load() == 0 && time.Since(end) < 10*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	if reqs.leave.Load() != 1 {
		t.Fatalf("member did not leave the group after its idle grace (%d LeaveGroup)", reqs.leave.Load())
	}
	t.Logf("member left %v after the last drain", time.Since(end).Round(10*time.Millisecond))
}

// TestStuckJoinDoesNotHangADrain: a drain whose JoinGroup or SyncGroup is
// never answered gives up on the join within a third of its budget, reports
// why, and the next drain mirrors everything once the coordinator answers.
func TestStuckJoinDoesNotHangADrain(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup} {
		t.Run(key.Name(), func(t *testing.T) {
			e := newEnv(t)
			e.produce(&kgo.Record{Topic: "prod.test1", Partition: 1, Value: []byte("x")})
			var stuck atomic.Bool
			stuck.Store(true)
			e.cluster.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
				e.cluster.KeepControl()
				return nil, nil, stuck.Load() // handled without an answer: dropped
			})
			m := e.newMirror(mirror.Options{})
			start := time.Now()
			rep, err := m.Drain(context.Background(), "stuck", mirror.Limits{MaxDuration: 9 * time.Second})
			took := time.Since(start)
			t.Logf("drain with a dropped %s: %v after %v", key.Name(), err, took.Round(time.Millisecond))
			if err == nil || !strings.Contains(err.Error(), "join bound") || rep.Stopped != mirror.StopFailed {
				t.Fatalf("drain: %v (%s), want a join bound failure", err, rep.Summary())
			}
			if took > 4*time.Second {
				t.Fatalf("drain took %v of its 9 s budget, want about 3 s", took)
			}
			stuck.Store(false)
			rep = e.drain(m, mirror.Limits{})
			if rep.Records != 1 || rep.Failed() {
				t.Fatalf("next drain: %v", rep.Lines())
			}
		})
	}
}

// TestSharedGenerationNeverStartsBelowAnotherDrainsCommit: two drains of one
// process share a generation, so the coordinator cannot fence one from the
// other. A drain that read its committed offsets while another drain held
// the partitions (here the read answers "nothing committed", as it would
// before that drain's commits) must not take them when the other releases
// them: it would re-send from below the other's final commit and commit
// lower. It reports them busy; the next drain takes them.
func TestSharedGenerationNeverStartsBelowAnotherDrainsCommit(t *testing.T) {
	e := newEnv(t)
	var recs []*kgo.Record
	for i := range 600 {
		recs = append(recs, &kgo.Record{Topic: "prod.test1", Partition: int32(i % 4), Value: fmt.Appendf(nil, "%d", i)})
	}
	e.produce(recs...)
	m := e.newMirror(mirror.Options{InFlightBytes: 4 << 10})
	e.emu.Faults().DelayDispositions(10 * time.Millisecond)

	aDone := make(chan struct{})
	var aRep *mirror.Report
	go func() {
		defer close(aDone)
		aRep, _ = m.Drain(context.Background(), "a", mirror.Limits{MaxDuration: 20 * time.Second})
	}()
	time.Sleep(500 * time.Millisecond) // a holds every partition and is sending
	var armed atomic.Bool
	armed.Store(true)
	e.cluster.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if !armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		// b's read, answered with what was committed before a's commits
		// (nothing), delivered once a has finished.
		r := req.(*kmsg.OffsetFetchRequest)
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition = p
				sp.Offset = -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		e.cluster.SleepControl(func() { <-aDone })
		return resp, nil, true
	})
	bRep, err := m.Drain(context.Background(), "b", mirror.Limits{MaxDuration: 20 * time.Second})
	<-aDone
	if err != nil {
		t.Fatalf("b: %v", err)
	}
	t.Logf("a: %s", aRep.Summary())
	t.Logf("b: %s", bRep.Summary())
	// The next drain finishes whatever a left.
	e.emu.Faults().Reset()
	e.drain(m, mirror.Limits{})
	dups := 0
	for p, n := range e.tally("prod.test1", 4) {
		if n > 1 {
			dups += n - 1
			if dups < 4 {
				t.Errorf("%s sent %d times", p, n)
			}
		}
	}
	if dups > 0 || bRep.Records > 0 {
		t.Errorf("b sent %d records from offsets read before a's commits: %d duplicates", bRep.Records, dups)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
