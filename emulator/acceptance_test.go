package emulator

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/ehmirror/ehmirror/partitionkey"
)

// sentEvent is what a test sent and where it must land (-1: anywhere).
type sentEvent struct {
	data      *azeventhubs.EventData
	partition int
	key       string
}

// makeEvent builds an event with every kind of metadata the mirror relies on.
func makeEvent(rng *rand.Rand, hubName string, i int) *azeventhubs.EventData {
	body := make([]byte, 16+rng.IntN(2048))
	for j := range body {
		body[j] = byte(rng.Uint32())
	}
	id := fmt.Sprintf("%s-%05d", hubName, i)
	ev := &azeventhubs.EventData{
		Body:        body,
		ContentType: ptr("application/octet-stream"),
		MessageID:   &id,
		Properties: map[string]any{
			"i":   int64(rng.Uint64()),
			"bin": []byte{0, 1, 2, byte(i), 0xff},
			"ts":  time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(),
			"s":   "value-" + strconv.Itoa(i),
			"f":   float64(i) / 3,
			"ok":  i%2 == 0,
		},
	}
	switch i % 3 {
	case 0:
		ev.CorrelationID = "corr-" + strconv.Itoa(i)
	case 1:
		ev.CorrelationID = uint64(i)
	case 2:
		ev.CorrelationID = []byte("corr-bin-" + strconv.Itoa(i))
	}
	return ev
}

// TestTenThousandEventsAcrossFiveHubs is the main acceptance test:
// 10,000 events over prod.test1..prod.test5 (4 partitions each), sent in
// batches by partition id, by partition key and round-robin, read back byte
// for byte through PartitionClients, with keyed batches on the partitions the
// hash predicts and the management properties agreeing with what is stored.
func TestTenThousandEventsAcrossFiveHubs(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 50*time.Second)
	const perHub = 2000
	const batchSize = 100

	var wg sync.WaitGroup
	for h := 1; h <= 5; h++ {
		hubName := "prod.test" + strconv.Itoa(h)
		wg.Add(1)
		go func() {
			defer wg.Done()
			checkHubRoundTrip(ctx, t, srv, hubName, perHub, batchSize, uint64(h))
		}()
	}
	wg.Wait()
	st := srv.Stats()
	if st.EventsStored != 5*perHub {
		t.Errorf("Stats().EventsStored = %d, want %d", st.EventsStored, 5*perHub)
	}
}

func checkHubRoundTrip(ctx context.Context, t *testing.T, srv *Server, hubName string, n, batchSize int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	prod := newProducer(t, srv.ConnectionString(), hubName)
	sent := map[string]sentEvent{}
	for start := 0; start < n; start += batchSize {
		var events []*azeventhubs.EventData
		for i := start; i < start+batchSize && i < n; i++ {
			events = append(events, makeEvent(rng, hubName, i))
		}
		var opts *azeventhubs.EventDataBatchOptions
		partition, key := -1, ""
		switch (start / batchSize) % 3 {
		case 0:
			partition = (start / batchSize) % 4
			opts = &azeventhubs.EventDataBatchOptions{PartitionID: ptr(strconv.Itoa(partition))}
		case 1:
			key = "key-" + strconv.Itoa(start)
			partition = partitionkey.Partition(key, 4)
			opts = &azeventhubs.EventDataBatchOptions{PartitionKey: &key}
		}
		b, err := prod.NewEventDataBatch(ctx, opts)
		if err != nil {
			t.Errorf("%s: NewEventDataBatch: %v", hubName, err)
			return
		}
		for _, e := range events {
			if err := b.AddEventData(e, nil); err != nil {
				t.Errorf("%s: AddEventData: %v", hubName, err)
				return
			}
			sent[*e.MessageID] = sentEvent{data: e, partition: partition, key: key}
		}
		if err := prod.SendEventDataBatch(ctx, b, nil); err != nil {
			t.Errorf("%s: SendEventDataBatch: %v", hubName, err)
			return
		}
	}

	stats := srv.Stats().Hubs[hubName]
	cons := newConsumer(t, srv.ConnectionString(), hubName, azeventhubs.DefaultConsumerGroup)
	received := 0
	for p := range 4 {
		want := int(stats.Partitions[p].EventsStored)
		pc := partitionClient(t, cons, strconv.Itoa(p), &azeventhubs.PartitionClientOptions{
			StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)},
			Prefetch:      1000,
		})
		events := receiveN(ctx, t, pc, want)
		var last *azeventhubs.ReceivedEventData
		for i, got := range events {
			if got.SequenceNumber != int64(i) {
				t.Errorf("%s/%d: event %d has sequence number %d", hubName, p, i, got.SequenceNumber)
			}
			s, ok := sent[*got.MessageID]
			if !ok {
				t.Errorf("%s/%d: unexpected or duplicate event %q", hubName, p, *got.MessageID)
				continue
			}
			delete(sent, *got.MessageID)
			compareEvent(t, hubName, s, got, p)
			last = got
		}
		received += len(events)
		checkPartitionProperties(ctx, t, srv, hubName, p, last, len(events))
		pc.Close(ctx)
	}
	if len(sent) != 0 || received != n {
		t.Errorf("%s: received %d events, %d sent events missing", hubName, received, len(sent))
	}
	props, err := prod.GetEventHubProperties(ctx, nil)
	if err != nil {
		t.Errorf("%s: GetEventHubProperties: %v", hubName, err)
		return
	}
	if props.Name != hubName || !reflect.DeepEqual(props.PartitionIDs, []string{"0", "1", "2", "3"}) || props.CreatedOn.IsZero() {
		t.Errorf("%s: GetEventHubProperties = %+v", hubName, props)
	}
}

