package kafka

import (
	"testing"
	"time"
)

// TestTopicIDs lists topics with their ids through the raw Metadata v12
// exchange, and shows that a topic deleted and created again under the same
// name gets a new id.
func TestTopicIDs(t *testing.T) {
	c := newCluster(t)
	s := newTestSource(t, c.ListenAddrs(), "ids")
	ctx := ctxT(t, 20*time.Second)
	ids := func() map[string]string {
		t.Helper()
		ts, err := s.Topics(ctx)
		if err != nil {
			t.Fatalf("Topics: %v", err)
		}
		out := map[string]string{}
		for _, tp := range ts {
			if tp.Partitions != 3 {
				t.Errorf("%s: %d partitions, want 3", tp.Name, tp.Partitions)
			}
			out[tp.Name] = tp.ID
		}
		return out
	}
	before := ids()
	for _, name := range testTopics {
		if len(before[name]) != 32 {
			t.Fatalf("%s: topic id %q, want 32 hex digits", name, before[name])
		}
	}
	if again := ids(); again[testTopics[0]] != before[testTopics[0]] {
		t.Fatalf("topic id changed without a recreation: %s -> %s", before[testTopics[0]], again[testTopics[0]])
	}
	if err := c.DeleteTopic(testTopics[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(testTopics[0], 3, nil); err != nil {
		t.Fatal(err)
	}
	after := ids()
	if after[testTopics[0]] == "" || after[testTopics[0]] == before[testTopics[0]] {
		t.Fatalf("recreated topic: id %q, before %q; want a new id", after[testTopics[0]], before[testTopics[0]])
	}
	if after[testTopics[1]] != before[testTopics[1]] {
		t.Fatalf("untouched topic changed id")
	}
}

// TestDescribeTopics lists the named topics alone, with the ids Topics
// reports; a topic that does not exist is left out and not created, and one
// deleted is gone from the next listing.
func TestDescribeTopics(t *testing.T) {
	c := newCluster(t)
	s := newTestSource(t, c.ListenAddrs(), "describe")
	ctx := ctxT(t, 20*time.Second)
	all, err := s.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, tp := range all {
		ids[tp.Name] = tp.ID
	}
	got, err := s.DescribeTopics(ctx, []string{testTopics[1], "no-such-topic"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != testTopics[1] || got[0].Partitions != 3 || got[0].ID != ids[testTopics[1]] {
		t.Fatalf("DescribeTopics(%s, no-such-topic) = %+v, want %s alone with 3 partitions and id %s", testTopics[1], got, testTopics[1], ids[testTopics[1]])
	}
	if err := c.DeleteTopic(testTopics[1]); err != nil {
		t.Fatal(err)
	}
	if got, err = s.DescribeTopics(ctx, []string{testTopics[1]}); err != nil || len(got) != 0 {
		t.Fatalf("DescribeTopics of a deleted topic = %+v, %v; want nothing", got, err)
	}
	if all, err = s.Topics(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tp := range all {
		if tp.Name == "no-such-topic" {
			t.Fatal("describing a topic that does not exist created it")
		}
	}
}
