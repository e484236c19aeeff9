package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/cutover"
)

// storedCheckpoints is what a cut-over route test needs of the store.
type storedCheckpoints struct {
	cc        *container.Client
	bs        *checkpoints.BlobStore
	namespace string
}

// sequence returns the sequence number stored in the Go processor's blob
// of hub/partition ($Default), -2 when there is none.
func (s storedCheckpoints) sequence(ctx context.Context, t *testing.T, hub, partition string) int64 {
	t.Helper()
	cps, err := s.bs.ListCheckpoints(ctx, s.namespace, hub, "$Default", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		if cp.PartitionID == partition {
			return *cp.SequenceNumber
		}
	}
	return -2
}

// checkpoint writes a checkpoint as a processor does.
func (s storedCheckpoints) checkpoint(ctx context.Context, t *testing.T, hub, group, partition string, seq int64) {
	t.Helper()
	off := fmt.Sprint(seq)
	if err := s.bs.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: s.namespace, EventHubName: hub, ConsumerGroup: group,
		PartitionID: partition, SequenceNumber: &seq, Offset: &off}, nil); err != nil {
		t.Fatal(err)
	}
}

func planOf(t *testing.T, plans []cutover.PartitionPlan, hub, partition string) cutover.PartitionPlan {
	t.Helper()
	for _, p := range plans {
		if p.Hub == hub && p.PartitionID == partition {
			return p
		}
	}
	t.Fatalf("no plan for %s/%s in %+v", hub, partition, plans)
	return cutover.PartitionPlan{}
}

// checkCutoverStoreEdges runs, after a cut-over wrote the checkpoints of
// plans, what happens next in a deployment: a consumer on Event Hubs
// checkpoints further and the cut-over is re-applied (refused with 409
// naming the partition with both values, listed in the dry run, written
// with allow_backward); records arrive that the mirror has not mirrored
// (counted in the answer); the store fails halfway (the answer lists what
// was written, a re-run finishes); the container is missing (one line,
// at once).
func checkCutoverStoreEdges(ctx context.Context, t *testing.T, url string, w *world, s storedCheckpoints, plans []cutover.PartitionPlan) {
	t.Helper()
	// A consumer on Event Hubs read 5 events further than the plan.
	p0 := planOf(t, plans, "prod.test1", "0")
	newer := p0.Checkpoint.Sequence + 5
	s.checkpoint(ctx, t, "prod.test1", "$Default", "0", newer)
	code, a, raw := postCutover(t, url, `{"group":"app","confirm":true}`)
	naming := fmt.Sprintf("prod.test1/0 stored %d, planned %d", newer, p0.Checkpoint.Sequence)
	if code != http.StatusConflict || !strings.Contains(a.Error, naming) || strings.Contains(a.Error, "\n") {
		t.Fatalf("re-applied over a newer checkpoint: %d %s; want 409 naming %q", code, raw, naming)
	}
	if got := s.sequence(ctx, t, "prod.test1", "0"); got != newer {
		t.Fatalf("the refused cut-over moved the consumer's checkpoint from %d to %d", newer, got)
	}

	// Records the mirror has not mirrored yet are counted.
	recs := make([]*kgo.Record, 7)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "prod.test1", Value: []byte("late")}
	}
	if err := w.client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, a, raw = postCutover(t, url, `{"group":"app"}`)
	if code != http.StatusOK || len(a.Cutover.Backward) != 1 || a.Cutover.Backward[0].Stored != fmt.Sprint(newer) ||
		!strings.Contains(a.Message, naming) || !strings.Contains(a.Message, `"allow_backward": true`) {
		t.Fatalf("dry run over a newer checkpoint: %d %s; want it listed with the flag", code, raw)
	}
	if a.Cutover.Unmirrored != 7 || !strings.Contains(a.Message, "7 record(s)") {
		t.Fatalf("dry run: %d unmirrored in %s, want 7 said", a.Cutover.Unmirrored, raw)
	}
	code, a, raw = postCutover(t, url, `{"group":"app","confirm":true,"allow_backward":true}`)
	if code != http.StatusOK || !a.Cutover.Written || len(a.Cutover.Blobs) != 2 || !strings.Contains(a.Message, "moved backward") {
		t.Fatalf("allow_backward: %d %s; want the two blobs of the changed partition written", code, raw)
	}
	if got := s.sequence(ctx, t, "prod.test1", "0"); got != p0.Checkpoint.Sequence {
		t.Fatalf("allow_backward: stored %d, want the plan's %d", got, p0.Checkpoint.Sequence)
	}

	// The store fails halfway: prod.test1/1 must be written again, the
	// lower-cased blob of a prod.test2 partition is leased by someone
	// else (writes refused), and prod.test2/3 comes after it.
	for _, name := range []string{"prod.test1/$Default/checkpoint/1", "prod.test1/$default/checkpoint/1", "prod.test2/$Default/checkpoint/3", "prod.test2/$default/checkpoint/3"} {
		if _, err := s.cc.NewBlobClient(s.namespace+"/"+name).Delete(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	leased := planOf(t, plans, "prod.test2", "0")
	for _, id := range []string{"1", "2"} {
		if p := planOf(t, plans, "prod.test2", id); p.Checkpoint.Sequence > leased.Checkpoint.Sequence {
			leased = p
		}
	}
	if leased.Checkpoint.Sequence < 0 {
		t.Fatalf("no prod.test2 partition with a checkpoint past the start: %+v", plans)
	}
	s.checkpoint(ctx, t, "prod.test2", "$default", leased.PartitionID, leased.Checkpoint.Sequence-1)
	bc := s.cc.NewBlobClient(s.namespace + "/prod.test2/$default/checkpoint/" + leased.PartitionID)
	lc, err := lease.NewBlobClient(bc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AcquireLease(ctx, -1, nil); err != nil {
		t.Fatal(err)
	}
	code, a, raw = postCutover(t, url, `{"group":"app","confirm":true}`)
	if code != http.StatusServiceUnavailable || strings.Contains(a.Error, "\n") || !strings.Contains(a.Error, "re-run to finish") ||
		!strings.Contains(strings.Join(a.Cutover.Blobs, " "), "prod.test1/$Default/checkpoint/1") || s.sequence(ctx, t, "prod.test2", "3") != -2 {
		t.Fatalf("a store failing halfway: %d %s; want 503 in one line listing what was written", code, raw)
	}
	if _, err := lc.ReleaseLease(ctx, nil); err != nil {
		t.Fatal(err)
	}
	code, a, raw = postCutover(t, url, `{"group":"app","confirm":true}`)
	if code != http.StatusOK || len(a.Cutover.Blobs) != 4 || a.Cutover.WrittenPartitions != len(plans) {
		t.Fatalf("re-run: %d %s; want the 4 blobs of the 2 unfinished partitions written", code, raw)
	}
	for _, p := range plans {
		if got := s.sequence(ctx, t, p.Hub, p.PartitionID); got != p.Checkpoint.Sequence {
			t.Errorf("after the re-run %s/%s holds %d, planned %d", p.Hub, p.PartitionID, got, p.Checkpoint.Sequence)
		}
	}

	// A missing container: one line, before any hub is scanned.
	start := time.Now()
	code, a, raw = postCutover(t, url, `{"group":"app","confirm":true,"container":"nope"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(a.Error, `container "nope" does not exist`) || strings.Contains(raw, `\n`) ||
		strings.Contains(raw, "xml") || time.Since(start) > 10*time.Second {
		t.Fatalf("a missing container: %d %s after %v; want one line at once", code, raw, time.Since(start))
	}
}
