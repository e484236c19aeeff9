package emulator

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/internal/npmci"
	"github.com/ehmirror/ehmirror/partitionkey"
)

// jsClientResult is what testdata/jsclient/client.mjs prints.
type jsClientResult struct {
	PartitionIDs       []string `json:"partitionIds"`
	PartitionIDsCall   []string `json:"partitionIdsCall"`
	EmptyBefore        bool     `json:"emptyBefore"`
	LastSequenceNumber int64    `json:"lastSequenceNumber"`
	Received           []struct {
		Body           string `json:"body"`
		Origin         string `json:"origin"`
		SequenceNumber int64  `json:"sequenceNumber"`
		Offset         string `json:"offset"`
	} `json:"received"`
	LastEnqueued struct {
		SequenceNumber *int64  `json:"sequenceNumber"`
		Offset         *string `json:"offset"`
		EnqueuedOn     *string `json:"enqueuedOn"`
		RetrievedOn    *string `json:"retrievedOn"`
	} `json:"lastEnqueued"`
}

// installJSClient installs the pinned @azure/event-hubs
// (testdata/jsclient/package-lock.json) and returns the directory with
// client.mjs beside its node_modules.
func installJSClient(t *testing.T) string {
	t.Helper()
	dir, err := npmci.Install(context.Background(), filepath.Join("testdata", "jsclient"), "jsclient",
		filepath.Join("node_modules", "@azure", "event-hubs", "package.json"))
	if err != nil {
		t.Fatalf("TestJavaScriptSDK: %v", err)
	}
	return dir
}

// TestJavaScriptSDK runs Microsoft's JavaScript SDK (@azure/event-hubs 6.0.4
// on the rhea AMQP library, not go-amqp) against the emulator with SAS
// checks on: CBS, management (hub and partition properties), sends to a
// partition and by partition key, and a receive with last-enqueued-event
// tracking (receiver runtime metrics).
func TestJavaScriptSDK(t *testing.T) {
	t.Parallel()
	dir := installJSClient(t)
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 90*time.Second)
	cmd := exec.CommandContext(ctx, "node", "client.mjs", srv.ConnectionString(), "prod.test1")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var res jsClientResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	want := []string{"0", "1", "2", "3"}
	if !slices.Equal(res.PartitionIDs, want) || !slices.Equal(res.PartitionIDsCall, want) || !res.EmptyBefore || res.LastSequenceNumber != 2 {
		t.Fatalf("management results: %+v", res)
	}
	if len(res.Received) != 3 {
		t.Fatalf("received %+v", res.Received)
	}
	stored := srv.Events("prod.test1", 1)
	for i, ev := range res.Received {
		if ev.Body != "js-"+string(rune('1'+i)) || ev.Origin != "js" || ev.SequenceNumber != int64(i) || ev.Offset != stored[i].Offset {
			t.Fatalf("event %d: %+v, stored offset %s", i, ev, stored[i].Offset)
		}
	}
	le := res.LastEnqueued
	if le.SequenceNumber == nil || *le.SequenceNumber != 2 || le.Offset == nil || *le.Offset != stored[2].Offset || le.EnqueuedOn == nil || le.RetrievedOn == nil {
		t.Fatalf("lastEnqueuedEventProperties %+v", le)
	}
	// The JavaScript SDK sends a string body JSON-encoded in a data section.
	keyed := srv.Events("prod.test1", partitionkey.Partition("js-key", 4))
	if len(keyed) != 1 || string(keyed[0].Body) != `"js-keyed"` || keyed[0].PartitionKey != "js-key" {
		t.Fatalf("keyed event not in the partition of its key: %+v", keyed)
	}
}
