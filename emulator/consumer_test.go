package emulator

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

func TestStartPositions(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	srv := startServer(t, Config{Hubs: prodHubs(), Now: clock.Now})
	ctx := testContext(t, 30*time.Second)
	p := newProducer(t, srv.ConnectionString(), "prod.test1")
	// Ten single-event batches, one simulated second apart.
	for i := range 10 {
		sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("2")}, &azeventhubs.EventData{Body: []byte("event-" + strconv.Itoa(i))})
		clock.Advance(time.Second)
	}
	stored := srv.Events("prod.test1", 2)
	if len(stored) != 10 {
		t.Fatalf("stored %d events", len(stored))
	}
	ev4 := stored[4]
	c := newConsumer(t, srv.ConnectionString(), "prod.test1", azeventhubs.DefaultConsumerGroup)
	cases := []struct {
		name  string
		start azeventhubs.StartPosition
		want  int64 // first sequence number received
	}{
		{"earliest", azeventhubs.StartPosition{Earliest: ptr(true)}, 0},
		{"earliest inclusive", azeventhubs.StartPosition{Earliest: ptr(true), Inclusive: true}, 0},
		{"offset exclusive", azeventhubs.StartPosition{Offset: ptr(ev4.Offset)}, 5},
		{"offset inclusive", azeventhubs.StartPosition{Offset: ptr(ev4.Offset), Inclusive: true}, 4},
		{"sequence number exclusive", azeventhubs.StartPosition{SequenceNumber: ptr(int64(4))}, 5},
		{"sequence number inclusive", azeventhubs.StartPosition{SequenceNumber: ptr(int64(4)), Inclusive: true}, 4},
		{"sequence number -1", azeventhubs.StartPosition{SequenceNumber: ptr(int64(-1))}, 0},
		{"enqueued time exclusive", azeventhubs.StartPosition{EnqueuedTime: ptr(ev4.EnqueuedTime)}, 5},
		{"enqueued time inclusive", azeventhubs.StartPosition{EnqueuedTime: ptr(ev4.EnqueuedTime), Inclusive: true}, 4},
		{"enqueued time before everything", azeventhubs.StartPosition{EnqueuedTime: ptr(time.Unix(0, 0))}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pc := partitionClient(t, c, "2", &azeventhubs.PartitionClientOptions{StartPosition: tc.start})
			got := receiveN(ctx, t, pc, int(10-tc.want))
			for i, ev := range got {
				if want := tc.want + int64(i); ev.SequenceNumber != want || string(ev.Body) != "event-"+strconv.FormatInt(want, 10) {
					t.Fatalf("event %d: seq %d body %q, want seq %d", i, ev.SequenceNumber, ev.Body, want)
				}
			}
			expectNoEvents(t, pc, 50*time.Millisecond)
		})
	}

	// Latest (explicit, and the SDK's default) sees only what comes next.
	latest := partitionClient(t, c, "2", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Latest: ptr(true)}})
	byDefault := partitionClient(t, c, "2", nil)
	results := make(chan []*azeventhubs.ReceivedEventData, 2)
	for _, pc := range []*azeventhubs.PartitionClient{latest, byDefault} {
		go func() {
			evs, _ := pc.ReceiveEvents(ctx, 1, nil)
			results <- evs
		}()
	}
	// Both links must be attached (at the end of the partition) before the
	// next event is sent.
	waitForLinks(t, srv, 2, func(l *link) bool { return l.kind == kindConsumer && l.start.latest })
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("2")}, &azeventhubs.EventData{Body: []byte("event-10")})
	for range 2 {
		if got := <-results; len(got) != 1 || got[0].SequenceNumber != 10 {
			t.Fatalf("latest: got %d events, want seq 10", len(got))
		}
	}
}

func TestLongPollDeliversNewEvents(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 20*time.Second)
	c := newConsumer(t, srv.ConnectionString(), "prod.test2", azeventhubs.DefaultConsumerGroup)
	pc := partitionClient(t, c, "0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}, Prefetch: -1})
	p := newProducer(t, srv.ConnectionString(), "prod.test2")
	done := make(chan []*azeventhubs.ReceivedEventData)
	go func() {
		evs, _ := pc.ReceiveEvents(ctx, 5, nil)
		done <- evs
	}()
	events := eventsWithIDs("poll", 5, 10)
	for _, ev := range events {
		sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, ev)
	}
	got := <-done
	got = append(got, receiveN(ctx, t, pc, 5-len(got))...)
	for i, ev := range got {
		if *ev.MessageID != *events[i].MessageID {
			t.Fatalf("event %d is %s", i, *ev.MessageID)
		}
	}
}

func TestLargeEventsSpanFramesBothWays(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 20*time.Second)
	p := newProducer(t, srv.ConnectionString(), "prod.test3")
	body := make([]byte, 1000_000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, &azeventhubs.EventData{Body: body})
	c := newConsumer(t, srv.ConnectionString(), "prod.test3", azeventhubs.DefaultConsumerGroup)
	pc := partitionClient(t, c, "0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	got := receiveN(ctx, t, pc, 1)
	if !bytes.Equal(got[0].Body, body) {
		t.Fatal("the 1 MB event came back different")
	}
}

