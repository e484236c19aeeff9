package config

import (
	"os"
	"strconv"
	"strings"
)

// GC sizing. Go's collector by default runs whenever the heap has doubled
// since the last collection (GOGC=100), however much memory the process
// may use; with small records it ran about a tenth of the mirror's CPU.
// The mirror already bounds what it holds (MIRROR_INFLIGHT_BYTES), so the
// handler lets the heap grow further between collections (GCPercent) under
// a soft memory limit sized from that bound (MemoryLimit), which the
// collector keeps to however the heap grows.
const (
	// GCPercent is the GOGC the handler sets when GOGC is not set.
	GCPercent = 400
	// memoryLimitBase is the memory limit's part that the in-flight bound
	// does not size: the runtime, the clients and their buffers (Kafka
	// fetches, one batch per Event Hubs sender).
	memoryLimitBase = 96 << 20
	// memoryLimitPerInFlight is the memory limit's part per byte of the
	// in-flight bound: the bound's own bytes and room for the collector.
	memoryLimitPerInFlight = 4
)

// MemoryLimit is the soft memory limit (GOMEMLIMIT) the handler sets from
// the in-flight bound when GOMEMLIMIT is not set: 4 × inFlight + 96 MiB
// (352 MiB for the default 64 MiB), and at most three quarters of
// available, the memory the process may use (its cgroup's limit, the plan's
// memory; 0 when unknown).
func MemoryLimit(inFlight, available int64) int64 {
	limit := memoryLimitPerInFlight*inFlight + memoryLimitBase
	if available > 0 {
		limit = min(limit, available/4*3)
	}
	return limit
}

// GC returns the memory limit and GC percent to set (runtime/debug's
// SetMemoryLimit and SetGCPercent) for a process whose in-flight bound is
// inFlight and that may use available bytes (0: unknown). Either is -1 when
// the environment already sets it (GOMEMLIMIT, GOGC): the user's choice
// stands. A GOGC of its own without GOMEMLIMIT keeps the limit; a
// GOMEMLIMIT without GOGC keeps GCPercent.
func GC(getenv func(string) string, inFlight, available int64) (limit int64, percent int) {
	limit, percent = MemoryLimit(inFlight, available), GCPercent
	if getenv("GOMEMLIMIT") != "" {
		limit = -1
	}
	if getenv("GOGC") != "" {
		percent = -1
	}
	return limit, percent
}

// AvailableMemory is the memory limit of the process's cgroup (v2
// memory.max, else v1 memory.limit_in_bytes): on Linux plans, the
// instance's memory. 0 when there is none or it cannot be read.
func AvailableMemory() int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<50 { // "max", or v1's "no limit"
			return 0
		}
		return n
	}
	return 0
}
