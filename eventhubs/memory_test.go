package eventhubs_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/mirror"
)

// TestBatchedEventMemory: what a batch of the real SDK keeps per event of a
// 100 B keyed record, besides the value and key bytes, is covered by
// mirror.BatchedEventMemory (the sink's share of the in-flight weight) and
// not far below it. Measured on the heap after a GC, with the records' bytes
// allocated before, and the event built for each Add dropped after it.
func TestBatchedEventMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := oneHubSink(ctx, t)
	const size, keyLen, n = 100, 16, 3000 // 3,000 events of ≈ 300 B fit one 1 MB batch
	slab := make([]byte, n*(size+keyLen))
	recs := make([]mirror.Record, n)
	for i := range recs {
		recs[i] = mirror.Record{Topic: "orders", Partition: 3, Offset: int64(i) + 1e9,
			Key: slab[:keyLen:keyLen], Value: slab[keyLen : keyLen+size : keyLen+size], Timestamp: 1.7e12}
		slab = slab[keyLen+size:]
	}
	best := -1.0
	for range 3 { // the least of three: other goroutines only add
		b, err := sink.NewBatch(ctx, "orders", "0")
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range recs {
			ev := mirror.EventFor(&recs[i])
			if err := b.Add(&ev); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if b.Len() != n {
			t.Fatalf("batch holds %d events, want %d", b.Len(), n)
		}
		runtime.KeepAlive(b)
		per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n - size - keyLen
		if best < 0 || per < best {
			best = per
		}
	}
	runtime.KeepAlive(recs)
	t.Logf("a batch keeps %.0f B per event besides its value and key; BatchedEventMemory %d B", best, mirror.BatchedEventMemory)
	if best > mirror.BatchedEventMemory {
		t.Errorf("a batch keeps %.0f B per event besides value and key, more than mirror.BatchedEventMemory %d B", best, mirror.BatchedEventMemory)
	}
	if float64(mirror.BatchedEventMemory) > 1.25*best {
		t.Errorf("mirror.BatchedEventMemory %d B is more than 1.25 × the %.0f B a batch keeps per event", mirror.BatchedEventMemory, best)
	}
}

// TestAddKeepsNothingOfTheEvent: the engine reuses one event, one
// properties map and the values its pointers point at for every Add
// (mirror.Batch.Add); each stored event still carries its own body,
// properties (pointed-at values as the values they were) and message id,
// the batch's first one included (the SDK keeps the first event's map as
// the batch's envelope).
func TestAddKeepsNothingOfTheEvent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := oneHubSink(ctx, t)
	b, err := sink.NewBatch(ctx, "orders", "0")
	if err != nil {
		t.Fatal(err)
	}
	ev := mirror.Event{Properties: map[string]any{}}
	body := make([]byte, 1)
	var held struct {
		n   int64
		at  time.Time
		key []byte
	}
	at := func(i int) time.Time { return time.UnixMilli(1.7e12 + int64(i)).UTC() }
	for i := range 3 {
		clear(ev.Properties)
		ev.Properties["i"] = int64(i)
		if i == 1 {
			ev.Properties["only-1"] = true
		}
		held.n, held.at, held.key = int64(10+i), at(i), []byte{byte('k'), byte('0' + i)}
		ev.Properties["n"], ev.Properties["at"], ev.Properties["key"] = &held.n, &held.at, &held.key
		body[0] = byte('a' + i)
		ev.Body, ev.MessageID = body, string(rune('a'+i))
		if err := b.Add(&ev); err != nil {
			t.Fatal(err)
		}
	}
	clear(ev.Properties)
	ev.Properties["i"] = int64(99)
	held.n, held.at, held.key = 99, at(99), []byte("k99")
	if err := sink.Send(ctx, b); err != nil {
		t.Fatal(err)
	}
	var got []mirror.StoredEvent
	if err := sink.ReadAfter(ctx, "orders", "0", -1, 2, func(se mirror.StoredEvent) { got = append(got, se) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("read back %d events, want 3", len(got))
	}
	for i, se := range got {
		_, only1 := se.Properties["only-1"]
		if se.Properties["i"] != int64(i) || only1 != (i == 1) || len(se.Properties) != 4+btoi(i == 1) ||
			se.MessageID != string(rune('a'+i)) || string(se.Body) != string(rune('a'+i)) {
			t.Errorf("event %d: body %q, message id %q, properties %v", i, se.Body, se.MessageID, se.Properties)
		}
		stamp, _ := se.Properties["at"].(time.Time)
		key, _ := se.Properties["key"].([]byte)
		if se.Properties["n"] != int64(10+i) || !stamp.Equal(at(i)) || string(key) != string([]byte{'k', byte('0' + i)}) {
			t.Errorf("event %d: pointed-at properties n %v, at %v, key %q; want %d, %v, k%d", i, se.Properties["n"], se.Properties["at"], key, 10+i, at(i), i)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// oneHubSink starts an emulator with one hub "orders" of one partition and
// returns a sink to it.
func oneHubSink(ctx context.Context, t *testing.T) *eventhubs.Sink {
	t.Helper()
	emu := startEmulator(ctx, t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", PartitionCount: 1}}})
	return newSink(t, emu.ConnectionString())
}
