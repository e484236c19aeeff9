package metrics

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// newService is a mirror service over kfake and the emulator, with one
// topic of 2 partitions holding n records and its hub.
func newService(t *testing.T, n int) *mirror.Service {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "prod.m"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	emu, err := emulator.Start(context.Background(), emulator.Config{Listen: "127.0.0.1:0", Hubs: []emulator.HubConfig{{Name: "prod.m", PartitionCount: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "prod.m", Partition: int32(i % 2), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	logger := slog.New(slog.DiscardHandler)
	src, err := kafka.NewSource(kafka.Options{Brokers: cluster.ListenAddrs(), Group: "metrics-" + t.Name(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: emu.ConnectionString(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	m, err := mirror.New(src, sink, mirror.Options{Logger: logger, CommitInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	svc := mirror.NewService(m, mirror.Limits{MaxDuration: 30 * time.Second})
	t.Cleanup(svc.Close)
	return svc
}

// The Prometheus text carries what a drain did and the lag per partition;
// without OTEL_EXPORTER_OTLP_* nothing is pushed.
func TestPrometheusText(t *testing.T) {
	svc := newService(t, 10)
	m, err := New(context.Background(), svc, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	if m.OTLP {
		t.Error("OTLP on without configuration")
	}
	var before strings.Builder
	if err := m.WritePrometheus(&before); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`ehmirror_lag{hub="prod.m",partition="0",paused="false",topic="prod.m"} 5`, `ehmirror_backlog_age_seconds{`} {
		if !strings.Contains(before.String(), want) {
			t.Errorf("before the drain, the text lacks %q:\n%s", want, before.String())
		}
	}
	if strings.Contains(before.String(), "ehmirror_last_delivered_seconds{") {
		t.Errorf("a delivery time before anything was delivered:\n%s", before.String())
	}
	if _, err := svc.Drain(context.Background(), "timer"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lagMaxAge) // the lag reading is renewed
	var after strings.Builder
	if err := m.WritePrometheus(&after); err != nil {
		t.Fatal(err)
	}
	text := after.String()
	for _, want := range []string{
		"ehmirror_records_total 10", "ehmirror_latency_seconds_count{trigger=\"timer\"} 10", `ehmirror_drain_duration_seconds_count{stopped="caught up",trigger="timer"} 1`,
		`ehmirror_drain_budget_used_count{trigger="timer"} 1`, `ehmirror_lag{hub="prod.m",partition="1",paused="false",topic="prod.m"} 0`, "ehmirror_bytes_total 10",
		`ehmirror_last_delivered_seconds{hub="prod.m",partition="0",paused="false",topic="prod.m"} 1.`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("after the drain, the text lacks %q:\n%s", want, text)
		}
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, metrics are pushed to the
// collector over http/protobuf.
func TestOTLPPush(t *testing.T) {
	var posts atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/metrics" && len(body) > 0 && r.Header.Get("Content-Type") == "application/x-protobuf" {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	svc := newService(t, 4)
	m, err := New(context.Background(), svc, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	if !m.OTLP {
		t.Fatal("OTLP not configured by OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if _, err := svc.Drain(context.Background(), "timer"); err != nil {
		t.Fatal(err)
	}
	if err := m.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Error("nothing reached the collector")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := New(context.Background(), svc, os.Getenv); err == nil || !strings.Contains(err.Error(), "http/protobuf") {
		t.Errorf("grpc protocol: %v", err)
	}
}
