package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a concurrency-safe output that cancels when a line appears.
type syncBuffer struct {
	mu     sync.Mutex
	b      strings.Builder
	when   string
	cancel context.CancelFunc
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if strings.Contains(s.b.String(), s.when) {
		s.cancel()
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDevEnvStartsSeedsAndStops runs the dev environment on free ports,
// seeds it, and stops it as Ctrl-C would once it is running.
func TestDevEnvStartsSeedsAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := &syncBuffer{when: "Press Ctrl-C", cancel: cancel}
	if err := run(ctx, []string{"-kafka", "127.0.0.1:0", "-eventhubs", "127.0.0.1:0", "-produce", "50"}, out); err != nil {
		t.Fatalf("devenv: %v\n%s", err, out)
	}
	for _, want := range []string{`"KAFKA_BROKERS": "127.0.0.1:`, `"EVENTHUBS": "Endpoint=sb://127.0.0.1:`, "Topic: prod.test", "Produced 50 messages", "Stopped Kafka and the Event Hubs emulator."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
