package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime is the calling process's user plus system CPU time, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatus returns a "VmXxx:" field of /proc/self/status in bytes, or -1
// where it is unavailable.
func procStatus(field string) int64 { return procStatusOf("/proc/self/status", field) }

// procStatusOf returns a "VmXxx:" field of a /proc/PID/status file in
// bytes, or -1 where it is unavailable.
func procStatusOf(path, field string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, field+":") {
			continue
		}
		f := strings.Fields(line[len(field)+1:])
		if len(f) == 0 {
			return -1
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		return kb << 10
	}
	return -1
}

// heapLive is the Go heap's live bytes as of the last garbage collection.
func heapLive() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int64(s[0].Value.Uint64())
}

// peakRSS is the process's peak resident set size (VmHWM) in bytes.
func peakRSS() int64 { return procStatus("VmHWM") }

// currentRSS is the process's resident set size (VmRSS) in bytes.
func currentRSS() int64 { return procStatus("VmRSS") }

// resetPeakRSS resets VmHWM to the current RSS (Linux ≥ 4.0, writing "5" to
// clear_refs), so that setup before a measurement does not count. It reports
// whether the reset worked.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// Machine describes where a run happened.
type Machine struct {
	Date     string `json:"date"`
	NumCPU   int    `json:"nproc"`
	CPUModel string `json:"cpu_model"`
	MemTotal string `json:"mem_total"`
	Go       string `json:"go"`
	OS       string `json:"os"`
	LoadAvg  string `json:"loadavg_at_start"`
}

// DescribeMachine reads the CPU model, memory and load of this machine.
func DescribeMachine(now time.Time) Machine {
	m := Machine{
		Date:   now.UTC().Format(time.RFC3339),
		NumCPU: runtime.NumCPU(),
		Go:     runtime.Version(),
		OS:     runtime.GOOS + "/" + runtime.GOARCH,
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
					}
				}
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

// GoCPU is the Go runtime's own estimate of where a process's CPU time
// went over an interval (runtime/metrics /cpu/classes/*, in seconds). The
// runtime integrates GOMAXPROCS over wall time, so its figures are not
// comparable with getrusage's: only their shares are (see [GoCPU.Share]).
type GoCPU struct {
	User     float64 `json:"user_s"`
	GC       float64 `json:"gc_s"`
	GCIdle   float64 `json:"gc_idle_mark_s"` // part of GC: marking on Ps that had nothing else to do
	Scavenge float64 `json:"scavenge_s"`
	Idle     float64 `json:"idle_s"`
}

// goCPUNames are the runtime/metrics names read into a GoCPU, in field order.
var goCPUNames = [...]string{
	"/cpu/classes/user:cpu-seconds",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/gc/mark/idle:cpu-seconds",
	"/cpu/classes/scavenge/total:cpu-seconds",
	"/cpu/classes/idle:cpu-seconds",
}

// readGoCPU reads this process's /cpu/classes since it started, after a
// garbage collection: the runtime brings those figures up to date only when
// a collection ends, so without one a phase too short to collect would show
// nothing and a longer one would end at its last collection. The forced
// collection's own cost is in the figures (one cycle more than the phase
// ran, which is a small share of a phase of seconds).
func readGoCPU() GoCPU {
	runtime.GC()
	s := make([]metrics.Sample, len(goCPUNames))
	for i, n := range goCPUNames {
		s[i].Name = n
	}
	metrics.Read(s)
	v := make([]float64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			v[i] = s[i].Value.Float64()
		}
	}
	return GoCPU{User: v[0], GC: v[1], GCIdle: v[2], Scavenge: v[3], Idle: v[4]}
}

// since is the interval from b to g.
func (g GoCPU) since(b GoCPU) GoCPU {
	return GoCPU{User: g.User - b.User, GC: g.GC - b.GC, GCIdle: g.GCIdle - b.GCIdle, Scavenge: g.Scavenge - b.Scavenge, Idle: g.Idle - b.Idle}
}

// Busy is the runtime's estimate of the time it ran Go code or the runtime:
// user, GC and scavenging.
func (g GoCPU) Busy() float64 { return g.User + g.GC + g.Scavenge }

// Share is x's share of the busy time (0 when nothing was measured).
func (g GoCPU) Share(x float64) float64 { return ratio(x, g.Busy()) }
