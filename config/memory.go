package config

import (
	"os"
	"strconv"
	"strings"
)

// GC sizing. Go's collector runs whenever the heap has doubled since the
// last collection (GOGC=100), however much memory the process may use. The
// handler sets a soft memory limit (GOMEMLIMIT) from the in-flight bound and
// the instance's memory, which the collector keeps to by collecting more
// often when the heap nears it: a safety net against running out of the
// plan's memory, set well above what the mirror holds. A limit of 4 × the
// bound + 96 MiB (352 MiB) was tried: at the namespace's quota the heap
// reached it, the collector ran at its CPU cap and drains failed; GOGC 400
// under that limit saved no CPU the shared machine could measure and raised
// peak RSS by a sixth (docs/performance.md). GOGC stays as it is.
const (
	// memoryLimitBase is the memory limit's part that the in-flight bound
	// does not size: the runtime, the clients and their buffers (Kafka
	// fetches read ahead, one batch per Event Hubs sender).
	memoryLimitBase = 128 << 20
	// memoryLimitPerInFlight is the memory limit's part per byte of the
	// in-flight bound: the bound's own bytes, what is read ahead of it and
	// the collector's room.
	memoryLimitPerInFlight = 8
)

// MemoryLimit returns the soft memory limit (runtime/debug.SetMemoryLimit)
// the handler sets for a process whose in-flight bound is inFlight and that
// may use available bytes (0: unknown): 8 × inFlight + 128 MiB (640 MiB
// for the default 64 MiB), at most three quarters of available. ok is false
// when GOMEMLIMIT is set: the user's limit stands.
func MemoryLimit(getenv func(string) string, inFlight, available int64) (limit int64, ok bool) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	limit = memoryLimitPerInFlight*inFlight + memoryLimitBase
	if available > 0 {
		limit = min(limit, available/4*3)
	}
	return limit, true
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
