package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/mirror"
)

func TestClaimNewGroupCommitAndReclaim(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	s := newTestSource(t, c.ListenAddrs(), "g-commit")
	ctx := ctxT(t, 20*time.Second)

	start := time.Now()
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claim on a new group took %v", time.Since(start))
	got := cl.Assigned()
	if want := allPartitions(3, testTopics...); len(got) != len(want) {
		t.Fatalf("assigned %v, want all of %v", sortedTPs(got), want)
	}
	for tp, off := range got {
		if off != mirror.NoOffset {
			t.Errorf("%s: offset %d, want NoOffset", tp, off)
		}
	}

	commit := map[mirror.TopicPartition]int64{
		{Topic: "prod.test1", Partition: 0}: 10,
		{Topic: "prod.test2", Partition: 2}: 7,
	}
	if err := cl.Commit(ctx, commit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Committing a partition the claim does not own is refused locally.
	if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{{Topic: "other", Partition: 0}: 1}); err == nil {
		t.Fatal("commit of a foreign partition succeeded")
	}

	start = time.Now()
	if err := cl.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	t.Logf("release took %v", time.Since(start))
	if err := cl.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	select {
	case <-cl.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("Lost not closed after Release")
	}
	if err := cl.Commit(ctx, commit); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("commit after release: %v, want ErrClaimLost", err)
	}

	start = time.Now()
	cl2, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("re-claim after release took %v", time.Since(start))
	defer cl2.Release(ctx)
	for tp, off := range cl2.Assigned() {
		want := mirror.NoOffset
		if o, ok := commit[tp]; ok {
			want = o
		}
		if off != want {
			t.Errorf("%s: assigned offset %d, want %d", tp, off, want)
		}
	}

	committed, err := s.Committed(ctx, allPartitions(3, testTopics...))
	if err != nil {
		t.Fatal(err)
	}
	for tp, off := range committed {
		want := mirror.NoOffset
		if o, ok := commit[tp]; ok {
			want = o
		}
		if off != want {
			t.Errorf("Committed %s = %d, want %d", tp, off, want)
		}
	}
}

