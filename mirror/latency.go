package mirror

import (
	"math"
	"sync/atomic"
	"time"
)

// latencyBuckets: bucket i counts latencies below 2^(i/4) ms (the last one
// everything above), so quantiles come out within 19 % from 1 ms to
// about 12 days.
const latencyBuckets = 4 * 40

// latencyHistogram counts end-to-end latencies in logarithmic buckets; it
// is safe for concurrent use.
type latencyHistogram struct {
	counts [latencyBuckets]atomic.Int64
	n      atomic.Int64
	max    atomic.Int64 // nanoseconds
}

// latencyBucket is the bucket of latency d: ⌊4 log₂ ms⌋ + 1 from 1 ms
// on, from the float's exponent and a comparison of its fraction with
// 2^(-k/4), since the sender counts every record (math.Log2 was a
// hundredth of the CPU of a 100 B keyed drain).
func latencyBucket(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 1 {
		return 0
	}
	frac, exp := math.Frexp(ms) // ms = frac × 2^exp, ½ ≤ frac < 1
	quarter := 0                // ⌊4 log₂ frac⌋ + 4
	switch {
	case frac >= 0.8408964152537145: // 2^(-1/4)
		quarter = 3
	case frac >= 0.7071067811865476: // 2^(-1/2)
		quarter = 2
	case frac >= 0.5946035575013605: // 2^(-3/4)
		quarter = 1
	}
	return min(4*(exp-1)+quarter+1, latencyBuckets-1)
}

// bucketUpper is the upper bound of bucket i.
func bucketUpper(i int) time.Duration {
	return time.Duration(math.Exp2(float64(i)/4) * float64(time.Millisecond))
}

// add adds the latencies counted in c.
func (h *latencyHistogram) add(c *latencyCounts) {
	if c.n == 0 {
		return
	}
	for i, n := range c.counts {
		if n > 0 {
			h.counts[i].Add(n)
		}
	}
	h.n.Add(c.n)
	for {
		m := h.max.Load()
		if int64(c.max) <= m || h.max.CompareAndSwap(m, int64(c.max)) {
			return
		}
	}
}

// latencyCounts counts latencies in one goroutine (one sent batch's), to be
// added to a latencyHistogram at once rather than record by record.
type latencyCounts struct {
	counts [latencyBuckets]int64
	n      int64
	max    time.Duration
}

// observe counts n records of latency d.
func (c *latencyCounts) observe(d time.Duration, n int64) {
	d = max(d, 0)
	c.counts[latencyBucket(d)] += n
	c.n += n
	c.max = max(c.max, d)
}

// Latency summarises end-to-end latencies (Event Hubs' acknowledgement
// minus the Kafka timestamp) of a drain's records.
type Latency struct {
	Records int64         `json:"records"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Max     time.Duration `json:"max_ns"`
	// Buckets count the records per latency bucket (upper bound), for
	// metrics; not in the JSON.
	Buckets []LatencyBucket `json:"-"`
}

// LatencyBucket counts the records whose latency was at most Upper (and
// above the previous bucket's).
type LatencyBucket struct {
	Upper time.Duration
	Count int64
}

// summary returns the quantiles (each the upper bound of its bucket,
// capped at the maximum), nil when nothing was observed.
func (h *latencyHistogram) summary() *Latency {
	n := h.n.Load()
	if n == 0 {
		return nil
	}
	maxD := time.Duration(h.max.Load())
	q := func(f float64) time.Duration {
		want := int64(math.Ceil(f * float64(n)))
		var seen int64
		for i := range h.counts {
			seen += h.counts[i].Load()
			if seen >= want {
				return min(bucketUpper(i), maxD)
			}
		}
		return maxD
	}
	l := &Latency{Records: n, P50: q(0.5), P99: q(0.99), Max: maxD}
	for i := range h.counts {
		if c := h.counts[i].Load(); c > 0 {
			l.Buckets = append(l.Buckets, LatencyBucket{Upper: min(bucketUpper(i), maxD), Count: c})
		}
	}
	return l
}
