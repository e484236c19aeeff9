package partitionkey

import "testing"

// The vectors of the .NET SDK's PartitionResolverTests.cs.
var hashVectors = []struct {
	key  string
	code int16
}{
	{"7", -15263},
	{"131", 30562},
	{"7149583486996073602", 12977},
	{"FWfAT", -22341},
	{"sOdeEAsyQoEuEFPGerWO", -6503},
	{"FAyAIctPeCgmiwLKbJcyswoHglHVjQdvtBowLACDNORsYvOcLddNJYDmhAVkbyLOrHTKLneMNcbgWVlasVywOByANjs", 5226},
	{"1XYM6!(7(lF5wq4k4m*e$Nc!1ezLJv*1YK1Y-C^*&B$O)lq^iUkG(TNzXG;Zi#z2Og*Qq0#^*k):vXh$3,C7We7%W0meJ;b3,rQCg^J;^twXgs5E$$hWKxqp", 23950},
	{"E(x;RRIaQcJs*P;D&jTPau-4K04oqr:lF6Z):ERpo&;9040qyV@G1_c9mgOs-8_8/10Fwa-7b7-yP!T-!IH&968)FWuI;(^g$2fN;)HJ^^yTn:", -29304},
	{"!c*_!I@1^c", 15372},
	{"p4*!jioeO/z-!-;w:dh", -3104},
	{"$0cb", 26269},
	{"-4189260826195535198", 453},
}

func TestHashCodeVectors(t *testing.T) {
	for _, v := range hashVectors {
		if got := HashCode(v.key); got != v.code {
			t.Errorf("HashCode(%q) = %d, want %d", v.key, got, v.code)
		}
	}
}

func TestPartitionUsesTruncatingRemainder(t *testing.T) {
	for _, v := range hashVectors {
		for _, n := range []int{1, 2, 4, 7, 32} {
			want := int(v.code) % n
			if want < 0 {
				want = -want
			}
			if got := Partition(v.key, n); got != want {
				t.Errorf("Partition(%q, %d) = %d, want %d", v.key, n, got, want)
			}
		}
	}
	// The reference's worked example: hashCode -24908 with 32 partitions is 12, not 20.
	if got := abs(-24908 % 32); got != 12 {
		t.Fatalf("remainder rule: got %d", got)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestPartitionEmptyKey(t *testing.T) {
	if p := Partition("", 4); p < 0 || p >= 4 {
		t.Fatalf("Partition(\"\", 4) = %d", p)
	}
}

// TestPartitionBytesDoesNotAllocate: the mirror places every keyed record
// with it.
func TestPartitionBytesDoesNotAllocate(t *testing.T) {
	key := []byte(hashVectors[5].key)
	if n := testing.AllocsPerRun(100, func() { PartitionBytes(key, 32) }); n != 0 {
		t.Errorf("PartitionBytes allocates %.0f times per call", n)
	}
	if got, want := PartitionBytes(key, 32), Partition(hashVectors[5].key, 32); got != want {
		t.Errorf("PartitionBytes %d, Partition %d", got, want)
	}
}
