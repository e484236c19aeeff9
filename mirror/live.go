package mirror

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// LiveFailureAfter is how long the sends to one event hub partition, or the
// fetches of one Kafka partition, of a running drain may keep failing
// before the status reports a problem; a failure that lasted this long
// also counts as an error of the drain (its report's Outages), even when
// it ended before the drain did.
const LiveFailureAfter = 5 * time.Second

// rateWindow is the span over which Throughput measures the recent rate.
const rateWindow = 5 * time.Minute

// CurrentWindow is the span over which Throughput measures the current
// rate, the one an ETA uses.
const CurrentWindow = 30 * time.Second

// Outage is a run of failed attempts, without a success in between, of a
// running drain: sends to one event hub partition or fetches of one Kafka
// partition.
type Outage struct {
	// Kind classifies the failure (one of the Kind constants).
	Kind string `json:"kind"`
	// Hub and HubPartition name a send outage; Topic and Partition a fetch
	// outage (Kafka).
	Hub          string `json:"hub,omitempty"`
	HubPartition string `json:"hub_partition,omitempty"`
	Topic        string `json:"topic,omitempty"`
	Partition    int32  `json:"partition"`
	// Since is the first failed attempt; Last the latest; Until the
	// success that ended it (zero while it lasts).
	Since    time.Time `json:"since"`
	Last     time.Time `json:"last"`
	Until    time.Time `json:"until,omitzero"`
	Attempts int       `json:"attempts"`
	// Error is the latest attempt's error; Cause why the service could
	// not be reached (see NetworkCause), "" when it answered.
	Error string `json:"error"`
	Cause string `json:"cause,omitempty"`
}

// Ongoing reports whether no success has ended the outage.
func (o Outage) Ongoing() bool { return o.Until.IsZero() }

// String is the outage in one line, with its duration as of now when it
// lasts.
func (o Outage) String() string {
	return o.describe(time.Now())
}

func (o Outage) describe(now time.Time) string {
	end, verb := o.Until, "failed"
	if o.Ongoing() {
		end, verb = now, "failing"
	}
	where := fmt.Sprintf("kafka fetches of %s/%d", o.Topic, o.Partition)
	if o.Hub != "" {
		where = fmt.Sprintf("sends to event hub %s partition %s", o.Hub, o.HubPartition)
	}
	s := fmt.Sprintf("%s %s for %s since %s (%d attempts): %s", where, verb, Ago(end.Sub(o.Since)), o.Since.UTC().Format("15:04:05Z"), o.Attempts, strings.ReplaceAll(o.Error, "\n", "; "))
	if !o.Ongoing() {
		s += fmt.Sprintf("; recovered at %s", o.Until.UTC().Format("15:04:05Z"))
	}
	return s
}

// liveDrain follows one running drain's failures.
type liveDrain struct {
	mu      sync.Mutex
	failing map[string]*Outage
	past    []Outage // ended, after lasting LiveFailureAfter or longer
	// recovered, when set, is told each place whose outage a success
	// ended, and when.
	recovered func(key string, at time.Time)
}

func newLiveDrain(recovered func(key string, at time.Time)) *liveDrain {
	return &liveDrain{failing: map[string]*Outage{}, recovered: recovered}
}

// failed records a failed attempt at the place o names (Kind, Hub and
// HubPartition, or Topic and Partition).
func (l *liveDrain) failed(o Outage, err error) {
	if l == nil {
		return
	}
	now := time.Now()
	key := o.key()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.failing[key]
	if cur == nil {
		o.Since = now
		cur = &o
		l.failing[key] = cur
	}
	cur.Kind, cur.Last, cur.Error, cur.Cause = o.Kind, now, err.Error(), NetworkCause(err)
	cur.Attempts++
}

