package eventhubs_test

import (
	"context"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestScanPartitionAgainstEmulator: ScanPartition reads every event of a
// partition, in order, with its offset and Kafka provenance (none for an
// event written by someone else), and an empty partition yields nothing.
func TestScanPartitionAgainstEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu := startEmulator(ctx, t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", PartitionCount: 2}}})
	sink := newSink(t, emu.ConnectionString())
	ids, err := sink.PartitionIDs(ctx, "orders")
	if err != nil || len(ids) != 2 {
		t.Fatalf("PartitionIDs = %v, %v", ids, err)
	}
	b, err := sink.NewBatch(ctx, "orders", "1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		ev := mirror.EventFor(&mirror.Record{Topic: "t", Partition: 2, Offset: int64(10 + i), Value: []byte("v"), Timestamp: time.Now().UnixMilli()})
		if err := b.Add(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(&mirror.Event{Body: []byte("foreign"), MessageID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Send(ctx, b); err != nil {
		t.Fatal(err)
	}
	var got []cutover.Event
	if err := sink.ScanPartition(ctx, "orders", "1", func(ev cutover.Event) { got = append(got, ev) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("scanned %d events, want 5: %+v", len(got), got)
	}
	for i, ev := range got[:4] {
		want := mirror.TopicPartition{Topic: "t", Partition: 2}
		if ev.Sequence != int64(i) || !ev.HasProvenance || ev.Record != want || ev.RecordOffset != int64(10+i) || ev.Offset == "" {
			t.Errorf("event %d: %+v", i, ev)
		}
		if i > 0 && ev.Offset == got[i-1].Offset {
			t.Errorf("events %d and %d share offset %q", i-1, i, ev.Offset)
		}
	}
	if got[4].HasProvenance {
		t.Errorf("a foreign event has provenance: %+v", got[4])
	}
	var none int
	if err := sink.ScanPartition(ctx, "orders", "0", func(cutover.Event) { none++ }); err != nil || none != 0 {
		t.Fatalf("empty partition: %d events, %v", none, err)
	}
}
