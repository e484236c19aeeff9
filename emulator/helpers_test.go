package emulator

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// fastRetry keeps the SDK's retries short so that tests stay fast.
var fastRetry = azeventhubs.RetryOptions{MaxRetries: 8, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond}

// fakeClock is an injectable clock that tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testLogger logs to stderr when EMULATOR_TEST_LOG is set (e.g. "debug").
func testLogger() *slog.Logger {
	switch os.Getenv("EMULATOR_TEST_LOG") {
	case "":
		return nil
	case "debug":
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

// startServer starts an emulator on a free port; it is closed when the test
// ends.
func startServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	srv, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// prodHubs are the hubs of the acceptance test.
func prodHubs() []HubConfig {
	var hubs []HubConfig
	for i := 1; i <= 5; i++ {
		hubs = append(hubs, HubConfig{Name: "prod.test" + strconv.Itoa(i), PartitionCount: 4})
	}
	return hubs
}

func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newProducer(t testing.TB, connStr, hubName string) *azeventhubs.ProducerClient {
	t.Helper()
	p, err := azeventhubs.NewProducerClientFromConnectionString(connStr, hubName, &azeventhubs.ProducerClientOptions{RetryOptions: fastRetry})
	if err != nil {
		t.Fatalf("NewProducerClient: %v", err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func newConsumer(t testing.TB, connStr, hubName, group string) *azeventhubs.ConsumerClient {
	t.Helper()
	c, err := azeventhubs.NewConsumerClientFromConnectionString(connStr, hubName, group, &azeventhubs.ConsumerClientOptions{RetryOptions: fastRetry})
	if err != nil {
		t.Fatalf("NewConsumerClient: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// sendBatch sends events as one batch with the given options.
func sendBatch(ctx context.Context, t testing.TB, p *azeventhubs.ProducerClient, opts *azeventhubs.EventDataBatchOptions, events ...*azeventhubs.EventData) {
	t.Helper()
	b, err := p.NewEventDataBatch(ctx, opts)
	if err != nil {
		t.Fatalf("NewEventDataBatch: %v", err)
	}
	for i, e := range events {
		if err := b.AddEventData(e, nil); err != nil {
			t.Fatalf("AddEventData %d: %v", i, err)
		}
	}
	if err := p.SendEventDataBatch(ctx, b, nil); err != nil {
		t.Fatalf("SendEventDataBatch: %v", err)
	}
}

// receiveN reads exactly n events from a partition client, failing the test
// if they do not arrive before ctx ends.
func receiveN(ctx context.Context, t testing.TB, pc *azeventhubs.PartitionClient, n int) []*azeventhubs.ReceivedEventData {
	t.Helper()
	var out []*azeventhubs.ReceivedEventData
	for len(out) < n {
		evs, err := pc.ReceiveEvents(ctx, n-len(out), nil)
		out = append(out, evs...)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && len(out) < n {
				t.Fatalf("received %d of %d events: %v", len(out), n, err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ReceiveEvents: %v", err)
			}
		}
	}
	return out
}

// expectNoEvents checks that nothing arrives within d.
func expectNoEvents(t testing.TB, pc *azeventhubs.PartitionClient, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	evs, err := pc.ReceiveEvents(ctx, 1, nil)
	if len(evs) > 0 {
		t.Fatalf("unexpected event seq %d body %q", evs[0].SequenceNumber, evs[0].Body)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReceiveEvents: %v", err)
	}
}

func partitionClient(t testing.TB, c *azeventhubs.ConsumerClient, partition string, opts *azeventhubs.PartitionClientOptions) *azeventhubs.PartitionClient {
	t.Helper()
	pc, err := c.NewPartitionClient(partition, opts)
	if err != nil {
		t.Fatalf("NewPartitionClient: %v", err)
	}
	t.Cleanup(func() { pc.Close(context.Background()) })
	return pc
}

func ptr[T any](v T) *T { return &v }

// waitForLinks waits until at least n attached links satisfy match; the SDK
// attaches links asynchronously, on the first ReceiveEvents.
func waitForLinks(t testing.TB, srv *Server, n int, match func(*link) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		count := 0
		for _, k := range []linkKind{kindProducer, kindConsumer} {
			for _, l := range srv.linksOfKind(k) {
				l.s.mu.Lock()
				ok := l.attached && !l.detachSent && match(l)
				l.s.mu.Unlock()
				if ok {
					count++
				}
			}
		}
		if count >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d matching links attached, want %d", count, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
