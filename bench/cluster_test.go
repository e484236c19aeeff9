package bench

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"
)

// TestClusterCaseMeasuresTheHandler runs a cluster-sized case's machinery
// at CI size (one topic of 60 partitions into one hub, a small backlog, a
// short idle follow) with the real handler under funchost: every figure
// the case reports is measured, none depends on the machine's speed.
func TestClusterCaseMeasuresTheHandler(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the function app")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, err := Config{OutDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	l := ClusterLayout{Name: "1x60", Topics: []string{"prod.wide"}, Partitions: 60, Hubs: []string{"prod.wide"}, HubPartitions: 4}
	rs, err := runCluster(ctx, cfg, ClusterConfig{Layouts: []ClusterLayout{l}, PerPartition: 20, Idle: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	t.Logf("%+v", r)
	if r.Records != 1200 || r.CatchUpSeconds <= 0 || r.MBPerSecond() <= 0 {
		t.Errorf("records %d in %v s", r.Records, r.CatchUpSeconds)
	}
	if r.FirstSentSeconds <= 0 || r.FirstSentSeconds > r.CatchUpSeconds {
		t.Errorf("first record sent after %v s of a %v s catch-up", r.FirstSentSeconds, r.CatchUpSeconds)
	}
	if r.PeakRSS <= 0 || r.IdleRSS <= 0 || r.InFlightBytes <= 0 {
		t.Errorf("peak RSS %d, idle RSS %d, in-flight bound %d", r.PeakRSS, r.IdleRSS, r.InFlightBytes)
	}
	if r.Brokers != 1 || r.KafkaConnsCatchUp < 1 || r.KafkaConnsIdle < 1 || r.KafkaConnsIdleEnd < 1 || r.KafkaConnsIdleEnd > r.KafkaConnsIdle || r.IdleRequestsPerSec <= 0 || r.IdleSeconds < 3 {
		t.Errorf("Kafka: %d brokers, connections %d catching up and %d idle, %v requests/s over %v s idle", r.Brokers, r.KafkaConnsCatchUp, r.KafkaConnsIdle, r.IdleRequestsPerSec, r.IdleSeconds)
	}
	// Follow mode: one invocation follows until the next minute's tick,
	// so a few seconds take one or two.
	if r.EventHubsConns < 1 || r.Invocations < 1 || r.Invocations > 3 {
		t.Errorf("%d Event Hubs connections, %d invocations", r.EventHubsConns, r.Invocations)
	}
	if got := len(clusterTargets(rs, 0)); got != 6 {
		t.Errorf("%d target lines, want 6", got)
	}
}
