package emulator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/go-amqp"
)

// offer sends a delivery of size bytes and events events to th every step
// for d of the fake clock and returns what was admitted.
func offer(th *throttle, clock *fakeClock, d, step time.Duration, size int64, events int) (bytes, evts int64, rejected int) {
	for el := time.Duration(0); el < d; el += step {
		if th.admit(size, events) {
			bytes += size
			evts += int64(events)
		} else {
			rejected++
		}
		clock.Advance(step)
	}
	return bytes, evts, rejected
}

func TestThrottleAdmitsTheQuotaAndNoMore(t *testing.T) {
	const minute = 60 * time.Second
	t.Run("events bind", func(t *testing.T) {
		clock := newFakeClock()
		th := newThrottle(Quota{ThroughputUnits: 2}, clock.Now)
		// 10 KiB of 50 events every 10 ms: 1 MiB/s and 5,000 events/s
		// offered to 2 MiB/s or 2,000 events/s.
		_, evts, rejected := offer(th, clock, minute, 10*time.Millisecond, 10<<10, 50)
		// A minute of quota plus the bucket's first second, give or take
		// one delivery.
		if lo, hi := int64(60*2000), int64(61*2000+50); evts < lo || evts > hi {
			t.Fatalf("admitted %d events in a minute, want %d..%d", evts, lo, hi)
		}
		if rejected == 0 {
			t.Fatal("nothing rejected at 2.5 times the quota")
		}
	})
	t.Run("bytes bind", func(t *testing.T) {
		clock := newFakeClock()
		th := newThrottle(Quota{ThroughputUnits: 1}, clock.Now)
		// 100 KiB of one event every 20 ms: 5 MiB/s, 50 events/s.
		bytes, _, _ := offer(th, clock, minute, 20*time.Millisecond, 100<<10, 1)
		if lo, hi := int64(60<<20), int64(61<<20+100<<10); bytes < lo || bytes > hi {
			t.Fatalf("admitted %d bytes in a minute, want %d..%d", bytes, lo, hi)
		}
	})
	t.Run("under the quota nothing is rejected", func(t *testing.T) {
		clock := newFakeClock()
		th := newThrottle(Quota{ThroughputUnits: 1}, clock.Now)
		// 90 KiB of 90 events every 100 ms: 0.9 of both figures.
		if _, _, rejected := offer(th, clock, minute, 100*time.Millisecond, 90<<10, 90); rejected != 0 {
			t.Fatalf("%d deliveries rejected at 0.9 of the quota", rejected)
		}
	})
	t.Run("a delivery larger than a second of quota passes and is paid for", func(t *testing.T) {
		clock := newFakeClock()
		th := newThrottle(Quota{ThroughputUnits: 1, Period: 100 * time.Millisecond}, clock.Now)
		if !th.admit(1<<20, 5000) { // 50 periods' worth of events
			t.Fatal("the first delivery is rejected with a full bucket")
		}
		clock.Advance(350 * time.Millisecond)
		if th.admit(1, 1) {
			t.Fatal("admitted before the debt of 4,000 events was paid back at 1,000 per 100 ms")
		}
		clock.Advance(100 * time.Millisecond)
		if !th.admit(1, 1) {
			t.Fatal("rejected after the debt was paid back")
		}
	})
}

func TestQuotaThrottlesTheNamespaceWithServerBusy(t *testing.T) {
	t.Parallel()
	// 10 events per hour: a first batch of 11 leaves the namespace in
	// debt for 6 minutes.
	srv := startServer(t, Config{Hubs: prodHubs(), Quota: Quota{ThroughputUnits: 1, IngressEventsPerUnit: 10, Period: time.Hour}})
	ctx := testContext(t, 30*time.Second)
	once := azeventhubs.RetryOptions{MaxRetries: -1}
	producer := func(hub string) *azeventhubs.ProducerClient {
		p, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString(), hub, &azeventhubs.ProducerClientOptions{RetryOptions: once})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(context.Background()) })
		return p
	}
	p1, p2 := producer("prod.test1"), producer("prod.test2")
	send := func(p *azeventhubs.ProducerClient, n int) error {
		b, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eventsWithIDs("q", n, 100) {
			if err := b.AddEventData(e, nil); err != nil {
				t.Fatal(err)
			}
		}
		return p.SendEventDataBatch(ctx, b, nil)
	}
	if err := send(p1, 11); err != nil {
		t.Fatalf("the first batch, with quota left, was refused: %v", err)
	}
	for i, p := range []*azeventhubs.ProducerClient{p1, p2} {
		err := send(p, 1)
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Condition != ConditionServerBusy || ae.Description != ServerBusyDescription {
			t.Fatalf("send %d over the quota: got %v, want %s %q", i, err, ConditionServerBusy, ServerBusyDescription)
		}
	}
	st := srv.Stats()
	if st.ThrottledRequests != 2 || st.EventsStored != 11 {
		t.Fatalf("ThrottledRequests %d, EventsStored %d; want 2 (both hubs share the namespace's quota) and 11", st.ThrottledRequests, st.EventsStored)
	}
}

