package bench

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ehmirror/ehmirror/mirror"
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

// TestGenHeaders: the headers are a W3C traceparent made of the record's
// hash, a content type and one of eight tenants, the same whether fresh
// (the loader) or written into reused memory (the send limit), which
// costs no allocation once grown; shapes without headers have none.
func TestGenHeaders(t *testing.T) {
	g := newGen(Shape{Name: "100B-headers", Size: 100, Headers: true})
	var rh reusedHeaders
	for _, off := range []int64{0, 1, 77, 123_456_789} {
		h := mix(2, 3, off)
		want := []string{
			"traceparent=" + fmt.Sprintf("00-%016x%016x-%016x-01", h, h^uint64(off), h>>7),
			"content-type=application/json",
			fmt.Sprintf("tenant=t%d", h%8),
		}
		for name, hs := range map[string][]mirror.Header{"fresh": g.headers(2, 3, off), "reused": g.recordReusing(&rh, 2, 3, off).Headers} {
			var got []string
			n := 0
			for _, x := range hs {
				got = append(got, x.Key+"="+string(x.Value))
				n += len(x.Key) + len(x.Value)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s headers of offset %d = %q, want %q", name, off, got, want)
			}
			if n != 102 {
				t.Fatalf("%s headers of offset %d hold %d bytes, want 102", name, off, n)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = g.recordReusing(&rh, 1, 2, 3) }); n != 0 {
		t.Fatalf("a record with reused headers allocates %.0f times", n)
	}
	if hs := newGen(Shape{Name: "100B-keyless", Size: 100}).headers(0, 0, 0); hs != nil {
		t.Fatalf("a shape without headers has headers %v", hs)
	}
}