// TestSecondMemberFencesFirst is the anti-regression scenario: a second
// process joins while the first holds a claim.
func TestSecondMemberFencesFirst(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	// A short idle grace: the lost member stays to be re-claimed, and a
	// released one leaves soon. The lost claim is never released here, so
	// the first member rejoins when its settle bound (half the rebalance
	// timeout, 1 s) passes, before its idle grace.
	grace := func(o *Options) { o.IdleGrace = 1500 * time.Millisecond; o.RebalanceTimeout = 2 * time.Second }
	s1 := newTestSource(t, addrs, "g-fence", grace)
	s2 := newTestSource(t, addrs, "g-fence", grace)
	ctx := ctxT(t, 30*time.Second)
	all := allPartitions(3, testTopics...)

	c1, err := s1.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	if len(c1.Assigned()) != len(all) {
		t.Fatalf("first member got %d partitions, want %d", len(c1.Assigned()), len(all))
	}
	base := map[mirror.TopicPartition]int64{}
	for _, tp := range all {
		base[tp] = 100
	}
	if err := c1.Commit(ctx, base); err != nil {
		t.Fatal(err)
	}

	type result struct {
		c   mirror.Claim
		err error
		d   time.Duration
	}
	joined := make(chan result, 1)
	start := time.Now()
	go func() {
		c2, err := s2.Claim(ctx, testTopics)
		joined <- result{c2, err, time.Since(start)}
	}()
	lostAfter := waitLost(t, c1, 10*time.Second)
	t.Logf("first claim lost %v after the second member started joining", lostAfter)
	r := <-joined
	if r.err != nil {
		t.Fatal(r.err)
	}
	c2 := r.c
	t.Logf("second member's claim took %v", r.d)
	a2 := c2.Assigned()
	if len(a2) == 0 || len(a2) == len(all) {
		t.Fatalf("second member got %d of %d partitions, want a split", len(a2), len(all))
	}
	for tp, off := range a2 {
		if off != 100 {
			t.Errorf("second member sees %s at %d, want 100", tp, off)
		}
	}

	// The stale claim must not move offsets back, neither through the
	// local check nor, bypassing it, through the coordinator.
	stale := map[mirror.TopicPartition]int64{}
	for tp := range a2 {
		stale[tp] = 5
	}
	if err := c1.Commit(ctx, stale); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("stale commit: %v, want ErrClaimLost", err)
	}
	err = c1.(*claim).commit(ctx, withoutMetadata(stale))
	if !errors.Is(err, ErrClaimLost) || !errors.Is(err, kafkago.IllegalGeneration) {
		t.Fatalf("stale commit sent to the coordinator: %v, want ILLEGAL_GENERATION", err)
	}
	t.Logf("coordinator fenced the stale commit: %v", err)
	committed, err := s2.Committed(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	for tp, off := range committed {
		if off != 100 {
			t.Errorf("after stale commit %s = %d, want 100", tp, off)
		}
	}

	// The first process claims again: it takes the generation its member
	// already joined, the complement of the second's, without a rebalance.
	start = time.Now()
	c1b, err := s1.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("re-claim of the already rejoined member took %v", time.Since(start))
	a1 := c1b.Assigned()
	if len(a1)+len(a2) != len(all) {
		t.Fatalf("split %d + %d, want %d", len(a1), len(a2), len(all))
	}
	for tp := range a1 {
		if _, dup := a2[tp]; dup {
			t.Fatalf("%s owned by both members", tp)
		}
	}
	// The old claim's Release is a no-op now that a new claim owns the member.
	if err := c1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c1b.Lost():
		t.Fatal("releasing the superseded claim ended the new one")
	case <-c2.Lost():
		t.Fatal("second member lost its claim without a membership change")
	case <-time.After(1200 * time.Millisecond): // > 2 heartbeats
	}
	if err := c1b.Commit(ctx, map[mirror.TopicPartition]int64{sortedTPs(a1)[0]: 101}); err != nil {
		t.Fatalf("commit on the new claim: %v", err)
	}

	// Releasing the first member makes the second lose its generation.
	start = time.Now()
	if err := c1b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("release took %v", time.Since(start))
	d := waitLost(t, c2, 5*time.Second)
	t.Logf("second claim lost %v after the first member left", d)
	c2b, err := s2.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c2b.Assigned()); n != len(all) {
		t.Fatalf("after the first left the second owns %d, want %d", n, len(all))
	}
	start = time.Now()
	if err := c2b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("release took %v", time.Since(start))
}

// TestLostClaimLeavesWhenIdle: a lost claim nobody re-claims or releases
// leaves the group after IdleGrace, so the other member gets everything.
func TestLostClaimLeavesWhenIdle(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.GroupMinSessionTimeout(time.Second))
	addrs := c.ListenAddrs()
	short := func(o *Options) {
		o.SessionTimeout = 2 * time.Second
		o.HeartbeatInterval = 200 * time.Millisecond
		o.IdleGrace = 2 * time.Second
	}
	s1 := newTestSource(t, addrs, "g-idle", short)
	s2 := newTestSource(t, addrs, "g-idle", short)
	ctx := ctxT(t, 20*time.Second)
	c1, err := s1.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	// s2's join ends c1's generation; s1 waits for c1's release before it
	// rejoins (see settle), and leaves after IdleGrace since nobody uses
	// it, so s2 ends up owning everything (at once, or after one split
	// generation when the settle bound passed first).
	start := time.Now()
	c2, err := s2.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	waitLost(t, c1, 5*time.Second)
	for len(c2.Assigned()) != 6 {
		waitLost(t, c2, 10*time.Second)
		_ = c2.Release(ctx)
		if c2, err = s2.Claim(ctx, testTopics); err != nil {
			t.Fatal(err)
		}
	}
	defer c2.Release(ctx)
	t.Logf("idle member left; the second owns every partition %v after it joined", time.Since(start))
	if err := c1.Release(ctx); err != nil {
		t.Fatalf("release of an already-left claim: %v", err)
	}
}

