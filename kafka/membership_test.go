package kafka

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// countRequests counts the requests of key kfake receives.
func countRequests(c *kfake.Cluster, key kmsg.Key) *atomic.Int64 {
	n := &atomic.Int64{}
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return n
}

// TestConcurrentClaimsShareTheMember: claims made in one process while
// another is held share its member and generation (no second JoinGroup, no
// rebalance), a narrower claim too; after the last release the member stays
// IdleGrace, then leaves.
func TestConcurrentClaimsShareTheMember(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	syncs, leaves := countRequests(c, kmsg.SyncGroup), countRequests(c, kmsg.LeaveGroup)
	const grace = 1500 * time.Millisecond
	s := newTestSource(t, c.ListenAddrs(), "g-share", func(o *Options) { o.IdleGrace = grace })
	ctx := ctxT(t, 20*time.Second)

	c1, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c2, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second claim in the process took %v", time.Since(start))
	c3, err := s.Claim(ctx, testTopics[:1])
	if err != nil {
		t.Fatal(err)
	}
	g1, g2, g3 := c1.(*claim).g.gen, c2.(*claim).g.gen, c3.(*claim).g.gen
	if g1.ID != g2.ID || g1.MemberID != g2.MemberID || g1.ID != g3.ID || g1.MemberID != g3.MemberID {
		t.Fatalf("claims on generations %d/%s, %d/%s, %d/%s: want one member, one generation", g1.ID, g1.MemberID, g2.ID, g2.MemberID, g3.ID, g3.MemberID)
	}
	if n1, n2, n3 := len(c1.Assigned()), len(c2.Assigned()), len(c3.Assigned()); n1 != 6 || n2 != 6 || n3 != 3 {
		t.Fatalf("assigned %d, %d, %d partitions, want 6, 6 and the 3 of %s", n1, n2, n3, testTopics[0])
	}
	for tp := range c3.Assigned() {
		if tp.Topic != testTopics[0] {
			t.Fatalf("narrow claim got %s", tp)
		}
	}
	select {
	case <-c1.Lost():
		t.Fatal("first claim lost: the group rebalanced")
	case <-time.After(1200 * time.Millisecond): // > 2 heartbeats
	}
	if n := syncs.Load(); n != 1 {
		t.Fatalf("%d SyncGroup requests, want 1", n)
	}

	// Released claims are lost; the member stays while one is held.
	if err := c1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitLost(t, c1, time.Second)
	if err := c2.Commit(ctx, map[mirror.TopicPartition]int64{{Topic: testTopics[0], Partition: 0}: 3}); err != nil {
		t.Fatalf("commit on a claim sharing the member after another was released: %v", err)
	}
	_ = c2.Release(ctx)
	_ = c3.Release(ctx)
	released := time.Now()
	time.Sleep(grace / 2)
	if n := leaves.Load(); n != 0 {
		t.Fatalf("member left %v after the last release, want it kept for %v", time.Since(released), grace)
	}
	// A claim within the grace takes the member over without a join.
	c4, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	if c4.(*claim).g.gen.ID != g1.ID || syncs.Load() != 1 {
		t.Fatalf("claim within the grace: generation %d, %d SyncGroups; want %d and 1", c4.(*claim).g.gen.ID, syncs.Load(), g1.ID)
	}
	_ = c4.Release(ctx)
	released = time.Now()
	for leaves.Load() == 0 && time.Since(released) < grace+5*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(released)
	if leaves.Load() != 1 || took < grace {
		t.Fatalf("%d LeaveGroup %v after the last release, want 1 after the grace %v", leaves.Load(), took, grace)
	}
	t.Logf("idle member left %v after the last release (grace %v)", took.Round(time.Millisecond), grace)
}

// TestIdleMemberLeavesWhenAnotherJoins: a member kept for its idle grace
// leaves as soon as its generation ends, so a process that starts draining
// gets every partition after one rebalance instead of waiting the grace.
func TestIdleMemberLeavesWhenAnotherJoins(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	long := func(o *Options) { o.IdleGrace = time.Minute }
	s1 := newTestSource(t, c.ListenAddrs(), "g-idle-join", long)
	s2 := newTestSource(t, c.ListenAddrs(), "g-idle-join", long)
	ctx := ctxT(t, 20*time.Second)
	c1, err := s1.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	_ = c1.Release(ctx)
	start := time.Now()
	for time.Since(start) < 10*time.Second {
		c2, err := s2.Claim(ctx, testTopics)
		if err != nil {
			t.Fatal(err)
		}
		n := len(c2.Assigned())
		if n == 6 {
			t.Logf("second process owns everything %v after joining", time.Since(start).Round(time.Millisecond))
			_ = c2.Release(ctx)
			return
		}
		waitLost(t, c2, 5*time.Second)
		_ = c2.Release(ctx)
	}
	t.Fatal("the idle member kept partitions")
}

