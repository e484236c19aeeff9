package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/go-amqp"
)

// lockedBuffer is a bytes.Buffer safe for the command's writes and the
// test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestThroughputUnitsFlagThrottles: with -throughput-units 1 and a
// one-hour period, a batch beyond the unit's 1,000 events is refused with
// server-busy, and the throttled request is logged.
func TestThroughputUnitsFlagThrottles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, commandPath, "-listen", "127.0.0.1:0", "-throughput-units", "1", "-quota-period", "1h", "-stats-interval", "100ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (stderr %s)", err, stderr.String())
	}
	p, err := azeventhubs.NewProducerClientFromConnectionString(strings.TrimSpace(line), "prod.test1", &azeventhubs.ProducerClientOptions{RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	send := func(n int) error {
		b, err := p.NewEventDataBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := b.AddEventData(&azeventhubs.EventData{Body: []byte("x")}, nil); err != nil {
				t.Fatal(err)
			}
		}
		return p.SendEventDataBatch(ctx, b, nil)
	}
	if err := send(1001); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	var ae *amqp.Error
	if err := send(1); !errors.As(err, &ae) || ae.Condition != "com.microsoft:server-busy" {
		t.Fatalf("second batch: %v, want server-busy", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "throttled_requests=1") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	logs := stderr.String()
	if !strings.Contains(logs, "quota=\"1 TU: 1048576 bytes or 1000 events per 1h0m0s\"") || strings.Count(logs, "msg=ingress throttled_requests=1 events_stored=1001") != 2 {
		t.Fatalf("want the quota and the throttled request logged while running and at shutdown:\n%s", logs)
	}
}
