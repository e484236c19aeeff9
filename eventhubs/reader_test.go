package eventhubs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestReaderAgainstEmulator: LastSequence, ReadAfter (exclusive start, up
// to and including until) and CheckListen through the real SDK; a policy
// without Listen is refused with mirror.ErrUnauthorized; the Listen check
// of a partition holding an event answers at once.
func TestReaderAgainstEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu := startEmulator(ctx, t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", PartitionCount: 2}},
		Policies: []emulator.Policy{{Name: "sender", Key: "c2VuZGVy", Rights: []string{emulator.RightSend}}}})
	sink := newSink(t, emu.ConnectionString())
	if seq, err := sink.LastSequence(ctx, "orders", "0"); err != nil || seq != -1 {
		t.Fatalf("empty partition: %d, %v", seq, err)
	}
	b, err := sink.NewBatch(ctx, "orders", "0")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := b.Add(&mirror.Event{Body: []byte{byte('a' + i)}, MessageID: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Send(ctx, b); err != nil {
		t.Fatal(err)
	}
	last, err := sink.LastSequence(ctx, "orders", "0")
	if err != nil || last != 4 {
		t.Fatalf("last sequence %d, %v", last, err)
	}
	var got []string
	if err := sink.ReadAfter(ctx, "orders", "0", 1, 3, func(ev mirror.StoredEvent) { got = append(got, ev.MessageID) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "c" || got[1] != "d" {
		t.Fatalf("read %v, want [c d] (after 1, up to 3)", got)
	}
	start := time.Now()
	if err := sink.CheckListen(ctx, "orders", "0", last); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("Listen check of a partition holding an event took %v", took)
	}

	sender := newSink(t, "Endpoint=sb://"+emu.Addr()+";SharedAccessKeyName=sender;SharedAccessKey=c2VuZGVy;UseDevelopmentEmulator=true")
	if err := sender.CheckListen(ctx, "orders", "0", last); !errors.Is(err, mirror.ErrUnauthorized) {
		t.Fatalf("check without Listen: %v", err)
	}
	if err := sender.ReadAfter(ctx, "orders", "0", -1, last, func(mirror.StoredEvent) {}); !errors.Is(err, mirror.ErrUnauthorized) {
		t.Fatalf("read without Listen: %v", err)
	}
}