// TestJoinIsBounded: a JoinGroup the coordinator never answers, or answers
// late, fails the Claim within the join bound (a third of the caller's
// remaining time here), leaving the caller most of its budget, and the next
// Claim joins normally once the coordinator answers again.
func TestJoinIsBounded(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"dropped", "slow"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			var faulty atomic.Bool
			faulty.Store(true)
			stop := make(chan struct{})
			t.Cleanup(func() { close(stop) }) // before c.Close (cleanups run last first)
			c.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if !faulty.Load() {
					return nil, nil, false
				}
				if fault == "dropped" {
					return nil, nil, true // never answered
				}
				c.SleepControl(func() {
					select {
					case <-time.After(40 * time.Second):
					case <-stop:
					}
				})
				return nil, nil, false
			})
			s := newTestSource(t, c.ListenAddrs(), "g-join-"+fault)
			// A drain's work deadline 6 s away: the join bound is 2 s.
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			defer cancel()
			start := time.Now()
			_, err := s.Claim(ctx, testTopics)
			took := time.Since(start)
			t.Logf("claim with a %s JoinGroup: %v after %v", fault, err, took.Round(time.Millisecond))
			if err == nil || !strings.Contains(err.Error(), "join bound") {
				t.Fatalf("claim: %v, want a join bound error", err)
			}
			if took > 3*time.Second || ctx.Err() != nil {
				t.Fatalf("claim took %v of the 6 s budget, want about 2 s", took)
			}
			faulty.Store(false)
			start = time.Now()
			cl, err := s.Claim(ctxT(t, 15*time.Second), testTopics)
			if err != nil {
				t.Fatalf("claim after the coordinator recovered: %v", err)
			}
			t.Logf("next claim joined in %v with %d partitions", time.Since(start).Round(time.Millisecond), len(cl.Assigned()))
			_ = cl.Release(context.Background())
		})
	}
}

// TestUnknownCommitOutcomeEndsTheGeneration: after a commit whose outcome is
// unknown (the coordinator never answered), the member takes no new claim
// and leaves as soon as the claim is released, without the idle grace, so
// the coordinator fences the late request; the next claim joins anew.
func TestUnknownCommitOutcomeEndsTheGeneration(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	leaves := countRequests(c, kmsg.LeaveGroup)
	var drop atomic.Bool
	c.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, drop.Load() // handled without an answer: dropped
	})
	s := newTestSource(t, c.ListenAddrs(), "g-unknown", func(o *Options) { o.IdleGrace = time.Minute })
	ctx := ctxT(t, 20*time.Second)
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	tp := mirror.TopicPartition{Topic: testTopics[0], Partition: 0}
	if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{tp: 1}); err != nil {
		t.Fatal(err)
	}
	drop.Store(true)
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	err = cl.Commit(cctx, map[mirror.TopicPartition]int64{tp: 2})
	cancel()
	if err == nil {
		t.Fatal("commit without an answer succeeded")
	}
	drop.Store(false)
	start := time.Now()
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := leaves.Load(); n != 1 {
		t.Fatalf("%d LeaveGroup right after the release (%v), want 1: no idle grace after an unknown commit outcome", n, time.Since(start))
	}
	next, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if g0, g1 := cl.(*claim).g.gen, next.(*claim).g.gen; g0.MemberID == g1.MemberID {
		t.Fatalf("next claim on the same member %s (generation %d, then %d)", g0.MemberID, g0.ID, g1.ID)
	}
}

