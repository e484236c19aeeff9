package faults

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/mirror"
)

// BUG (fixed by the lead with the commit guard in mirror/drain.go; kept as a
// regression test; TestBugTopicRecreatedDuringCommit is the window the guard
// leaves open): TestBugTopicRecreatedWhileAcksOutstanding deletes and recreates a topic
// while a drain waits for Event Hubs to acknowledge records of the old
// incarnation, then produces into the new incarnation. When the
// acknowledgements arrive, the drain commits the old incarnation's offset
// (200) onto the new incarnation (Kafka accepts it: OffsetCommit names
// topics, not topic ids). The next drain starts at 200 of the new
// incarnation and commits past it: its records 0..199 are never mirrored,
// and nothing is reported. (When the new incarnation is still shorter than
// the stale offset, the default gap policy fails the partition instead and
// the topic stops being mirrored until an operator steps in.)
func TestBugTopicRecreatedWhileAcksOutstanding(t *testing.T) {
	const topic = "prod.f1"
	e := newEnv(t, envConfig{Topics: []string{topic}, Partitions: 1, HubPartitions: 1})
	ctx := context.Background()
	p := e.newProducer(producerConfig{})
	m := e.newMirror(mirror.Options{})

	p.produce(ctx, 100)
	if rep, err := e.runDrain(ctx, m, "first", mirror.Limits{MaxDuration: 10 * time.Second}); err != nil || rep.Failed() {
		t.Fatalf("first drain: %v %v", err, rep)
	}
	p.produce(ctx, 100) // offsets 100..199 of the old incarnation
	old, err := e.readKafka(ctx, []string{topic}, 0)
	if err != nil {
		t.Fatal(err)
	}

	// Event Hubs stores the next batches at once but acknowledges them
	// 1.5 s later.
	e.emu.Faults().DelayDispositions(1500 * time.Millisecond)
	stored := e.emu.Stats().EventsStored
	done := make(chan *mirror.Report, 1)
	go func() {
		rep, err := e.runDrain(ctx, m, "during", mirror.Limits{MaxDuration: 10 * time.Second})
		if err != nil {
			t.Errorf("drain: %v", err)
		}
		done <- rep
	}()
	for e.emu.Stats().EventsStored == stored {
		time.Sleep(5 * time.Millisecond)
	}
	e.mon.pause(topic)
	var derr error
	e.withKafka(func(c *kfake.Cluster) {
		if derr = c.DeleteTopic(topic); derr == nil {
			derr = c.CreateTopic(topic, 1, nil)
		}
	})
	if derr != nil {
		t.Fatal(derr)
	}
	e.mon.resume(topic)
	// A fresh client: franz-go keeps the deleted topic's id otherwise.
	fresh := e.newProducer(producerConfig{Tag: "new"})
	fresh.produce(ctx, 300) // offsets 0..299 of the new incarnation
	if n := fresh.acked.Load(); n != 300 {
		t.Fatalf("only %d of 300 records produced into the new incarnation", n)
	}
	rep := <-done
	e.emu.Faults().Reset()
	if rep != nil {
		t.Logf("drain during the recreation: %v", rep.Lines())
	}
	after, _ := e.offsets()
	t.Logf("group's commit on the new incarnation after that drain: %+v", after)

	for range 3 {
		rep, err := e.runDrain(ctx, m, "after", mirror.Limits{MaxDuration: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("after: %v", rep.Lines())
	}
	current, err := e.readKafka(ctx, []string{topic}, 1)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: append(old, current...)})
	_, regressions := e.mon.result()
	t.Logf("produced %d, mirrored %d, lost %d, duplicates %d, regressions %v", v.Produced, v.Mirrored, v.Lost, v.Duplicates, regressions)
	for _, ex := range v.Examples {
		t.Log(ex)
	}
	if v.Lost > 0 {
		t.Errorf("%d records of the new incarnation lost: the old incarnation's offset was committed onto it", v.Lost)
	}
}
