package eventhubs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestSendErrorsAreClassified: the service's refusals reach the mirror as
// the mirror errors that say what to do, through the real SDK and the
// emulator's service-shaped answers.
func TestSendErrorsAreClassified(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu := startEmulator(ctx, t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", PartitionCount: 4}}})
	sink := newSink(t, emu.ConnectionString())

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

// TestQuotaRefusalIsThrottledAndNotRetried: a send over the namespace's
// quota reaches the mirror at once as mirror.ErrThrottled (the SDK makes
// one attempt per send, so the mirror's own retry handles server-busy),
// and nothing of it is stored.
func TestQuotaRefusalIsThrottledAndNotRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 5 events per hour: a first batch of 6 leaves the namespace in debt.
	emu := startEmulator(ctx, t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", PartitionCount: 4}},
		Quota: emulator.Quota{ThroughputUnits: 1, IngressEventsPerUnit: 5, Period: time.Hour}})
	sink := newSink(t, emu.ConnectionString())
	send := func(n int) error {
		b, err := sink.NewBatch(ctx, "orders", "1")
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := b.Add(&mirror.Event{Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		return sink.Send(ctx, b)
	}
	if err := send(6); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	start := time.Now()
	err := send(1)
	if !errors.Is(err, mirror.ErrThrottled) {
		t.Fatalf("send over the quota: %v, want mirror.ErrThrottled", err)
	}
	// The SDK's own retry would wait its RetryDelay (200 ms here, 4 s by
	// default) before a second attempt.
	if st := emu.Stats(); st.ThrottledRequests != 1 || st.EventsStored != 6 {
		t.Fatalf("after %s: %d throttled requests, %d events stored; want 1 (one attempt) and 6", time.Since(start), st.ThrottledRequests, st.EventsStored)
	}
}
