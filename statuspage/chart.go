package statuspage

import (
	"fmt"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// Chart is the lag and delivered rate history drawn as two polylines of an
// inline SVG (no script, no external resource): x is time over the
// history's span, y each series scaled to its own maximum.
type Chart struct {
	Width, Height int
	// Lag and Rate are the polylines' points ("x,y x,y ...").
	Lag, Rate string
	// MaxLag and MaxRate are the top of each scale; From and To the span.
	MaxLag   int64
	MaxRate  float64
	From, To time.Time
	Points   int
}

// chart sizes.
const (
	chartWidth  = 600
	chartHeight = 90
)

// newChart draws points; nil with fewer than two.
func newChart(points []mirror.HistoryPoint) *Chart {
	if len(points) < 2 {
		return nil
	}
	c := &Chart{Width: chartWidth, Height: chartHeight, From: points[0].At, To: points[len(points)-1].At, Points: len(points)}
	for _, p := range points {
		c.MaxLag = max(c.MaxLag, p.Lag)
		c.MaxRate = max(c.MaxRate, p.RecordsPerSec, p.CommittedPerSec)
	}
	span := c.To.Sub(c.From).Seconds()
	x := func(t time.Time) float64 {
		if span <= 0 {
			return 0
		}
		return t.Sub(c.From).Seconds() / span * chartWidth
	}
	y := func(v, top float64) float64 {
		if top <= 0 {
			return chartHeight - 1
		}
		return chartHeight - 1 - v/top*(chartHeight-2)
	}
	var lag, rate strings.Builder
	for i, p := range points {
		if i > 0 {
			lag.WriteByte(' ')
			rate.WriteByte(' ')
		}
		fmt.Fprintf(&lag, "%.1f,%.1f", x(p.At), y(float64(p.Lag), float64(c.MaxLag)))
		fmt.Fprintf(&rate, "%.1f,%.1f", x(p.At), y(max(p.RecordsPerSec, p.CommittedPerSec), c.MaxRate))
	}
	c.Lag, c.Rate = lag.String(), rate.String()
	return c
}