// succeeded ends the outage at the place o names, if any.
func (l *liveDrain) succeeded(o Outage) {
	if l == nil {
		return
	}
	key := o.key()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.failing[key]
	if cur == nil {
		return
	}
	delete(l.failing, key)
	cur.Until = time.Now()
	if cur.Until.Sub(cur.Since) >= LiveFailureAfter {
		l.past = append(l.past, *cur)
	}
	if l.recovered != nil {
		l.recovered(key, cur.Until)
	}
}

// attempted returns every outage of the drain, however short, ongoing or
// ended.
func (l *liveDrain) attempted() []Outage {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.past)
	for _, o := range l.failing {
		out = append(out, *o)
	}
	return out
}

func (o Outage) key() string {
	if o.Hub != "" {
		return "eh\x00" + o.Hub + "\x00" + o.HubPartition
	}
	return fmt.Sprintf("kafka\x00%s\x00%d", o.Topic, o.Partition)
}

// outages returns the ended outages and those lasting LiveFailureAfter or
// longer as of now, ordered by start.
func (l *liveDrain) outages(now time.Time) []Outage {
	if l == nil {
		return nil
	}
	// The ended ones lasted LiveFailureAfter already (succeeded keeps no
	// shorter one).
	out := slices.DeleteFunc(l.attempted(), func(o Outage) bool { return o.Ongoing() && now.Sub(o.Since) < LiveFailureAfter })
	slices.SortFunc(out, func(a, b Outage) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.key(), b.key())
	})
	return out
}

// RunningDrain is a drain running now in this process, with its progress.
type RunningDrain struct {
	Run     string    `json:"run"`
	Started time.Time `json:"started"`
	// Deadline is when the drain stops reading at the latest
	// (MIRROR_MAX_DURATION); FollowUntil when a following drain stops.
	Deadline    time.Time `json:"deadline"`
	FollowUntil time.Time `json:"follow_until,omitzero"`
	Partitions  int       `json:"partitions"`
	// Records and Bytes are what Event Hubs acknowledged so far.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Lag is the records between the drain's commit points and the ends it
	// last saw, over its partitions.
	Lag int64 `json:"lag"`
	// Outages are the failures that lasted LiveFailureAfter or longer,
	// ongoing or ended.
	Outages []Outage `json:"outages,omitempty"`
}

// Throughput is the rate of the records Event Hubs acknowledged over the
// last minutes, in this process.
type Throughput struct {
	// Window is the span measured (up to five minutes; shorter after a
	// start).
	Window        time.Duration `json:"window_ns"`
	RecordsPerSec float64       `json:"records_per_sec"`
	BytesPerSec   float64       `json:"bytes_per_sec"`
	// CurrentPerSec is the rate over the last CurrentWindow or so (from
	// the newest sample at least that old): what an ETA is computed
	// from, so that an outage does not inherit the rate before it.
	CurrentPerSec float64 `json:"current_per_sec"`
	// LastDelivered is when Event Hubs last acknowledged a record of this
	// process (the acknowledgement's time, not when it was noticed).
	LastDelivered time.Time `json:"last_delivered,omitzero"`
	TotalRecords  int64     `json:"total_records"`
	TotalBytes    int64     `json:"total_bytes"`
	// Throttled counts the sends Event Hubs refused with server-busy over
	// the window: the namespace is at its throughput quota, so the rate
	// is the namespace's, not the mirror's.
	Throttled      int64     `json:"throttled,omitempty"`
	MeasuredAtTime time.Time `json:"time"`
}

// progressSample is the cumulative count of acknowledged records at a time.
type progressSample struct {
	at                        time.Time
	records, bytes, throttled int64
}