func TestOwnerLevelStealsPartitions(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 30*time.Second)
	p := newProducer(t, srv.ConnectionString(), "prod.test4")
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, eventsWithIDs("e", 3, 10)...)
	earliest := azeventhubs.StartPosition{Earliest: ptr(true)}

	c1 := newConsumer(t, srv.ConnectionString(), "prod.test4", azeventhubs.DefaultConsumerGroup)
	old := partitionClient(t, c1, "0", &azeventhubs.PartitionClientOptions{StartPosition: earliest, OwnerLevel: ptr(int64(1))})
	receiveN(ctx, t, old, 3)

	c2 := newConsumer(t, srv.ConnectionString(), "prod.test4", azeventhubs.DefaultConsumerGroup)
	newer := partitionClient(t, c2, "0", &azeventhubs.PartitionClientOptions{StartPosition: earliest, OwnerLevel: ptr(int64(2))})
	receiveN(ctx, t, newer, 3)

	_, err := old.ReceiveEvents(ctx, 1, nil)
	var azErr *azeventhubs.Error
	if !errors.As(err, &azErr) || azErr.Code != azeventhubs.ErrorCodeOwnershipLost {
		t.Fatalf("the older receiver got %v, want code %q", err, azeventhubs.ErrorCodeOwnershipLost)
	}

	// A lower owner level, or none, cannot take the partition back.
	for name, level := range map[string]*int64{"lower": ptr(int64(1)), "none": nil} {
		cx, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString(), "prod.test4", azeventhubs.DefaultConsumerGroup,
			&azeventhubs.ConsumerClientOptions{RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1}})
		if err != nil {
			t.Fatal(err)
		}
		defer cx.Close(ctx)
		lower := partitionClient(t, cx, "0", &azeventhubs.PartitionClientOptions{StartPosition: earliest, OwnerLevel: level})
		if evs, err := lower.ReceiveEvents(ctx, 1, nil); err == nil || len(evs) > 0 || !strings.Contains(err.Error(), "amqp:link:stolen") {
			t.Fatalf("owner level %s: got %d events, error %v; want an amqp:link:stolen refusal", name, len(evs), err)
		}
	}
	// The owner keeps reading.
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, &azeventhubs.EventData{Body: []byte("more")})
	if got := receiveN(ctx, t, newer, 1); string(got[0].Body) != "more" {
		t.Fatalf("owner got %q", got[0].Body)
	}
}

func TestRetentionDropsOldEvents(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	srv := startServer(t, Config{Now: clock.Now, Hubs: []HubConfig{{Name: "short", PartitionCount: 1, Retention: time.Hour}}})
	ctx := testContext(t, 20*time.Second)
	p := newProducer(t, srv.ConnectionString(), "short")
	sendBatch(ctx, t, p, nil, eventsWithIDs("old", 5, 10)...)
	clock.Advance(30 * time.Minute)
	sendBatch(ctx, t, p, nil, eventsWithIDs("new", 5, 10)...)
	clock.Advance(31 * time.Minute) // the first five are now 61 minutes old

	props, err := p.GetPartitionProperties(ctx, "0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if props.BeginningSequenceNumber != 5 || props.LastEnqueuedSequenceNumber != 9 || props.IsEmpty {
		t.Fatalf("after retention: %+v", props)
	}
	c := newConsumer(t, srv.ConnectionString(), "short", azeventhubs.DefaultConsumerGroup)
	pc := partitionClient(t, c, "0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	got := receiveN(ctx, t, pc, 5)
	if got[0].SequenceNumber != 5 || *got[0].MessageID != "new-0" {
		t.Fatalf("earliest retained event: seq %d id %s", got[0].SequenceNumber, *got[0].MessageID)
	}
	expectNoEvents(t, pc, 50*time.Millisecond)

	clock.Advance(time.Hour)
	props, err = p.GetPartitionProperties(ctx, "0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !props.IsEmpty || props.BeginningSequenceNumber != 10 || props.LastEnqueuedSequenceNumber != 9 {
		t.Fatalf("after everything expired: %+v", props)
	}
	if st := srv.Stats().Hubs["short"].Partitions[0]; st.EventsStored != 10 || st.EventsRetained != 0 {
		t.Fatalf("stats after expiry: %+v", st)
	}
}

func TestMaxPartitionBytesDropsOldest(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: []HubConfig{{Name: "capped", PartitionCount: 1, MaxPartitionBytes: 10_000}}})
	ctx := testContext(t, 20*time.Second)
	p := newProducer(t, srv.ConnectionString(), "capped")
	for i := range 10 {
		sendBatch(ctx, t, p, nil, eventsWithIDs("b"+strconv.Itoa(i), 10, 500)...)
	}
	st := srv.Stats().Hubs["capped"].Partitions[0]
	if st.EventsStored != 100 || st.BytesRetained > 10_000 || st.EventsRetained == 0 || st.EventsRetained >= 100 {
		t.Fatalf("stats: %+v", st)
	}
	c := newConsumer(t, srv.ConnectionString(), "capped", azeventhubs.DefaultConsumerGroup)
	pc := partitionClient(t, c, "0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	got := receiveN(ctx, t, pc, st.EventsRetained)
	if got[0].SequenceNumber != st.BeginSequence || got[len(got)-1].SequenceNumber != 99 {
		t.Fatalf("received seq %d..%d, stats %+v", got[0].SequenceNumber, got[len(got)-1].SequenceNumber, st)
	}
}

