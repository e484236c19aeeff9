package eventhubs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestSendErrorsAreClassified: the service's refusals reach the mirror as
// the mirror errors that say what to do, through the real SDK and the
// emulator's service-shaped answers.
func TestSendErrorsAreClassified(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu, err := emulator.Start(ctx, emulator.Config{Listen: "127.0.0.1:0", Hubs: []emulator.HubConfig{{Name: "orders", PartitionCount: 4}}})
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: emu.ConnectionString(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close(context.Background()) })

	send := func(hub, partition string) error {
		b, err := sink.NewBatch(ctx, hub, partition)
		if err != nil {
			return err
		}
		if err := b.Add(&mirror.Event{Body: []byte("x")}); err != nil {
			return err
		}
		return sink.Send(ctx, b)
	}
	if err := send("orders", "0"); err != nil {
		t.Fatalf("send to an existing partition: %v", err)
	}
	for _, tc := range []struct{ hub, partition string }{
		{"orders", "9"},  // com.microsoft:argument-out-of-range
		{"missing", "0"}, // amqp:not-found
	} {
		err := send(tc.hub, tc.partition)
		if !errors.Is(err, mirror.ErrHubNotFound) {
			t.Errorf("send to %s/%s: %v, want mirror.ErrHubNotFound", tc.hub, tc.partition, err)
		}
	}
}
