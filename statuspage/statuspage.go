// Package statuspage renders the mirror's status as one self-contained HTML
// page (inline styles, no scripts, no external fonts or images): per topic
// and partition the committed offset, log end and lag as bars, the last
// drains with their duration against the budget, the active catch-up, the
// problems in red, and the settings (already redacted by the caller).
package statuspage

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"slices"
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
}).ParseFS(files, "page.html"))

// Page is what the status page shows. Every string must already be free of
// secrets.
type Page struct {
	Time   time.Time
	OK     bool
	Reason string
	// Problems are one-line problems: settings, lag and health.
	Problems []string
	Lag      *mirror.LagReport
	LagError string
	// MaxLag is the largest partition lag (the full bar); set by Render.
	MaxLag  int64
	CatchUp *mirror.CatchUpStatus
	// Drains are the last drain reports, newest first after Render.
	Drains   []*mirror.Report
	Settings map[string]string
	// SettingNames are the settings' names in order; set by Render.
	SettingNames []string
}

// Render writes the page.
func Render(w io.Writer, p Page) error {
	if p.Lag != nil {
		for _, pl := range p.Lag.Partitions {
			p.MaxLag = max(p.MaxLag, pl.Lag)
		}
	}
	p.Drains = slices.Clone(p.Drains)
	slices.Reverse(p.Drains)
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
