package mirror

import (
	"fmt"
	"sync/atomic"

	"github.com/ehmirror/ehmirror/partitionkey"
)

// Partitioning chooses the Event Hubs partition of each record.
type Partitioning string

// The partitioning strategies. In every strategy a record without a key goes
// to partition (Kafka partition mod N), so keyless records keep the order of
// their Kafka partition; RoundRobin is the exception and keeps no order.
const (
	// PartitionByHash places keyed records with the Event Hubs service's own
	// partition-key hash, as if the key had been sent as the partition key:
	// records with the same key land on the same partition in Kafka order.
	PartitionByHash Partitioning = "hash"
	// PartitionByKafkaMurmur2 places keyed records where Kafka's default
	// partitioner (and MirrorMaker) would: murmur2(key) mod N.
	PartitionByKafkaMurmur2 Partitioning = "kafka-murmur2"
	// PartitionPreserve maps Kafka partition p to Event Hubs partition p mod N.
	PartitionPreserve Partitioning = "preserve"
	// PartitionRoundRobin spreads records evenly, ignoring keys and order.
	PartitionRoundRobin Partitioning = "round-robin"
)

// ParsePartitioning validates a strategy name; empty means PartitionByHash.
func ParsePartitioning(s string) (Partitioning, error) {
	switch p := Partitioning(s); p {
	case "":
		return PartitionByHash, nil
	case PartitionByHash, PartitionByKafkaMurmur2, PartitionPreserve, PartitionRoundRobin:
		return p, nil
	}
	return "", fmt.Errorf("partitioning %q: want hash, kafka-murmur2, preserve or round-robin", s)
}

// partitioner picks partition indexes for one hub during one drain.
type partitioner struct {
	strategy Partitioning
	n        int
	next     atomic.Uint64
}

// index returns the index (0..n-1) of the hub partition for r.
func (p *partitioner) index(r *Record) int {
	switch {
	case p.strategy == PartitionRoundRobin:
		return int(p.next.Add(1) % uint64(p.n))
	case r.Key != nil && p.strategy == PartitionByHash:
		return partitionkey.PartitionBytes(r.Key, p.n)
	case r.Key != nil && p.strategy == PartitionByKafkaMurmur2:
		return int(toPositive(murmur2(r.Key)) % int32(p.n))
	}
	return int(r.Partition) % p.n
}

// murmur2 is Kafka's murmur2 hash (seed 0x9747b28c), as used by the Java
// client's default partitioner.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

func toPositive(x int32) int32 { return x & 0x7fffffff }