// liveTracker is the drains running in a Mirror and the throughput.
type liveTracker struct {
	mu      sync.Mutex
	running map[*drain]time.Time // drain -> its deadline
	// doneRecords, doneBytes and doneThrottled sum the drains that ended.
	doneRecords, doneBytes, doneThrottled int64
	samples                               []progressSample
	// recovered is, per outage place (Outage.key), when a success last
	// ended an outage there.
	recovered map[string]time.Time
	// lastLag is the last lag read from Kafka; history the recent lag and
	// rate (history.go).
	lastLag *LagReport
	history history
	// readyHubs is the last readiness check that found every hub
	// accepting the app (readiness.go).
	readyHubs *Readiness
	// delivered is, per partition, when Event Hubs last acknowledged one
	// of its records in a drain of this process that ended.
	delivered map[TopicPartition]time.Time
}

func newLiveTracker() *liveTracker {
	return &liveTracker{running: map[*drain]time.Time{}, delivered: map[TopicPartition]time.Time{}, recovered: map[string]time.Time{}}
}

func (t *liveTracker) start(d *drain, deadline time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sampleLocked(time.Now()) // the rate's base before the drain's first record
	t.running[d] = deadline
}

// end removes d, adding what it mirrored to the totals.
func (t *liveTracker) end(d *drain) {
	records, bytes, _ := d.progress()
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, d)
	t.doneRecords += records
	t.doneBytes += bytes
	t.doneThrottled += d.throttled.Load()
	t.sampleLocked(time.Now())
	for tp, at := range d.lastAcks() {
		if at.After(t.delivered[tp]) {
			t.delivered[tp] = at
		}
	}
}

// lastAcks returns, per partition of d with a record acknowledged, when
// the last one was.
func (d *drain) lastAcks() map[TopicPartition]time.Time {
	out := map[TopicPartition]time.Time{}
	for _, ps := range d.order {
		ps.mu.Lock()
		if !ps.lastAck.IsZero() {
			out[ps.tp] = ps.lastAck
		}
		ps.mu.Unlock()
	}
	return out
}

// deliveredAt returns, per partition, when Event Hubs last acknowledged
// one of its records in this process, running drains included.
func (t *liveTracker) deliveredAt() map[TopicPartition]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deliveredAtLocked()
}

// deliveredAtLocked is deliveredAt with t.mu held.
func (t *liveTracker) deliveredAtLocked() map[TopicPartition]time.Time {
	out := maps.Clone(t.delivered)
	for d := range t.running {
		for tp, at := range d.lastAcks() {
			if at.After(out[tp]) {
				out[tp] = at
			}
		}
	}
	return out
}

// progress sums what d's partitions had acknowledged and their lag.
func (d *drain) progress() (records, bytes, lag int64) {
	for _, ps := range d.order {
		ps.mu.Lock()
		records += ps.records
		bytes += ps.bytes
		from := ps.committed
		if from == NoOffset {
			from = ps.start
		}
		lag += max(ps.end-from, 0)
		ps.mu.Unlock()
	}
	return records, bytes, lag
}

// sampleLocked adds a sample of the cumulative counts at now; t.mu is held.
func (t *liveTracker) sampleLocked(now time.Time) progressSample {
	s := progressSample{at: now, records: t.doneRecords, bytes: t.doneBytes, throttled: t.doneThrottled}
	for d := range t.running {
		r, b, _ := d.progress()
		s.records += r
		s.bytes += b
		s.throttled += d.throttled.Load()
	}
	if n := len(t.samples); n == 0 || now.Sub(t.samples[n-1].at) >= time.Second {
		t.samples = append(t.samples, s)
	}
	// Keep one sample at or before the window's start.
	i := 0
	for i+1 < len(t.samples) && now.Sub(t.samples[i+1].at) >= rateWindow {
		i++
	}
	t.samples = t.samples[i:]
	return s
}

