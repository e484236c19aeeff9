package bench

import (
	"time"
)

// Measured is one phase as measured by its child, with this process's CPU
// time over the same interval (kfake and the emulator serving it).
type Measured struct {
	PhaseResult
	InfraCPUSeconds float64 `json:"infra_cpu_seconds"`
}

// RecordsPerSecond is the phase's throughput in records.
func (m Measured) RecordsPerSecond() float64 { return ratio(float64(m.Records), m.Seconds) }

// MBPerSecond is the phase's throughput in value megabytes (10^6 bytes).
func (m Measured) MBPerSecond() float64 { return ratio(float64(m.Bytes)/1e6, m.Seconds) }

// CPUPer1k is the child's CPU seconds per 1,000 records.
func (m Measured) CPUPer1k() float64 { return ratio(m.CPUSeconds*1000, float64(m.Records)) }

// UserCPUPer1k is the child's CPU seconds per 1,000 records less the
// garbage collector's and the scavenger's share (GoCPU): the code's own
// work. It is CPUPer1k when the runtime measured nothing.
func (m Measured) UserCPUPer1k() float64 {
	if m.GoCPU.Busy() == 0 {
		return m.CPUPer1k()
	}
	return m.CPUPer1k() * m.GoCPU.Share(m.GoCPU.User)
}

// GCShare is the garbage collector's share of the child's CPU time.
func (m Measured) GCShare() float64 { return m.GoCPU.Share(m.GoCPU.GC) }

// InfraCPUPer1k is kfake's and the emulator's CPU seconds per 1,000 records.
func (m Measured) InfraCPUPer1k() float64 { return ratio(m.InfraCPUSeconds*1000, float64(m.Records)) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// CaseResult is one case's measurements.
type CaseResult struct {
	Shape Shape `json:"shape"`
	// Records is the backlog the read, send and mirror phases covered.
	Records      int64   `json:"records"`
	BacklogBytes int64   `json:"backlog_bytes"`
	LoadSeconds  float64 `json:"load_seconds"`
	// Probe is the first, smaller drain (a quarter of Records when Records
	// is given): it sizes the case and shows peak RSS for a second backlog.
	Probe Measured `json:"probe"`
	// Calibration is a drain of the first full-size backlog, run when the
	// size is chosen from the probe; the backlog is topped up when it ran
	// much shorter than Config.Seconds.
	Calibration Measured `json:"calibration"`
	// Read, Send, Parallel and Mirror are the median of their rounds by
	// throughput (Mirror's PeakRSS is the highest of its rounds).
	Read     Measured `json:"read"`
	Send     Measured `json:"send"`
	Parallel Measured `json:"parallel"`
	Mirror   Measured `json:"mirror"`
	// ReadRounds, SendRounds, ParallelRounds and MirrorRounds are every
	// round, in order.
	ReadRounds     []Measured `json:"read_rounds"`
	SendRounds     []Measured `json:"send_rounds"`
	ParallelRounds []Measured `json:"parallel_rounds"`
	MirrorRounds   []Measured `json:"mirror_rounds"`
	// MirrorDedup is the median of MirrorDedupRounds: the same mirror
	// phase with MIRROR_DEDUPLICATE on (a clean drain), run right after
	// each mirror round.
	MirrorDedup       Measured   `json:"mirror_dedup"`
	MirrorDedupRounds []Measured `json:"mirror_dedup_rounds"`
	// IdleDrainsMs are the idle drains of the last mirror round.
	IdleDrainsMs []float64 `json:"idle_drains_ms"`
	Profiles     []string  `json:"profiles,omitempty"`
}

// Limit is the lower of the read and send limits in MB/s, and which it is.
func (c CaseResult) Limit() (float64, string) {
	r, s := c.Read.MBPerSecond(), c.Send.MBPerSecond()
	if r <= s {
		return r, "read"
	}
	return s, "send"
}

// Ratio is mirror ÷ min(read, send).
func (c CaseResult) Ratio() float64 {
	l, _ := c.Limit()
	return ratio(c.Mirror.MBPerSecond(), l)
}

// SerialLimit is the throughput, in MB/s, of doing the read and the send
// work one after the other on the same CPUs: 1 / (1/read + 1/send). When
// the machine's CPUs are the bottleneck (2 cores shared by the client,
// kfake, the emulator and other work), this and not min(read, send) is
// what an ideal engine reaches.
func (c CaseResult) SerialLimit() float64 {
	r, s := c.Read.MBPerSecond(), c.Send.MBPerSecond()
	if r == 0 || s == 0 {
		return 0
	}
	return 1 / (1/r + 1/s)
}

// SerialRatio is mirror ÷ SerialLimit.
func (c CaseResult) SerialRatio() float64 { return ratio(c.Mirror.MBPerSecond(), c.SerialLimit()) }

// ParallelRatio is mirror ÷ the parallel limit (read and send at the same
// time in one process, on independent data): the ceiling an engine that
// overlaps them reaches on these CPUs.
func (c CaseResult) ParallelRatio() float64 {
	return ratio(c.Mirror.MBPerSecond(), c.Parallel.MBPerSecond())
}

// CPUEfficiency is the client CPU per record of reading plus sending,
// divided by the mirror's: 1 means the engine adds no CPU of its own. It
// exceeds 1 where two processes cost more than one: each limit pays its
// own garbage collector (its live heap is small, so it collects often)
// and its own idle scheduler spinning; UserCPUEfficiency leaves the
// collector out.
func (c CaseResult) CPUEfficiency() float64 {
	return ratio(c.Read.CPUPer1k()+c.Send.CPUPer1k(), c.Mirror.CPUPer1k())
}

// UserCPUEfficiency is CPUEfficiency on the CPU left when the garbage
// collector's and the scavenger's shares are taken out of each phase's.
func (c CaseResult) UserCPUEfficiency() float64 {
	return ratio(c.Read.UserCPUPer1k()+c.Send.UserCPUPer1k(), c.Mirror.UserCPUPer1k())
}

// ParallelCPUEfficiency is the parallel limit's client CPU per record
// (reading and sending in one process, one garbage collector) ÷ the
// mirror's.
func (c CaseResult) ParallelCPUEfficiency() float64 {
	return ratio(c.Parallel.CPUPer1k(), c.Mirror.CPUPer1k())
}

// Results are a whole run's measurements.
type Results struct {
	Machine       Machine      `json:"machine"`
	Cases         []CaseResult `json:"cases"`
	InFlightBytes int64        `json:"inflight_bytes"`
	FetchBytes    int          `json:"fetch_bytes"`
	// Conditions are the far-Kafka and TLS cases.
	Conditions []ConditionCase `json:"conditions,omitempty"`
	// Latency are the steady-load latency runs (follow mode off and on).
	Latency []LatencyResult `json:"latency,omitempty"`
	// Quota are the quota case's runs.
	Quota []QuotaResult `json:"quota,omitempty"`
	// Scale are the scale-out case's rounds.
	Scale []ScaleResult `json:"scale,omitempty"`
	// Cluster are issue 48's cluster-sized cases.
	Cluster []ClusterResult `json:"cluster,omitempty"`
	// IdleDrainsMs are every case's idle drains, in milliseconds.
	IdleDrainsMs []float64 `json:"idle_drains_ms"`
	// StartToReadyMs are the handler's start-to-ready samples.
	StartToReadyMs []float64     `json:"start_to_ready_ms"`
	Duration       time.Duration `json:"duration_ns"`
	// LoadAvgEnd is the machine's load average when the run ended
	// (Machine.LoadAvg is at its start).
	LoadAvgEnd string `json:"loadavg_at_end"`
}
