// Package partitionkey places partition keys on Event Hubs partitions the way the
// service does: Bob Jenkins' lookup3 hashlittle2 over the key's UTF-8 bytes, the
// two halves XORed and truncated to a signed 16-bit integer, then a C#-style
// remainder (truncating towards zero) whose absolute value is the partition index.
//
// The .NET SDK describes its port of this function as "a direct port of the Event
// Hubs service code"; this package follows the .NET behaviour, which the test
// vectors pin down.
package partitionkey

import "math/bits"

// Partition returns the index of the partition, in [0, partitionCount), on which
// Event Hubs places an event sent with the given partition key. It panics if
// partitionCount is not positive.
func Partition(key string, partitionCount int) int {
	return PartitionBytes([]byte(key), partitionCount)
}

// PartitionBytes is Partition of a key held as bytes (a Kafka record's key),
// without copying it into a string.
func PartitionBytes(key []byte, partitionCount int) int {
	if partitionCount <= 0 {
		panic("partitionkey: partition count must be positive")
	}
	h1, h2 := HashLittle2(key, 0, 0)
	p := int(int16(h1^h2)) % partitionCount // Go's % truncates towards zero, like C#.
	if p < 0 {
		p = -p
	}
	return p
}

// HashCode returns the service's 16-bit hash code of key: the XOR of the two
// lookup3 hashlittle2 results (seeds 0 and 0), truncated to int16.
func HashCode(key string) int16 {
	h1, h2 := HashLittle2([]byte(key), 0, 0)
	return int16(h1 ^ h2)
}

// HashLittle2 is Bob Jenkins' lookup3 hashlittle2 over data with the primary seed
// pc and the secondary seed pb. It returns the primary hash (c) and the secondary
// hash (b). Blocks are read little-endian and tail bytes are added unsigned.
func HashLittle2(data []byte, pc, pb uint32) (c, b uint32) {
	a := 0xdeadbeef + uint32(len(data)) + pc
	b = a
	c = a + pb

	k := data
	for len(k) > 12 {
		a += le32(k[0:4])
		b += le32(k[4:8])
		c += le32(k[8:12])
		a, b, c = mix(a, b, c)
		k = k[12:]
	}
	if len(k) == 0 {
		return c, b
	}
	// Add the last 1..12 bytes, each shifted into its little-endian position.
	for i, x := range k {
		v := uint32(x) << (8 * uint(i%4))
		switch i / 4 {
		case 0:
			a += v
		case 1:
			b += v
		default:
			c += v
		}
	}
	a, b, c = final(a, b, c)
	return c, b
}

func le32(p []byte) uint32 {
	return uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24
}

func mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

func final(a, b, c uint32) (uint32, uint32, uint32) {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return a, b, c
}