// throughput returns the recent rate as of now.
func (t *liveTracker) throughput(now time.Time) Throughput {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.sampleLocked(now)
	out := Throughput{TotalRecords: cur.records, TotalBytes: cur.bytes, MeasuredAtTime: now}
	for _, at := range t.deliveredAtLocked() {
		if at.After(out.LastDelivered) {
			out.LastDelivered = at
		}
	}
	first := t.samples[0]
	if dt := now.Sub(first.at); dt >= time.Second {
		out.Window = dt
		out.RecordsPerSec = float64(cur.records-first.records) / dt.Seconds()
		out.BytesPerSec = float64(cur.bytes-first.bytes) / dt.Seconds()
	}
	// The current rate: from the newest sample at least CurrentWindow old
	// (the oldest kept when none is).
	recent := first
	for _, s := range t.samples {
		if now.Sub(s.at) >= CurrentWindow {
			recent = s
		}
	}
	if dt := now.Sub(recent.at); dt >= time.Second {
		out.CurrentPerSec = float64(cur.records-recent.records) / dt.Seconds()
	}
	out.Throttled = cur.throttled - first.throttled
	return out
}

// runningDrains returns the drains running now, oldest first.
func (t *liveTracker) runningDrains(now time.Time) []RunningDrain {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]RunningDrain, 0, len(t.running))
	for d, deadline := range t.running {
		r, b, lag := d.progress()
		var until time.Time
		if d.win != nil {
			until = d.win.windowEnd()
			if deadline.IsZero() {
				deadline = d.win.stopAt() // handed over: no MIRROR_MAX_DURATION of its own
			}
		}
		out = append(out, RunningDrain{
			Run: d.name, Started: d.rep.Started, Deadline: deadline, FollowUntil: until,
			Partitions: len(d.order), Records: r, Bytes: b, Lag: lag, Outages: d.live.outages(now),
		})
	}
	slices.SortFunc(out, func(a, b RunningDrain) int { return a.Started.Compare(b.Started) })
	return out
}

// Running returns the drains running now in this process, with their
// progress and the failures they keep retrying.
func (m *Mirror) Running() []RunningDrain { return m.live.runningDrains(time.Now()) }

// Throughput returns the rate at which Event Hubs acknowledged records in
// this process over the last minutes.
func (m *Mirror) Throughput() Throughput { return m.live.throughput(time.Now()) }

// Ago renders a duration for people: "850 ms", "42 s", "3 min 20 s",
// "2 h 5 min", "3 d 4 h".
func Ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0 s"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
		if s == 0 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d min %d s", m, s)
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	if h == 0 {
		return fmt.Sprintf("%d d", days)
	}
	return fmt.Sprintf("%d d %d h", days, h)
}

// busyLag fills the lag of rep's busy partitions (held by another drain
// of this process) from the committed offsets the claim read and the log
// ends, and adds it to rep.LagAfter: a busy partition's lag is real, not 0.
// LagAfter becomes LagUnknown when the ends cannot be read.
func (m *Mirror) busyLag(ctx context.Context, rep *Report) {
	var tps []TopicPartition
	for _, p := range rep.Partitions {
		if p.Busy {
			tps = append(tps, TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
	}
	if len(tps) == 0 {
		return
	}
	wms, err := m.source.Watermarks(ctx, tps)
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Sprintf("reading watermarks of the busy partitions: %v", err))
		rep.LagAfter = LagUnknown
		return
	}
	for i := range rep.Partitions {
		p := &rep.Partitions[i]
		if !p.Busy {
			continue
		}
		wm := wms[TopicPartition{Topic: p.Topic, Partition: p.Partition}]
		from := p.Committed
		if from == NoOffset || from > wm.End {
			from = wm.Start
		}
		p.LagBefore = max(wm.End-from, 0)
		p.LagAfter = p.LagBefore
		if rep.LagAfter != LagUnknown {
			rep.LagAfter += p.LagAfter
		}
	}
}

