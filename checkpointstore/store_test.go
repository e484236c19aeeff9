package checkpointstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"

	"github.com/ehmirror/ehmirror/checkpointstore"
	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/internal/azurite"
)

// TestWriteCheckpointOnAzurite: the checkpoints written are what the
// azeventhubs BlobStore lists (sequence number and offset), under the
// names as given and, for the other SDKs, lower-cased; a second write
// replaces the first.
func TestWriteCheckpointOnAzurite(t *testing.T) {
	conn := azurite.Start(t)
	cc := azurite.NewContainer(t, conn, "checkpoints")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := checkpointstore.New(checkpointstore.Options{ConnectionString: conn, Container: "checkpoints"})
	if err != nil {
		t.Fatal(err)
	}
	names, err := store.WriteCheckpoint(ctx, "ns.servicebus.windows.net", "orders", "$Default", "3", cutover.Checkpoint{Sequence: 41, Offset: "4100"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ns.servicebus.windows.net/orders/$Default/checkpoint/3", "ns.servicebus.windows.net/orders/$default/checkpoint/3"}
	if len(names) != 2 || names[0] != want[0] || names[1] != want[1] {
		t.Fatalf("blobs %q, want %q", names, want)
	}
	if _, err := store.WriteCheckpoint(ctx, "ns.servicebus.windows.net", "orders", "$Default", "3", cutover.Checkpoint{Sequence: 42, Offset: "4200"}); err != nil {
		t.Fatal(err)
	}
	bs, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"$Default", "$default"} {
		cps, err := bs.ListCheckpoints(ctx, "ns.servicebus.windows.net", "orders", group, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) != 1 || cps[0].PartitionID != "3" || *cps[0].SequenceNumber != 42 || *cps[0].Offset != "4200" {
			t.Fatalf("%s: the SDK's store lists %+v, want partition 3 at 42/4200", group, cps)
		}
	}
	names, err = store.WriteCheckpoint(ctx, "ns.servicebus.windows.net", "orders", "app", "0", cutover.Checkpoint{Sequence: -1, Offset: cutover.StartOfStream})
	if err != nil || len(names) != 1 {
		t.Fatalf("lower-case names: %q, %v; want one blob", names, err)
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	for _, o := range []checkpointstore.Options{
		{},
		{ConnectionString: "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/a;"},
		{ContainerURL: "https://a.blob.core.windows.net/c"},
		{ConnectionString: "x", Container: "c", ContainerURL: "https://a.blob.core.windows.net/c"},
	} {
		if _, err := checkpointstore.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
