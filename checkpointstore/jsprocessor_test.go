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
// The JavaScript filter of docs/cutover.md runs on every event with the
// watermarks; its verdict must be the Go filter's.
func receiveWithJavaScript(ctx context.Context, t *testing.T, dir, conn, hub, storage, container string, want int64, watermarks []cutover.Watermark, f *filter.Filter) []receivedEvent {
	t.Helper()
	wm, err := json.Marshal(watermarks)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "processor.mjs", conn, hub, storage, container, strconv.FormatInt(want, 10), string(wm))
	cmd.Dir = dir
	return receiveWithCommand(t, "JavaScript", cmd, hub, want, f)
}

// receiveWithCommand runs a processor of another SDK (processor.mjs,
// processor.py) and returns what it received, as it printed it. The
// filter of docs/cutover.md in that language runs on every event with the
// watermarks; its verdict must be the Go filter's.
func receiveWithCommand(t *testing.T, sdk string, cmd *exec.Cmd, hub string, want int64, f *filter.Filter) []receivedEvent {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the %s processor on %s: %v\nstderr: %s", sdk, hub, err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("the %s processor on %s: %s", sdk, hub, stderr.String())
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
		t.Fatalf("the %s processor's output %q: %v", sdk, out, err)
	}
	if len(res.Errors) > 0 {
		t.Errorf("the %s processor on %s reported errors: %q", sdk, hub, res.Errors)
	}
	evs := make([]receivedEvent, 0, len(res.Received))
	for _, r := range res.Received {
		props := map[string]any{}
		if r.Topic != nil && r.KafkaPartition != nil && r.KafkaOffset != nil {
			props = map[string]any{"kafka.topic": *r.Topic, "kafka.partition": *r.KafkaPartition, "kafka.offset": *r.KafkaOffset}
		}
		if r.Dropped != f.Processed(props) {
			t.Errorf("hub %s: the %s filter of docs/cutover.md says dropped=%v for %v, the Go filter %v", hub, sdk, r.Dropped, props, !r.Dropped)
		}
		evs = append(evs, receivedEvent{partition: r.Partition, sequence: r.SequenceNumber, props: props})
	}
	if int64(len(evs)) != want {
		t.Errorf("hub %s: the %s processor received %d events, the cut-over plans %d", hub, sdk, len(evs), want)
	}
	return evs
}
