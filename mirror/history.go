package mirror

import (
	"time"
)

// HistorySpan is how far back the lag and rate history of a process
// reaches; HistoryStep the spacing of its points.
const (
	HistorySpan = time.Hour
	HistoryStep = 30 * time.Second
)

// HistoryPoint is the group's lag and this process's delivered rate at one
// time.
type HistoryPoint struct {
	At time.Time `json:"at"`
	// Lag is the group's total lag (topics not paused) read at At.
	Lag int64 `json:"lag"`
	// RecordsPerSec is the rate Event Hubs acknowledged records at in this
	// process since the previous point.
	RecordsPerSec float64 `json:"records_per_sec"`
	// CommittedPerSec is the rate the group's committed offsets advanced
	// at since the previous point, by the drains of every instance.
	CommittedPerSec float64 `json:"committed_per_sec"`

	records   int64 // cumulative records acknowledged at At
	committed int64 // sum of the committed offsets at At
}

// history is an in-memory ring of the lag read over the last HistorySpan,
// one point every HistoryStep (the newest point moves with each read).
type history struct {
	points []HistoryPoint
}

// add records a lag read at at, with the cumulative records acknowledged.
func (h *history) add(at time.Time, lag, records, committed int64) {
	p := HistoryPoint{At: at, Lag: lag, records: records, committed: committed}
	n := len(h.points)
	if n >= 2 && h.points[n-1].At.Sub(h.points[n-2].At) < HistoryStep {
		h.points[n-1] = p // the newest point follows the reads until a step old
	} else {
		h.points = append(h.points, p)
	}
	i := 0
	for i < len(h.points) && at.Sub(h.points[i].At) > HistorySpan {
		i++
	}
	h.points = h.points[i:]
}

// snapshot returns the points with their rates.
func (h *history) snapshot() []HistoryPoint {
	out := make([]HistoryPoint, len(h.points))
	copy(out, h.points)
	for i := 1; i < len(out); i++ {
		if dt := out[i].At.Sub(out[i-1].At).Seconds(); dt > 0 {
			out[i].RecordsPerSec = float64(out[i].records-out[i-1].records) / dt
			out[i].CommittedPerSec = max(float64(out[i].committed-out[i-1].committed)/dt, 0)
		}
	}
	return out
}

// noteLag keeps a lag read from Kafka as the last known lag and adds it to
// the history.
func (t *liveTracker) noteLag(rep *LagReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastLag = rep
	s := t.sampleLocked(rep.Time)
	var committed int64
	for _, p := range rep.Partitions {
		if p.Committed != NoOffset {
			committed += p.Committed
		}
	}
	t.history.add(rep.Time, rep.Unpaused(), s.records, committed)
}

// recover records that a success at the place key ended an outage at at.
func (t *liveTracker) recover(key string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recovered[key] = at
}

// recoveredAfter reports whether a success at the place key ended an
// outage there after after.
func (t *liveTracker) recoveredAfter(key string, after time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.recovered[key]
	return ok && at.After(after)
}

// LastLag returns the last lag this process read from Kafka (by a status
// request, a metrics scrape or a drain), nil before the first: when Kafka
// cannot be read, the last known figures with their time (LagReport.Time).
func (m *Mirror) LastLag() *LagReport {
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	return m.live.lastLag
}

// History returns the lag and delivered rate over the last HistorySpan, as
// this process read them, oldest first.
func (m *Mirror) History() []HistoryPoint {
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	return m.live.history.snapshot()
}
