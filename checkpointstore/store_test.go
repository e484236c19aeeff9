package checkpointstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehmirror/ehmirror/checkpointstore"
	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/internal/azurite"
)

// TestWriteCheckpointOnAzurite: the checkpoints written are what the
// azeventhubs BlobStore lists (sequence number and offset), under the
// names as given and, for the other SDKs, lower-cased; a second write
// replaces the first.
func TestWriteCheckpointOnAzurite(t *testing.T) {
	cc, store := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	write := func(group, partition string, cp cutover.Checkpoint) ([]string, error) {
		t.Helper()
		stored, err := store.ReadCheckpoint(ctx, "ns.servicebus.windows.net", "orders", group, partition)
		if err != nil {
			t.Fatal(err)
		}
		return store.WriteCheckpoint(ctx, stored, cp)
	}
	names, err := write("$Default", "3", cutover.Checkpoint{Sequence: 41, Offset: "4100"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ns.servicebus.windows.net/orders/$Default/checkpoint/3", "ns.servicebus.windows.net/orders/$default/checkpoint/3"}
	if len(names) != 2 || names[0] != want[0] || names[1] != want[1] {
		t.Fatalf("blobs %q, want %q", names, want)
	}
	if _, err := write("$Default", "3", cutover.Checkpoint{Sequence: 42, Offset: "4200"}); err != nil {
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
	names, err = write("app", "0", cutover.Checkpoint{Sequence: -1, Offset: cutover.StartOfStream})
	if err != nil || len(names) != 1 {
		t.Fatalf("lower-case names: %q, %v; want one blob", names, err)
	}
}

// TestWriteCheckpointNeverOverwritesAConcurrentOne: a processor (the
// azeventhubs BlobStore) checkpoints between the store's read and its
// write, of an existing blob and of a new one: the write fails with
// ErrCheckpointChanged and the processor's checkpoint stays.
func TestWriteCheckpointNeverOverwritesAConcurrentOne(t *testing.T) {
	cc, store := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bs, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	processor := func(partition string, seq int64) {
		t.Helper()
		off := fmt.Sprint(seq * 100)
		if err := bs.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: "ns", EventHubName: "orders", ConsumerGroup: "app",
			PartitionID: partition, SequenceNumber: &seq, Offset: &off}, nil); err != nil {
			t.Fatal(err)
		}
	}
	processor("0", 10)
	for _, partition := range []string{"0", "1"} {
		stored, err := store.ReadCheckpoint(ctx, "ns", "orders", "app", partition)
		if err != nil {
			t.Fatal(err)
		}
		processor(partition, 20)
		_, err = store.WriteCheckpoint(ctx, stored, cutover.Checkpoint{Sequence: 5, Offset: "500"})
		if !errors.Is(err, cutover.ErrCheckpointChanged) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("partition %s: %v, want ErrCheckpointChanged in one line", partition, err)
		}
		stored, err = store.ReadCheckpoint(ctx, "ns", "orders", "app", partition)
		if err != nil || len(stored.Blobs) != 1 || stored.Blobs[0].Checkpoint.Sequence != 20 {
			t.Fatalf("partition %s: after the refused write %+v, %v; want the processor's 20", partition, stored, err)
		}
	}
}

// TestCheckAnswersInOneLine: a missing container and an unreachable store
// are reported in one line, naming the container, at once (no retries).
func TestCheckAnswersInOneLine(t *testing.T) {
	conn := azurite.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		conn, want string
	}{
		{conn, `container "nope" does not exist`},
		{strings.Replace(conn, conn[strings.Index(conn, "BlobEndpoint=http://")+len("BlobEndpoint=http://"):strings.LastIndex(conn, "/devstoreaccount1")], closed, 1), "unreachable"},
	} {
		store, err := checkpointstore.New(checkpointstore.Options{ConnectionString: c.conn, Container: "nope"})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = store.Check(ctx)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || time.Since(start) > 5*time.Second {
			t.Fatalf("Check: %v after %v, want one line saying %q at once", err, time.Since(start), c.want)
		}
		if strings.Contains(err.Error(), azurite.Key) {
			t.Fatalf("the key leaked: %v", err)
		}
	}
}

// newStore starts Azurite with a container "checkpoints" and returns its
// client and a store writing there.
func newStore(t *testing.T) (*container.Client, *checkpointstore.Store) {
	t.Helper()
	conn := azurite.Start(t)
	cc := azurite.NewContainer(t, conn, "checkpoints")
	store, err := checkpointstore.New(checkpointstore.Options{ConnectionString: conn, Container: "checkpoints"})
	if err != nil {
		t.Fatal(err)
	}
	return cc, store
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