// Backlog is how far behind the mirror is, in records and in time, and how
// long the backlog takes at the current rate.
type Backlog struct {
	// Records is the lag of the topics that are not paused.
	Records int64 `json:"records"`
	// BehindBy is the age of the oldest record not yet mirrored.
	BehindBy time.Duration `json:"behind_by_ns"`
	// RecordsPerSec is the current rate (Throughput.CurrentPerSec, or,
	// on an instance that mirrors nothing itself, the rate the group's
	// committed offsets advance at).
	RecordsPerSec float64 `json:"records_per_sec"`
	// ETA is Records ÷ RecordsPerSec; 0 when caught up or not moving.
	ETA time.Duration `json:"eta_ns,omitempty"`
	// NotMovingSince is set when records wait and nothing moves (sends or
	// fetches fail, or the current rate is 0): the last delivery, zero
	// when none is known.
	NotMoving      bool      `json:"not_moving,omitempty"`
	NotMovingSince time.Time `json:"not_moving_since,omitzero"`
	// Paused and PausedTopics are the records waiting in paused topics
	// and how many paused topics hold them.
	Paused       int64 `json:"paused,omitempty"`
	PausedTopics int   `json:"paused_topics,omitempty"`
	// Throttled: Event Hubs refused sends with server-busy over the
	// rate's window, so the rate is the namespace's throughput quota;
	// Remedy then says how to go faster (or, for paused topics, how to
	// resume them).
	Throttled bool   `json:"throttled,omitempty"`
	Remedy    string `json:"remedy,omitempty"`
	// Summary is the backlog in words: "3,200,000 records behind, the
	// oldest from 3 min 20 s ago, about 53 min 20 s at 1,000 events/s",
	// when nothing moves "… not moving since 03:02:18Z (2 min ago)", and
	// when throttled "… at the namespace's 1,000 events/s (Event Hubs
	// throttled 2,400 sends in the last 5 min); raise `eventhubs_capacity`
	// or enable auto-inflate".
	Summary string `json:"summary"`
}

// ThrottledRemedy is what to do about a backlog that drains at the
// namespace's throughput quota.
const ThrottledRemedy = "raise `eventhubs_capacity` or enable auto-inflate"

// NewBacklog measures the backlog from a lag report, the throughput and the
// history (for the group's rate on an instance that mirrors nothing
// itself). failing says sends or fetches fail now: nothing moves, whatever
// the rate was before.
func NewBacklog(lag *LagReport, tp Throughput, hist []HistoryPoint, failing bool) Backlog {
	b := Backlog{Records: lag.Unpaused(), BehindBy: lag.BehindBy, RecordsPerSec: tp.CurrentPerSec}
	if n := len(hist); b.RecordsPerSec < 0.01 && n > 1 && lag.Time.Sub(hist[n-1].At) < 2*HistoryStep {
		b.RecordsPerSec = hist[n-1].CommittedPerSec
	}
	paused := map[string]bool{}
	for _, p := range lag.Partitions {
		if p.Paused && p.Lag > 0 {
			b.Paused += p.Lag
			paused[p.Topic] = true
		}
	}
	b.PausedTopics = len(paused)
	if b.Records == 0 {
		b.Summary = "caught up"
		if b.Paused > 0 {
			b.Summary += fmt.Sprintf(" except %s in %s", records(b.Paused), plural(b.PausedTopics, "paused topic"))
			b.Remedy = "resume with `POST /api/resume` " + resumeBody(paused)
			b.Summary += "; " + b.Remedy
		}
		return b
	}
	b.Summary = records(b.Records) + " behind"
	if b.BehindBy > 0 {
		b.Summary += ", the oldest from " + Ago(b.BehindBy) + " ago"
	}
	last := lag.LastDelivered
	if tp.LastDelivered.After(last) {
		last = tp.LastDelivered
	}
	switch {
	case failing || b.RecordsPerSec < 0.01:
		b.RecordsPerSec, b.NotMoving, b.NotMovingSince = 0, true, last
		if last.IsZero() {
			b.Summary += ", not moving (no delivery known)"
		} else {
			b.Summary += fmt.Sprintf(", not moving since %s (%s ago)", last.UTC().Format("15:04:05Z"), Ago(lag.Time.Sub(last)))
		}
	default:
		b.ETA = time.Duration(float64(b.Records) / b.RecordsPerSec * float64(time.Second))
		rate := Count(int64(math.Round(b.RecordsPerSec))) + " events/s"
		if tp.Throttled > 0 {
			b.Throttled, b.Remedy = true, ThrottledRemedy
			b.Summary += fmt.Sprintf(", about %s at the namespace's %s (Event Hubs throttled %s in the last %s); %s",
				Ago(b.ETA), rate, sends(tp.Throttled), Ago(max(tp.Window, time.Second)), b.Remedy)
		} else {
			b.Summary += fmt.Sprintf(", about %s at %s", Ago(b.ETA), rate)
		}
	}
	if b.Paused > 0 {
		b.Summary += fmt.Sprintf("; and %s in %s", records(b.Paused), plural(b.PausedTopics, "paused topic"))
	}
	return b
}

