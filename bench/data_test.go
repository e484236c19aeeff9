package bench

import (
	"fmt"
	"testing"
)

// TestGenKeys: a keyed shape's keys are "key-" and the key's id in seven
// digits, each id confined to its record's partition, the same for the
// loader and the send limit, and taking one costs no allocation (the send
// limit measures sending, not making keys); keyless records have none.
func TestGenKeys(t *testing.T) {
	g := newGen(Shape{Name: "100B-keyed", Size: 100, Keyed: true})
	for ti := range NumTopics {
		for p := range NumPartitions {
			for _, off := range []int64{0, 1, 999, 123_456_789} {
				id := (mix(ti, p, off)>>8)%(DistinctKeys/NumPartitions)*NumPartitions + uint64(p)
				want := fmt.Sprintf("key-%07d", id)
				if got := string(g.key(ti, p, off)); got != want {
					t.Fatalf("key of topic %d partition %d offset %d = %q, want %q", ti, p, off, got, want)
				}
				if int(id%NumPartitions) != p {
					t.Fatalf("key %q of partition %d belongs to partition %d", want, p, id%NumPartitions)
				}
			}
		}
	}
	if k := g.key(0, 0, 0); cap(k) != len(k) {
		t.Fatalf("a key has room for %d more bytes: an append would write over the next key", cap(k)-len(k))
	}
	if n := testing.AllocsPerRun(100, func() { _ = g.key(1, 2, 3) }); n != 0 {
		t.Fatalf("taking a key allocates %.0f times", n)
	}
	if k := newGen(Shape{Name: "100B-keyless", Size: 100}).key(0, 0, 0); k != nil {
		t.Fatalf("a keyless record has key %q", k)
	}
}