// TestUnansweredHeartbeatsEndTheClaimBeforeTheSessionExpires: when a
// member's heartbeats stop being answered (its link to the coordinator hangs
// while its fetches and the hub still work), its claim ends before the
// coordinator expires its session and hands its partitions to another
// process, so a drain that stops publishing at Claim.Lost never publishes
// after the new owner took over (the zombie window of issue 12).
func TestUnansweredHeartbeatsEndTheClaimBeforeTheSessionExpires(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var held atomic.Value // member id whose heartbeats get no answer
	held.Store("")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	// A's heartbeats and its rejoin get no answer: its link to the
	// coordinator hangs. A held request is never answered, and kfake then
	// reads nothing more on that connection, which is what a hung link
	// looks like to a client. (Not SleepControl: kfake races on a request
	// that queued behind a sleeping one and then sleeps itself.)
	for _, key := range []kmsg.Key{kmsg.Heartbeat, kmsg.JoinGroup} {
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			var member string
			switch r := req.(type) {
			case *kmsg.HeartbeatRequest:
				member = r.MemberID
			case *kmsg.JoinGroupRequest:
				member = r.MemberID
			}
			if id := held.Load().(string); id != "" && member == id {
				return nil, nil, true
			}
			return nil, nil, false
		})
	}
	a := newTestSource(t, c.ListenAddrs(), "g-zombie")
	b := newTestSource(t, c.ListenAddrs(), "g-zombie")
	ctx := ctxT(t, 40*time.Second)
	ca, err := a.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Release(ctx)
	held.Store(ca.(*claim).g.gen.MemberID)
	heldAt := time.Now()

	var lostAfter atomic.Int64
	go func() {
		select {
		case <-ca.Lost():
			lostAfter.Store(int64(time.Since(heldAt)))
		case <-release:
		}
	}()
	// B's join starts a rebalance A never hears of; it completes once the
	// coordinator expired A's session.
	cb, err := b.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release(ctx)
	tookOver := time.Since(heldAt)
	lost := time.Duration(lostAfter.Load())
	if lost == 0 || lost >= tookOver {
		t.Fatalf("A's claim ended %v after its heartbeats went unanswered (0: not yet), B took its partitions after %v: A could publish after B took over", lost, tookOver)
	}
	t.Logf("A's claim ended %v after its heartbeats went unanswered, %v before B took over (session %v); B owns %d partitions",
		lost.Round(time.Millisecond), (tookOver - lost).Round(time.Millisecond), DefaultSessionTimeout, len(cb.Assigned()))
}

// TestRebalanceWaitsForTheLostClaim: when another process joins, the member
// whose claim was lost does not rejoin until that claim is released (as a
// drain releases it once its sends on the wire are over), so the other
// process cannot be given those partitions before; until then the lost
// claim's commits are still taken, and the other process starts from them.
func TestRebalanceWaitsForTheLostClaim(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := newTestSource(t, c.ListenAddrs(), "g-settle")
	b := newTestSource(t, c.ListenAddrs(), "g-settle")
	ctx := ctxT(t, 30*time.Second)
	ca, err := a.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	type joined struct {
		c  mirror.Claim
		at time.Time
	}
	bJoined := make(chan joined, 1)
	go func() {
		cb, err := b.Claim(ctx, testTopics)
		if err != nil {
			t.Error(err)
		}
		bJoined <- joined{cb, time.Now()}
	}()
	waitLost(t, ca, 10*time.Second)
	time.Sleep(time.Second) // the lost claim's drain winds down
	offsets := map[mirror.TopicPartition]int64{}
	for tp := range ca.Assigned() {
		offsets[tp] = 7
	}
	if err := ca.Commit(ctx, offsets); err != nil {
		t.Fatalf("commit after Lost, before the release: %v", err)
	}
	released := time.Now()
	if err := ca.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ca.Commit(ctx, offsets); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("commit after the release: %v, want ErrClaimLost", err)
	}
	j := <-bJoined
	if j.c == nil {
		return
	}
	defer j.c.Release(ctx)
	if j.at.Before(released) {
		t.Fatalf("B was given partitions %v before A released its lost claim", released.Sub(j.at))
	}
	if len(j.c.Assigned()) == 0 {
		t.Fatal("B owns nothing")
	}
	for tp, off := range j.c.Assigned() {
		if off != 7 {
			t.Errorf("B starts %s at %d, want 7 (A's commit after Lost)", tp, off)
		}
	}
	t.Logf("B joined %v after A released its lost claim; owns %d partitions from A's last commit", j.at.Sub(released).Round(time.Millisecond), len(j.c.Assigned()))
}