// records is n records in words: "1 record", "3,000 records".
func records(n int64) string {
	if n == 1 {
		return "1 record"
	}
	return Count(n) + " records"
}

// resumeBody is the body of the resume call for the topics.
func resumeBody(topics map[string]bool) string {
	names := slices.Sorted(maps.Keys(topics))
	if len(names) == 1 {
		return fmt.Sprintf(`{"topic":%q}`, names[0])
	}
	return fmt.Sprintf(`{"topics":["%s"]}`, strings.Join(names, `","`))
}

// sends is n sends in words: "1 send", "2,400 sends".
func sends(n int64) string {
	if n == 1 {
		return "1 send"
	}
	return Count(n) + " sends"
}

// Count writes n with thousands separators: 3,200,000.
func Count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// BacklogProblem returns the problem of a backlog whose oldest record not
// yet mirrored (topics not paused) is older than maxAge, nil otherwise. It
// needs only Kafka, so every instance serving the status sees it, also
// those that run no drain.
func BacklogProblem(lag *LagReport, maxAge time.Duration) *Problem {
	if lag == nil || maxAge <= 0 || lag.BehindBy <= maxAge {
		return nil
	}
	var worst PartitionLag
	var parts int
	for _, p := range lag.Partitions {
		if p.Paused || p.BehindBy <= maxAge {
			continue
		}
		parts++
		if p.BehindBy > worst.BehindBy {
			worst = p
		}
	}
	return &Problem{Kind: KindBehind, Topic: worst.Topic, Partition: worst.Partition, Hub: worst.Hub, Since: worst.Oldest.Add(maxAge), Run: "status",
		Message: fmt.Sprintf("the oldest record not yet mirrored is %s old (%s records wait; %s of the partitions behind by more than %s, MIRROR_MAX_BACKLOG_AGE)",
			Ago(worst.BehindBy), Count(worst.Lag), plural(parts, "partition"), Ago(maxAge))}
}

// PauseProblem is the problem of topics paused for longer than maxAge at
// now (MIRROR_MAX_PAUSE_AGE), nil when none is or maxAge is 0: a forgotten
// pause must not look like a healthy mirror.
func PauseProblem(lag *LagReport, maxAge time.Duration, now time.Time) *Problem {
	if lag == nil || maxAge <= 0 {
		return nil
	}
	var oldest *Pause
	n := 0
	for i, p := range lag.Paused {
		if now.Sub(p.At) <= maxAge {
			continue
		}
		n++
		if oldest == nil || p.At.Before(oldest.At) {
			oldest = &lag.Paused[i]
		}
	}
	if oldest == nil {
		return nil
	}
	return &Problem{Kind: KindPausedLong, Topic: oldest.Topic, Since: oldest.At.Add(maxAge), Run: "status",
		Message: fmt.Sprintf("%s paused for longer than %s (MIRROR_MAX_PAUSE_AGE); the oldest, %s, by %s %s ago (%s)",
			plural(n, "topic"), Ago(maxAge), oldest.Topic, oldest.By, Ago(now.Sub(oldest.At)), oldest.Reason)}
}
