package main

import (
	"github.com/ehmirror/ehmirror/functions/appbuild"

	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/scripts/produce/randmsg"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// TestDemoMirrorsAndVerifies runs the demo end to end on fewer messages:
// kfake and the emulator, the real handler binary built and started through
// the local Functions host, timer runs and a catch-up until the lag is 0,
// and the verification, which must find every record once and in order.
func TestDemoMirrorsAndVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the handler and runs the whole demo")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	oc, err := run(ctx, options{count: 2000, partitions: 4, maxRecords: 500, catchUpAfter: 2, seed: 7}, &out)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	tot := oc.report.Total()
	if !oc.report.OK() || tot.KafkaRecords != 2000 || tot.Events != 2000 || tot.Missing != 0 || tot.Duplicates != 0 || tot.OrderViolations != 0 || tot.Lag != 0 {
		t.Fatalf("report %+v: want 2000 records mirrored once, in order, lag 0", tot)
	}
	for _, want := range []string{
		"Topic: prod.test", "MirrorTimer #1:", "MirrorTimer #2:", "POST /api/catchup: run", "caught up", "GET /api/status: lag 0",
		"mirrored/s", "OK: 2000 Kafka records, 2000 Event Hubs events, 0 missing, 0 duplicates, order kept",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := strings.Count(out.String(), "Topic: prod.test"); n != 5 {
		t.Errorf("printed %d seed-style lines, want the first 5", n)
	}
}

// TestVerifyStepFailsOnAnUnmirroredCopy runs the demo's verification step
// on records nobody mirrored: it must fail, so the demo exits non-zero.
func TestVerifyStepFailsOnAnUnmirroredCopy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics := randmsg.TopicNames(randmsg.DefaultTopicBase, randmsg.DefaultTopics)
	loc, err := startLocal(ctx, topics, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.close()
	if _, err := randmsg.Produce(ctx, kafkaconn.Config{Brokers: loc.kafka.ListenAddrs()}, randmsg.Options{Count: 100, Keys: 5}); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	root, err := appbuild.ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := loadSettings(filepath.Join(root, "local.settings.json.example"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := verifyCopy(ctx, loc, kafkaconn.Config{Brokers: loc.kafka.ListenAddrs()}, settings, &printer{w: &out})
	if err != nil {
		t.Fatal(err)
	}
	if tot := rep.Total(); rep.OK() || tot.Missing != 100 {
		t.Fatalf("want a failure with 100 missing, got %+v: %s", tot, rep.Verdict())
	}
}