func TestQuotaOffByDefault(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Config{Hubs: prodHubs()})
	ctx := testContext(t, 30*time.Second)
	p := newProducer(t, srv.ConnectionString(), "prod.test1")
	// 3,000 events at once: three seconds of one unit's quota.
	for range 3 {
		sendBatch(ctx, t, p, nil, eventsWithIDs("free", 1000, 10)...)
	}
	if st := srv.Stats(); st.ThrottledRequests != 0 || st.EventsStored != 3000 {
		t.Fatalf("without a quota: ThrottledRequests %d, EventsStored %d", st.ThrottledRequests, st.EventsStored)
	}
}

func TestQuotaInConfigFile(t *testing.T) {
	doc := func(quota string) string {
		return `{"UserConfig":{"NamespaceConfig":[{"Type":"EventHub","Name":"ns",` + quota + `"Entities":[]}]}}`
	}
	cfg, err := parseConfigFile("x.json", []byte(doc(`"Quota":{"ThroughputUnits":2,"Period":"100ms"},`)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Quota{ThroughputUnits: 2, Period: 100 * time.Millisecond}); cfg.Quota != want {
		t.Fatalf("Quota %+v, want %+v", cfg.Quota, want)
	}
	if got := cfg.Quota.String(); got != "2 TU: 2097152 bytes or 2000 events per 100ms" {
		t.Fatalf("String() = %q", got)
	}
	for bad, wantErr := range map[string]string{
		`"Quota":{"ThroughputUnits":41},`:                 `UserConfig.NamespaceConfig[0].Quota.ThroughputUnits: 41 is out of range 0..40`,
		`"Quota":{"ThroughputUnits":1,"Period":"soon"},`:  `UserConfig.NamespaceConfig[0].Quota.Period: "soon" is not a duration`,
		`"Quota":{"ThroughputUnits":1,"Period":"-1s"},`:   `Quota.Period: -1s is negative`,
		`"Quota":{"IngressEventsPerUnit":-5},`:            `Quota.IngressEventsPerUnit: -5 is negative`,
		`"Quota":{"ThroughputUnits":"one"},`:              `ThroughputUnits: JSON string where a number is expected`,
		`"Quota":{"ThroughputUnits":1,"Period":"100us"},`: `Quota.Period: shorter than 1ms`,
		`"Quota":{"ThroughputUnits":1,"IngressBytes":1},`: ``, // unknown fields are ignored, as elsewhere
	} {
		_, err := parseConfigFile("x.json", []byte(doc(bad)))
		if wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", bad, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.HasPrefix(err.Error(), "x.json: ") {
			t.Errorf("%s: got %v, want %q", bad, err, wantErr)
		}
	}
	two := `{"UserConfig":{"NamespaceConfig":[{"Quota":{"ThroughputUnits":1},"Entities":[]},{"Quota":{"ThroughputUnits":2},"Entities":[]}]}}`
	if _, err := parseConfigFile("x.json", []byte(two)); err == nil || !strings.Contains(err.Error(), "NamespaceConfig[1].Quota: a second namespace quota") {
		t.Errorf("two quotas: %v", err)
	}
	if _, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", Quota: Quota{ThroughputUnits: -1}}); err == nil || !strings.Contains(err.Error(), "Quota.ThroughputUnits: -1 is out of range") {
		t.Errorf("Start with -1 units: %v", err)
	}
}
