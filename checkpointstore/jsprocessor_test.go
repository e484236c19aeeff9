package checkpointstore_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/cutover/filter"
	"github.com/ehmirror/ehmirror/internal/npmci"
)

// installJSProcessor installs the pinned JavaScript SDK with its Blob
// checkpoint store (testdata/jsprocessor/package-lock.json) and returns the
// directory with processor.mjs beside its node_modules.
func installJSProcessor(t *testing.T) string {
	t.Helper()
	dir, err := npmci.Install(context.Background(), filepath.Join("testdata", "jsprocessor"), "jsprocessor",
		filepath.Join("node_modules", "@azure", "eventhubs-checkpointstore-blob", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// receiveWithJavaScript runs processor.mjs on hub with the Blob checkpoint
// store in container and returns what it received.
// The README's JavaScript filter runs on every event with the
// watermarks; its verdict must be the Go filter's.
func receiveWithJavaScript(ctx context.Context, t *testing.T, dir, conn, hub, storage, container string, want int64, watermarks []cutover.Watermark, f *filter.Filter) []receivedEvent {
	t.Helper()
	wm, err := json.Marshal(watermarks)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "processor.mjs", conn, hub, storage, container, strconv.FormatInt(want, 10), string(wm))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node processor.mjs %s: %v\nstderr: %s", hub, err, stderr.String())
	}
	var res struct {
		Received []struct {
			Partition      string  `json:"partition"`
			SequenceNumber int64   `json:"sequenceNumber"`
			Topic          *string `json:"topic"`
			KafkaPartition *int64  `json:"kafkaPartition"`
			KafkaOffset    *int64  `json:"kafkaOffset"`
			Dropped        bool    `json:"dropped"`
		} `json:"received"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("processor.mjs output %q: %v", out, err)
	}
	if len(res.Errors) > 0 {
		t.Errorf("the JavaScript processor on %s reported errors: %q", hub, res.Errors)
	}
	evs := make([]receivedEvent, 0, len(res.Received))
	for _, r := range res.Received {
		props := map[string]any{}
		if r.Topic != nil && r.KafkaPartition != nil && r.KafkaOffset != nil {
			props = map[string]any{"kafka.topic": *r.Topic, "kafka.partition": *r.KafkaPartition, "kafka.offset": *r.KafkaOffset}
		}
		if r.Dropped != f.Processed(props) {
			t.Errorf("hub %s: the README's JavaScript filter says dropped=%v for %v, the Go filter %v", hub, r.Dropped, props, !r.Dropped)
		}
		evs = append(evs, receivedEvent{partition: r.Partition, sequence: r.SequenceNumber, props: props})
	}
	if int64(len(evs)) != want {
		t.Errorf("hub %s: the JavaScript processor received %d events, the cut-over plans %d", hub, len(evs), want)
	}
	return evs
}
