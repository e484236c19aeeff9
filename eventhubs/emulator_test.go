package eventhubs_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
)

// startEmulator starts the project's Event Hubs emulator with cfg on a
// free loopback port, closed when the test ends.
func startEmulator(ctx context.Context, t *testing.T, cfg emulator.Config) *emulator.Server {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	emu, err := emulator.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	return emu
}

// newSink returns a sink on the connection string conn, closed when the
// test ends.
func newSink(t *testing.T, conn string) *eventhubs.Sink {
	t.Helper()
	s, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: conn, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}
