package emulator

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// The service's ingress quota per throughput unit (Basic and Standard
// tiers): "1 MB per second or 1,000 events per second, whichever comes
// first" (https://learn.microsoft.com/azure/event-hubs/event-hubs-scalability;
// shared/reference/eventhubs-service-and-terraform.md A1, A2). Event Hubs'
// "1 MB" limits are binary megabytes (its 1 MB publication limit is
// 1,048,576 bytes), so a unit's byte rate is taken as 1,048,576 bytes.
const (
	DefaultIngressBytesPerUnit  = 1 << 20
	DefaultIngressEventsPerUnit = 1000
	// MaxThroughputUnits is the most throughput units a Standard namespace
	// can have (event-hubs-quotas, 2026).
	MaxThroughputUnits = 40
)

// ServerBusyDescription is the description of the service's ServerBusy
// error (condition com.microsoft:server-busy, error code 50002), as the
// service words it (shared/reference/eventhubs-service-and-terraform.md A7,
// quoting https://github.com/Azure/azure-sdk-for-js/issues/12587).
const ServerBusyDescription = "The request was terminated because the entity is being throttled. Error code : 50002. Please wait 4 seconds and try again."

// Quota is a namespace's ingress throughput quota. The zero value (no
// throughput units) enforces nothing.
//
// The service admits ingress per namespace, shared by all its event hubs,
// against "a short window running total" of the traffic and answers
// ServerBusy once it exceeds the purchased units (Microsoft's "How exactly
// does Event Hubs throttling work?"); it documents no burst allowance. The
// emulator keeps that running total as two token buckets (bytes and events)
// holding one Period of quota, refilled continuously: a delivery is
// admitted while neither bucket is empty and is then charged in full (a
// bucket may go below zero, so a 1 MB batch fits a 1 MB/s quota), and every
// delivery that arrives while a bucket is empty is rejected with
// [ConditionServerBusy] and [ServerBusyDescription] and counted in
// [Stats].ThrottledRequests. In the long run the namespace accepts exactly
// its quota.
type Quota struct {
	// ThroughputUnits is the namespace's units, 1 to 40; 0 disables the
	// quota.
	ThroughputUnits int
	// IngressBytesPerUnit and IngressEventsPerUnit are one unit's ingress
	// per Period (defaults 1,048,576 bytes and 1,000 events). Each event
	// of a batch counts as one event; a delivery's bytes are its encoded
	// size.
	IngressBytesPerUnit, IngressEventsPerUnit int64
	// Period is the time the per-unit figures are for, and the length of
	// the window (default 1s, as documented). A shorter period compresses
	// time: with 100ms, a minute of quota is accepted in 6 seconds
	// (benchmarks).
	Period time.Duration
}

// Enabled reports whether q enforces a quota.
func (q Quota) Enabled() bool { return q.ThroughputUnits > 0 }

func (q Quota) withDefaults() Quota {
	if q.IngressBytesPerUnit <= 0 {
		q.IngressBytesPerUnit = DefaultIngressBytesPerUnit
	}
	if q.IngressEventsPerUnit <= 0 {
		q.IngressEventsPerUnit = DefaultIngressEventsPerUnit
	}
	if q.Period <= 0 {
		q.Period = time.Second
	}
	return q
}

// validate reports the first problem with q, naming the field.
func (q Quota) validate() error {
	switch {
	case q.ThroughputUnits < 0 || q.ThroughputUnits > MaxThroughputUnits:
		return fmt.Errorf("ThroughputUnits: %d is out of range 0..%d", q.ThroughputUnits, MaxThroughputUnits)
	case q.IngressBytesPerUnit < 0:
		return fmt.Errorf("IngressBytesPerUnit: %d is negative", q.IngressBytesPerUnit)
	case q.IngressEventsPerUnit < 0:
		return fmt.Errorf("IngressEventsPerUnit: %d is negative", q.IngressEventsPerUnit)
	case q.Period < 0:
		return fmt.Errorf("Period: %s is negative", q.Period)
	case q.Period > 0 && q.Period < time.Millisecond:
		return errors.New("Period: shorter than 1ms")
	}
	return nil
}

// String describes q for logs, e.g. "2 TU: 2097152 bytes or 2000 events per 1s".
func (q Quota) String() string {
	if !q.Enabled() {
		return "off"
	}
	q = q.withDefaults()
	n := int64(q.ThroughputUnits)
	return fmt.Sprintf("%d TU: %d bytes or %d events per %s", q.ThroughputUnits, n*q.IngressBytesPerUnit, n*q.IngressEventsPerUnit, q.Period)
}

// throttle is a namespace's running ingress total (see [Quota]).
type throttle struct {
	now func() time.Time

	mu       sync.Mutex
	capBytes float64 // bytes per period, also the bucket's size
	capEvts  float64
	period   time.Duration
	bytes    float64 // bucket levels
	events   float64
	last     time.Time
}

func newThrottle(q Quota, now func() time.Time) *throttle {
	q = q.withDefaults()
	n := float64(q.ThroughputUnits)
	t := &throttle{
		now:      now,
		capBytes: n * float64(q.IngressBytesPerUnit),
		capEvts:  n * float64(q.IngressEventsPerUnit),
		period:   q.Period,
	}
	t.bytes, t.events, t.last = t.capBytes, t.capEvts, now()
	return t
}

// admit reports whether a delivery of size bytes and events events is
// within the quota, and charges it if so.
func (t *throttle) admit(size int64, events int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if el := now.Sub(t.last); el > 0 {
		f := float64(el) / float64(t.period)
		t.bytes = min(t.capBytes, t.bytes+f*t.capBytes)
		t.events = min(t.capEvts, t.events+f*t.capEvts)
		t.last = now
	}
	if t.bytes <= 0 || t.events <= 0 {
		return false
	}
	t.bytes -= float64(size)
	t.events -= float64(events)
	return true
}
