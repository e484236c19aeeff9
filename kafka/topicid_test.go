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
