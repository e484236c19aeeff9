package emulator

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/ehmirror/ehmirror/partitionkey"
)

// TestDataDirKeepsEventsAcrossRestarts: with a data directory, events,
// sequence numbers, offsets, enqueued times and partition keys survive a
// restart, and numbering continues where it stopped.
func TestDataDirKeepsEventsAcrossRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hubs := []HubConfig{{Name: "Persisted", PartitionCount: 2}, {Name: "other", PartitionCount: 1}}
	ctx := testContext(t, 30*time.Second)

	first, err := Start(ctx, Config{Listen: "127.0.0.1:0", AcceptAnyToken: true, Hubs: hubs, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, first.ConnectionString(), "Persisted")
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")},
		&azeventhubs.EventData{Body: []byte("a"), Properties: map[string]any{"n": int64(1)}}, &azeventhubs.EventData{Body: []byte("b")})
	key := "k0"
	for i := 1; partitionkey.Partition(key, 2) != 1; i++ {
		key = "k" + strconv.Itoa(i)
	}
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionKey: &key}, &azeventhubs.EventData{Body: []byte("keyed")})
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, &azeventhubs.EventData{Body: []byte("c")})
	before := [][]StoredEvent{first.Events("Persisted", 0), first.Events("Persisted", 1)}
	p.Close(ctx)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := startServer(t, Config{AcceptAnyToken: true, Hubs: hubs, DataDir: dir})
	for part := range 2 {
		after := second.Events("Persisted", part)
		if len(after) != len(before[part]) {
			t.Fatalf("partition %d: %d events after the restart, %d before", part, len(after), len(before[part]))
		}
		for i := range after {
			a, b := after[i], before[part][i]
			if a.SequenceNumber != b.SequenceNumber || a.Offset != b.Offset || !a.EnqueuedTime.Equal(b.EnqueuedTime) ||
				a.PartitionKey != b.PartitionKey || string(a.Message) != string(b.Message) {
				t.Fatalf("partition %d event %d: after %+v, before %+v", part, i, a, b)
			}
		}
	}
	// The SDK reads them back and new events continue the numbering.
	p2 := newProducer(t, second.ConnectionString(), "Persisted")
	sendBatch(ctx, t, p2, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, &azeventhubs.EventData{Body: []byte("d")})
	pc := partitionClient(t, newConsumer(t, second.ConnectionString(), "Persisted", azeventhubs.DefaultConsumerGroup), "0",
		&azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	got := receiveN(ctx, t, pc, 4)
	for i, want := range []string{"a", "b", "c", "d"} {
		if string(got[i].Body) != want || got[i].SequenceNumber != int64(i) {
			t.Fatalf("event %d: %q seq %d", i, got[i].Body, got[i].SequenceNumber)
		}
	}
	if got[0].Properties["n"] != int64(1) {
		t.Fatalf("properties %v", got[0].Properties)
	}
	props, err := p2.GetPartitionProperties(ctx, "0", nil)
	if err != nil || props.LastEnqueuedSequenceNumber != 3 {
		t.Fatalf("partition properties %+v, %v", props, err)
	}
}

// TestDataDirTornTailAndBadFile: a record cut off by a kill is dropped (the
// events before it are kept); a file that is not a log stops Start with an
// error naming it.
func TestDataDirTornTailAndBadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hubs := []HubConfig{{Name: "h", PartitionCount: 1}}
	ctx := testContext(t, 30*time.Second)
	first := startServer(t, Config{AcceptAnyToken: true, Hubs: hubs, DataDir: dir})
	sendBatch(ctx, t, newProducer(t, first.ConnectionString(), "h"), nil, &azeventhubs.EventData{Body: []byte("whole")})
	first.Close()
	path := logPath(dir, "h", 0)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 1, 0, 1, 2, 3}) // a torn record: length 256, 3 bytes
	f.Close()
	second := startServer(t, Config{AcceptAnyToken: true, Hubs: hubs, DataDir: dir})
	if evs := second.Events("h", 0); len(evs) != 1 || string(evs[0].Body) != "whole" {
		t.Fatalf("after a torn tail: %+v", evs)
	}
	sendBatch(ctx, t, newProducer(t, second.ConnectionString(), "h"), nil, &azeventhubs.EventData{Body: []byte("next")})
	second.Close()
	third := startServer(t, Config{AcceptAnyToken: true, Hubs: hubs, DataDir: dir})
	if evs := third.Events("h", 0); len(evs) != 2 || string(evs[1].Body) != "next" || evs[1].SequenceNumber != 1 {
		t.Fatalf("after appending past a cut tail: %+v", evs)
	}
	third.Close()

	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "0.log"), []byte("garbage that is not a log"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Start(ctx, Config{Listen: "127.0.0.1:0", Hubs: hubs, DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "bad header") {
		t.Fatalf("Start with a bad log: %v", err)
	}
}

// TestDataDirDropsExpiredEventsButKeepsNumbering: events past retention are
// dropped from the files at load; sequence numbers and offsets continue.
func TestDataDirDropsExpiredEventsButKeepsNumbering(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := newFakeClock()
	hubs := []HubConfig{{Name: "h", PartitionCount: 1, Retention: time.Hour}}
	ctx := testContext(t, 30*time.Second)
	first := startServer(t, Config{AcceptAnyToken: true, Hubs: hubs, DataDir: dir, Now: clock.Now})
	sendBatch(ctx, t, newProducer(t, first.ConnectionString(), "h"), nil, &azeventhubs.EventData{Body: []byte("old")}, &azeventhubs.EventData{Body: []byte("old2")})
	last := first.Events("h", 0)[1]
	first.Close()
	clock.Advance(2 * time.Hour)
	second := startServer(t, Config{AcceptAnyToken: true, Hubs: hubs, DataDir: dir, Now: clock.Now})
	if evs := second.Events("h", 0); len(evs) != 0 {
		t.Fatalf("expired events kept: %+v", evs)
	}
	sendBatch(ctx, t, newProducer(t, second.ConnectionString(), "h"), nil, &azeventhubs.EventData{Body: []byte("new")})
	evs := second.Events("h", 0)
	if len(evs) != 1 {
		t.Fatalf("after expiry and one send: %+v", evs)
	}
	newOff, _ := strconv.ParseInt(evs[0].Offset, 10, 64)
	lastOff, _ := strconv.ParseInt(last.Offset, 10, 64)
	if len(evs) != 1 || evs[0].SequenceNumber != 2 || newOff <= lastOff {
		t.Fatalf("numbering after expiry: %+v (last before: seq %d offset %s)", evs, last.SequenceNumber, last.Offset)
	}
}
