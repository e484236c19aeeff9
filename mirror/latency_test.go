package mirror

import (
	"math"
	"testing"
	"time"
)

// latencyBucket counts ⌊4 log₂ ms⌋ + 1, as math.Log2 gives it, away from
// the buckets' bounds (where the two roundings may differ by one).
func TestLatencyBucket(t *testing.T) {
	for d := time.Duration(0); d < 48*time.Hour; d = d*21/20 + time.Microsecond {
		ms := float64(d) / float64(time.Millisecond)
		want := 0
		if ms >= 1 {
			want = min(int(math.Log2(ms)*4)+1, latencyBuckets-1)
		}
		if got := latencyBucket(d); got != want {
			if x := math.Log2(ms) * 4; math.Abs(x-math.Round(x)) < 1e-9 {
				continue // on a bound
			}
			t.Fatalf("latencyBucket(%s) = %d, want %d", d, got, want)
		}
	}
	for i := 1; i < 60; i++ {
		if b := latencyBucket(bucketUpper(i) + time.Microsecond); b != i+1 {
			t.Errorf("just above bucket %d's upper bound %s: bucket %d, want %d", i, bucketUpper(i), b, i+1)
		}
	}
}