func TestUnknownEntitiesFailFast(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 20*time.Second)
	start := time.Now()
	// Default retry options: a fatal error must not be retried.
	p, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString(), "prod.test9", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.NewEventDataBatch(ctx, nil); err == nil || !strings.Contains(err.Error(), `The messaging entity 'sb://emulator/prod.test9' could not be found.`) {
		t.Fatalf("NewEventDataBatch on an unknown hub: %v", err)
	}
	if _, err := p.GetEventHubProperties(ctx, nil); err == nil || !strings.Contains(err.Error(), "prod.test9") {
		t.Fatalf("GetEventHubProperties on an unknown hub: %v", err)
	}
	known := newProducer(t, srv.ConnectionString(), "prod.test1")
	if _, err := known.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("7")}); err == nil || !strings.Contains(err.Error(), "It should be between 0 and 3.") {
		t.Fatalf("NewEventDataBatch on an unknown partition: %v", err)
	}
	if _, err := known.GetPartitionProperties(ctx, "7", nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("GetPartitionProperties on an unknown partition: %v", err)
	}
	receive := func(hubName, group, partition string) error {
		c, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString(), hubName, group, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		pc, err := c.NewPartitionClient(partition, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctx)
		_, err = pc.ReceiveEvents(ctx, 1, nil)
		return err
	}
	for _, tc := range []struct{ hub, group, partition, want string }{
		{"prod.test9", "$Default", "0", `amqp:not-found, Description: The messaging entity 'sb://emulator/prod.test9' could not be found.`},
		{"prod.test1", "nope", "0", `amqp:not-found, Description: The messaging entity 'sb://emulator/prod.test1/ConsumerGroups/nope' could not be found.`},
		{"prod.test1", "$Default", "4", `com.microsoft:argument-out-of-range, Description: The specified partition is invalid for an EventHub partition sender or receiver. It should be between 0 and 3.`},
	} {
		if err := receive(tc.hub, tc.group, tc.partition); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("ReceiveEvents(%s/%s/%s): %v, want %q", tc.hub, tc.group, tc.partition, err, tc.want)
		}
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("unknown entities took %v to fail: the SDK retried", elapsed)
	}
}

func TestConsumerGroupsAndAddHub(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{})
	if err := srv.AddHub(HubConfig{Name: "late", PartitionCount: 2, ConsumerGroups: []string{"cg1"}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddHub(HubConfig{Name: "LATE", PartitionCount: 2}); err == nil {
		t.Fatal("AddHub accepted a duplicate name")
	}
	if err := srv.AddHub(HubConfig{Name: "big", PartitionCount: 33}); err == nil {
		t.Fatal("AddHub accepted 33 partitions")
	}
	ctx := testContext(t, 20*time.Second)
	p := newProducer(t, srv.ConnectionString(), "late")
	sendBatch(ctx, t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("1")}, eventsWithIDs("cg", 3, 10)...)
	for _, group := range []string{"$Default", "cg1"} {
		c := newConsumer(t, srv.ConnectionString(), "late", group)
		pc := partitionClient(t, c, "1", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
		if got := receiveN(ctx, t, pc, 3); *got[2].MessageID != "cg-2" {
			t.Fatalf("%s: got %s", group, *got[2].MessageID)
		}
	}
}

func TestManyConcurrentClients(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 30*time.Second)
	const clients = 25
	errs := make(chan error, clients)
	for i := range clients {
		go func() {
			p, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString(), "prod.test"+strconv.Itoa(1+i%5), nil)
			if err != nil {
				errs <- err
				return
			}
			defer p.Close(context.Background())
			for j := range 4 {
				b, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionKey: ptr(strconv.Itoa(i*10 + j))})
				if err != nil {
					errs <- err
					return
				}
				for range 10 {
					if err := b.AddEventData(&azeventhubs.EventData{Body: []byte("x")}, nil); err != nil {
						errs <- err
						return
					}
				}
				if err := p.SendEventDataBatch(ctx, b, nil); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Stats().EventsStored; got != clients*40 {
		t.Fatalf("stored %d events, want %d", got, clients*40)
	}
}

func TestBatchesWithoutKeyGoRoundRobin(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 20*time.Second)
	p := newProducer(t, srv.ConnectionString(), "prod.test2")
	for i := range 8 {
		sendBatch(ctx, t, p, nil, eventsWithIDs("rr"+strconv.Itoa(i), 3, 10)...)
	}
	for i, ps := range srv.Stats().Hubs["prod.test2"].Partitions {
		if ps.EventsStored != 6 {
			t.Fatalf("partition %d holds %d events, want 6 (2 batches of 3)", i, ps.EventsStored)
		}
	}
}
