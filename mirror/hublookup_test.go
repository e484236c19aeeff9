package mirror_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// A drain of 100 topics one-to-one into 100 hubs it has never seen sends
// its first record within 5 s of its start (issue 48), though each hub's
// properties take 50 ms to read (a service in another region): the hubs are
// looked up concurrently, within the service's quota of management calls,
// rather than one after the other (5 s of properties alone). A second
// drain finds them cached.
func TestFirstSendWithAHundredHubs(t *testing.T) {
	if testing.Short() {
		t.Skip("100 hubs")
	}
	const n = 100
	names := make([]string, n)
	hubs := make([]emulator.HubConfig, n)
	for i := range names {
		names[i] = fmt.Sprintf("orders-%03d", i)
		hubs[i] = emulator.HubConfig{Name: names[i], PartitionCount: 2}
	}
	e := newBareEnv(t, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, names...)}, hubs)
	emu := e.emu
	emu.Faults().DelayManagement(50 * time.Millisecond)
	m := e.newMirror(mirror.Options{})
	for round := range 2 {
		for _, name := range names {
			e.produce(&kgo.Record{Topic: name, Value: []byte("v")})
		}
		stored := emu.Stats().EventsStored
		start := time.Now()
		first := make(chan time.Duration, 1)
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				if emu.Stats().EventsStored > stored {
					first <- time.Since(start)
					return
				}
			}
		}()
		rep := e.drain(m, mirror.Limits{MaxDuration: time.Minute})
		close(stop)
		if rep.Failed() || rep.Records != n || !rep.CaughtUp() {
			t.Fatalf("round %d: drain: %s", round, rep.Summary())
		}
		var took time.Duration
		select {
		case took = <-first:
		default:
			t.Fatalf("round %d: no event stored", round)
		}
		t.Logf("round %d: first record stored %s after the drain's start; %s", round, took.Round(time.Millisecond), rep.Summary())
		if took > 5*time.Second {
			t.Errorf("round %d: the first record was stored %s after the drain's start, want at most 5 s with %d hubs", round, took.Round(time.Millisecond), n)
		}
	}
}
