package mirror

import (
	"fmt"
	"sync/atomic"
	"time"
)

// ReadTime is where a drain's readers spent their time, summed over its
// partitions (one reader each). It says what bounded the drain: a reader
// that waits mostly for Kafka is bounded by the distance to Kafka or its
// serving rate; one that waits for the in-flight bound holds as many events
// as MIRROR_INFLIGHT_BYTES allows, waiting for Event Hubs to acknowledge
// them (raising the bound helps while there is memory); one that waits for
// the senders feeds Event Hubs as fast as the senders send, one batch at a
// time per hub partition. What is left is the readers' own work (handing
// records over) and the scheduler.
type ReadTime struct {
	// Total is the readers' time from start to end (or to now).
	Total time.Duration `json:"total_ns"`
	// Kafka is the time spent waiting for fetches that no prefetch had
	// ready: Kafka's round trip and serving time, and in follow mode the
	// long polls of caught-up partitions.
	Kafka time.Duration `json:"kafka_ns"`
	// InFlight is the time spent waiting for room in the in-flight bound.
	InFlight time.Duration `json:"inflight_ns"`
	// Senders is the time spent waiting for a hub partition's sender to
	// take an event (its queue full).
	Senders time.Duration `json:"senders_ns"`
}

// share is part as a whole percentage of t.Total.
func (t ReadTime) share(part time.Duration) int {
	if t.Total <= 0 {
		return 0
	}
	return int((100*part + t.Total/2) / t.Total)
}

// String renders the shares, e.g. "readers waited 13% for Kafka, 45% for
// the in-flight bound, 19% for the senders".
func (t ReadTime) String() string {
	return fmt.Sprintf("readers waited %d%% for Kafka, %d%% for the in-flight bound, %d%% for the senders",
		t.share(t.Kafka), t.share(t.InFlight), t.share(t.Senders))
}

// Shares renders the shares alone, "13% / 45% / 19%" (Kafka, in-flight
// bound, senders).
func (t ReadTime) Shares() string {
	return fmt.Sprintf("%d%% / %d%% / %d%%", t.share(t.Kafka), t.share(t.InFlight), t.share(t.Senders))
}

// minus is what t adds to prev, an earlier reading of the same drain.
func (t ReadTime) minus(prev ReadTime) ReadTime {
	return ReadTime{Total: t.Total - prev.Total, Kafka: t.Kafka - prev.Kafka, InFlight: t.InFlight - prev.InFlight, Senders: t.Senders - prev.Senders}
}

// readClock accumulates a drain's ReadTime from base on.
type readClock struct {
	base time.Time
	// ended is the time of the readers that ended; kafka, inFlight and
	// sender are the waits (nanoseconds).
	ended, kafka, inFlight, sender atomic.Int64
	// startSum is the sum of the running readers' start times
	// (nanoseconds after base) and running their number: their time so
	// far is running × now − startSum.
	startSum, running atomic.Int64
}

// newReadClock returns a clock starting now.
func newReadClock() *readClock {
	return &readClock{base: time.Now()}
}

// begin counts a reader starting now; the returned func ends it.
func (c *readClock) begin() (end func()) {
	start := int64(time.Since(c.base))
	c.startSum.Add(start)
	c.running.Add(1)
	return func() {
		c.ended.Add(int64(time.Since(c.base)) - start)
		c.running.Add(-1)
		c.startSum.Add(-start)
	}
}

// waited adds the time since t0 to counter.
func waited(counter *atomic.Int64, t0 time.Time) {
	counter.Add(int64(time.Since(t0)))
}

// read returns the ReadTime so far.
func (c *readClock) read() ReadTime {
	now := int64(time.Since(c.base))
	// Not one atomic snapshot: a reader ending meanwhile may be missed or
	// counted twice in this reading, never in the final one.
	running := c.running.Load()*now - c.startSum.Load()
	return ReadTime{
		Total:    time.Duration(c.ended.Load() + max(running, 0)),
		Kafka:    time.Duration(c.kafka.Load()),
		InFlight: time.Duration(c.inFlight.Load()),
		Senders:  time.Duration(c.sender.Load()),
	}
}