func TestClaimContextAndClose(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	s := newTestSource(t, c.ListenAddrs(), "g-close")
	ctx := ctxT(t, 10*time.Second)
	if _, err := s.Claim(ctx, nil); err == nil {
		t.Fatal("claim without topics succeeded")
	}
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Source.Close with a held claim took %v", time.Since(start))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cl.Lost():
	default:
		t.Fatal("claim not lost after Close")
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatalf("release after close: %v", err)
	}
	if _, err := s.Claim(ctx, testTopics); !errors.Is(err, ErrClosed) {
		t.Fatalf("claim after close: %v", err)
	}
	if _, err := s.Topics(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("topics after close: %v", err)
	}
	// The group is empty again: a new member gets everything at once.
	s2 := newTestSource(t, c.ListenAddrs(), "g-close")
	start = time.Now()
	cl2, err := s2.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claim after the previous member closed took %v", time.Since(start))
	if len(cl2.Assigned()) != 6 {
		t.Fatalf("got %d partitions", len(cl2.Assigned()))
	}
	_ = cl2.Release(ctx)
}

func TestClaimCancelled(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	s1 := newTestSource(t, addrs, "g-cancel")
	s2 := newTestSource(t, addrs, "g-cancel")
	ctx := ctxT(t, 60*time.Second)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s1.Claim(cctx, testTopics); !errors.Is(err, context.Canceled) {
		t.Fatalf("claim with cancelled ctx: %v", err)
	}
	held, err := s1.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	// s2's join waits for s1's next heartbeat (500 ms); give up before.
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s2.Claim(tctx, testTopics); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim with a short deadline: %v", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("claim gave up after %v", d)
	}
	// The abandoned member finishes its join in the background and leaves;
	// the group settles back to s1 alone.
	waitLost(t, held, 5*time.Second)
	_ = held.Release(ctx) // as a drain does when its claim is lost; s1 rejoins then (see settle)
	// If the abandoned member does not leave in time, the coordinator
	// waits for its session (6 s) before s1's join completes: on a loaded
	// machine a join may then exceed its bound, which is not the failure
	// this test looks for.
	deadline := time.Now().Add(20 * time.Second)
	for {
		cl, err := s1.Claim(ctx, testTopics)
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			t.Logf("join not complete yet: %v", err)
			continue
		}
		stable := len(cl.Assigned()) == 6
		if stable {
			select {
			case <-cl.Lost():
				stable = false
			case <-time.After(1200 * time.Millisecond):
			}
		}
		if stable {
			t.Logf("group settled %v after the abandoned claim", time.Since(start))
			_ = cl.Release(ctx)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group did not settle: %d partitions", len(cl.Assigned()))
		}
		<-cl.Lost()
	}
}

// TestCommittedOfAGroupThatNeverCommitted: an unknown group has nothing
// committed; that is not an error (the status page asks before any drain).
func TestCommittedOfAGroupThatNeverCommitted(t *testing.T) {
	c := newCluster(t)
	s := newTestSource(t, c.ListenAddrs(), "never-joined")
	tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 0}
	got, err := s.Committed(context.Background(), []mirror.TopicPartition{tp})
	if err != nil || got[tp] != mirror.NoOffset {
		t.Fatalf("Committed = %v, %v; want NoOffset, nil", got, err)
	}
}

func withoutMetadata(offsets map[mirror.TopicPartition]int64) map[mirror.TopicPartition]mirror.CommitOffset {
	out := make(map[mirror.TopicPartition]mirror.CommitOffset, len(offsets))
	for tp, o := range offsets {
		out[tp] = mirror.CommitOffset{Offset: o}
	}
	return out
}