func compareEvent(t *testing.T, hubName string, want sentEvent, got *azeventhubs.ReceivedEventData, partition int) {
	t.Helper()
	id := *want.data.MessageID
	if want.partition >= 0 && want.partition != partition {
		t.Errorf("%s: event %s on partition %d, want %d (key %q)", hubName, id, partition, want.partition, want.key)
	}
	if want.key != "" && (got.PartitionKey == nil || *got.PartitionKey != want.key) {
		t.Errorf("%s: event %s partition key %v, want %q", hubName, id, got.PartitionKey, want.key)
	}
	if want.key == "" && got.PartitionKey != nil {
		t.Errorf("%s: event %s has partition key %q, want none", hubName, id, *got.PartitionKey)
	}
	if !bytes.Equal(got.Body, want.data.Body) {
		t.Errorf("%s: event %s body differs (%d vs %d bytes)", hubName, id, len(got.Body), len(want.data.Body))
	}
	if !reflect.DeepEqual(utcTimes(got.Properties), want.data.Properties) {
		t.Errorf("%s: event %s properties\n got %#v\nwant %#v", hubName, id, got.Properties, want.data.Properties)
	}
	if got.ContentType == nil || *got.ContentType != *want.data.ContentType {
		t.Errorf("%s: event %s content type %v", hubName, id, got.ContentType)
	}
	if !reflect.DeepEqual(got.CorrelationID, want.data.CorrelationID) {
		t.Errorf("%s: event %s correlation id %#v, want %#v", hubName, id, got.CorrelationID, want.data.CorrelationID)
	}
	if got.EnqueuedTime == nil || got.EnqueuedTime.IsZero() || got.Offset == "" {
		t.Errorf("%s: event %s lacks enqueued time or offset", hubName, id)
	}
}

func checkPartitionProperties(ctx context.Context, t *testing.T, srv *Server, hubName string, p int, last *azeventhubs.ReceivedEventData, count int) {
	t.Helper()
	prod := newProducer(t, srv.ConnectionString(), hubName)
	props, err := prod.GetPartitionProperties(ctx, strconv.Itoa(p), nil)
	if err != nil {
		t.Errorf("%s/%d: GetPartitionProperties: %v", hubName, p, err)
		return
	}
	if count == 0 {
		if !props.IsEmpty || props.LastEnqueuedSequenceNumber != -1 || props.LastEnqueuedOffset != "-1" {
			t.Errorf("%s/%d: empty partition properties %+v", hubName, p, props)
		}
		return
	}
	if props.IsEmpty || props.BeginningSequenceNumber != 0 ||
		props.LastEnqueuedSequenceNumber != last.SequenceNumber ||
		props.LastEnqueuedOffset != last.Offset ||
		!props.LastEnqueuedOn.Equal(*last.EnqueuedTime) ||
		props.PartitionID != strconv.Itoa(p) || props.EventHubName != hubName {
		t.Errorf("%s/%d: partition properties %+v disagree with the last event (seq %d, offset %s, time %v)",
			hubName, p, props, last.SequenceNumber, last.Offset, last.EnqueuedTime)
	}
	stored := srv.Events(hubName, p)
	if len(stored) != count || stored[len(stored)-1].Offset != props.LastEnqueuedOffset {
		t.Errorf("%s/%d: Events() returned %d events, want %d", hubName, p, len(stored), count)
	}
}

// utcTimes returns props with time values in UTC (the SDK decodes
// timestamps in the local zone).
func utcTimes(props map[string]any) map[string]any {
	out := make(map[string]any, len(props))
	for k, v := range props {
		if tm, ok := v.(time.Time); ok {
			v = tm.UTC()
		}
		out[k] = v
	}
	return out
}
