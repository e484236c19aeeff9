// Package statuspage renders the mirror's status as one self-contained HTML
// page (inline styles, no scripts, no external fonts or images) that
// reloads itself: the backlog in records and time with its ETA, the
// throughput and the next tick, the problems grouped by cause with what to
// do, the drains running now, per topic and partition the committed
// offset, log end, lag (logarithmic bars) and age of the oldest unmirrored
// record, the last drains with their latency and duration against the
// budget, the active catch-up, and the settings (already redacted by the
// caller).
package statuspage

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

//go:embed page.html
var files embed.FS

var page = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"ms":   func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"pct": func(part, whole int64) int {
		if whole <= 0 || part <= 0 {
			return 0
		}
		return int(min(max(part*100/whole, 1), 100))
	},
	"offset": func(o int64) string {
		if o == mirror.NoOffset {
			return "none"
		}
		return fmt.Sprint(o)
	},
	"logpct": logPct,
	"ago":    mirror.Ago,
	"since":  func(t, now time.Time) string { return mirror.Ago(now.Sub(t)) },
	"count":  mirror.Count,
	"mb":     func(n int64) string { return fmt.Sprintf("%.1f", float64(n)/1e6) },
	"mbps":   func(v float64) string { return fmt.Sprintf("%.2f", v/1e6) },
	"rate":   func(v float64) string { return mirror.Count(int64(math.Round(v))) },
	"join":   func(s []string) string { return strings.Join(s, ", ") },
}).ParseFS(files, "page.html"))

// logPct is the width of a lag bar: logarithmic, so that 104 and 10,055
// records look different (about half and full) and 1 record still shows.
func logPct(part, whole int64) int {
	if whole <= 0 || part <= 0 {
		return 0
	}
	return int(min(max(math.Round(100*math.Log1p(float64(part))/math.Log1p(float64(whole))), 1), 100))
}

// errorLine is a failed drain's errors in one line: how many, and the
// first (the problems section groups them by cause).
func errorLine(r *mirror.Report) string {
	var all []string
	all = append(all, r.Errors...)
	for _, o := range r.Outages {
		all = append(all, "outage: "+o.String())
	}
	for _, p := range r.Partitions {
		if p.Error != "" {
			all = append(all, fmt.Sprintf("%s/%d: %s", p.Topic, p.Partition, p.Error))
		}
	}
	if len(all) == 0 {
		return ""
	}
	first := strings.ReplaceAll(all[0], "\n", "; ")
	if r := []rune(first); len(r) > 200 {
		first = string(r[:199]) + "…"
	}
	if len(all) == 1 {
		return "1 error: " + first
	}
	return fmt.Sprintf("%d errors, the first: %s", len(all), first)
}

// DrainRow is a drain of the last drains table.
type DrainRow struct {
	*mirror.Report
	// Errors are its errors in one line; "" when none or Same.
	Errors string
	// Same is set when its errors are those of the newer drain above.
	Same bool
}

// DefaultRefresh is how often, in seconds, the page reloads itself.
const DefaultRefresh = 15

// Page is what the status page shows. Every string must already be free of
// secrets.
type Page struct {
	Time   time.Time
	OK     bool
	Reason string
	// Problems are one-line problems that have no cause: settings.
	Problems []string
	// Causes are the health's problems grouped by kind, with remedies.
	Causes []mirror.Cause
	// Backlog, Throughput, Running and NextTick are the status's time
	// figures (see the status JSON).
	Backlog    *mirror.Backlog
	Throughput *mirror.Throughput
	Running    []mirror.RunningDrain
	NextTick   time.Time
	// Readiness is whether the brokers answer and the hubs accept the
	// app, checked with the request.
	Readiness *mirror.Readiness
	// KafkaAuth says how the app authenticates to Kafka (mechanism,
	// principal, token expiry, last error), "" for no SASL; never a token
	// or a secret.
	KafkaAuth string
	// Refresh is how often the page reloads itself, in seconds;
	// DefaultRefresh when 0.
	Refresh  int
	Lag      *mirror.LagReport
	LagError string
	// LastLag is the last lag known when Lag could not be read: the table
	// shows it with its time rather than nothing.
	LastLag *mirror.LagReport
	// History is the lag and delivered rate over the last hour; Chart is
	// it drawn, set by Render.
	History []mirror.HistoryPoint
	Chart   *Chart
	// LastDelivered is when Event Hubs last acknowledged a record, by any
	// instance (the lag's, stored with the commits) or this one; set by
	// Render.
	LastDelivered time.Time
	// MaxLag is the largest partition lag (the full bar); set by Render.
	MaxLag  int64
	CatchUp *mirror.CatchUpStatus
	// Drains are the last drain reports, newest first after Render.
	Drains []*mirror.Report
	// DrainRows are Drains with each one's errors in one line, empty when
	// the same as the newer drain's above it; set by Render.
	DrainRows []DrainRow
	Settings  map[string]string
	// SettingNames are the settings' names in order; set by Render.
	SettingNames []string
}

// Render writes the page.
func Render(w io.Writer, p Page) error {
	if p.Refresh <= 0 {
		p.Refresh = DefaultRefresh
	}
	if p.Lag == nil && p.LastLag != nil {
		p.Lag = p.LastLag
	}
	p.Chart = newChart(p.History)
	if p.Lag != nil {
		p.LastDelivered = p.Lag.LastDelivered
	}
	if tp := p.Throughput; tp != nil && tp.LastDelivered.After(p.LastDelivered) {
		p.LastDelivered = tp.LastDelivered
	}
	if p.Lag != nil {
		for _, pl := range p.Lag.Partitions {
			p.MaxLag = max(p.MaxLag, pl.Lag)
		}
	}
	p.Drains = slices.Clone(p.Drains)
	slices.Reverse(p.Drains)
	p.DrainRows = make([]DrainRow, 0, len(p.Drains))
	prev := ""
	for _, r := range p.Drains {
		line := errorLine(r)
		row := DrainRow{Report: r, Errors: line}
		if line != "" && line == prev {
			row.Errors, row.Same = "", true
		}
		prev = line
		p.DrainRows = append(p.DrainRows, row)
	}
	p.SettingNames = p.SettingNames[:0]
	for k := range p.Settings {
		p.SettingNames = append(p.SettingNames, k)
	}
	slices.Sort(p.SettingNames)
	if err := page.Execute(w, p); err != nil {
		return fmt.Errorf("rendering the status page: %w", err)
	}
	return nil
}
