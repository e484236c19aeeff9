// Package ncrontab parses and evaluates NCRONTAB schedules, the cron
// dialect of Azure Functions timer triggers:
//
//	{second} {minute} {hour} {day} {month} {day-of-week}
//
// Five fields (no seconds) are accepted too, as the host does. Each field
// is "*", a value, a range "a-b", a list "a,b-c", or a step "*/n", "a-b/n"
// or "a/n" (a to the field's maximum). Months and days of week may be
// given by (a prefix of) their English names, case-insensitively; day of
// week is 0-6 with Sunday = 0. A time matches when every field matches:
// like NCrontab, and unlike Vixie cron, day-of-month and day-of-week are
// both required.
package ncrontab

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

type field int

const (
	second field = iota
	minute
	hour
	day
	month
	weekday
	numFields
)

var fieldInfo = [numFields]struct {
	name     string
	min, max int
	names    []string
}{
	second:  {"second", 0, 59, nil},
	minute:  {"minute", 0, 59, nil},
	hour:    {"hour", 0, 23, nil},
	day:     {"day", 1, 31, nil},
	month:   {"month", 1, 12, []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}},
	weekday: {"day-of-week", 0, 6, []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}},
}

// Schedule is a parsed NCRONTAB expression. The zero value is not valid;
// use Parse.
type Schedule struct {
	expr       string
	hasSeconds bool
	sets       [numFields]uint64 // bit v set when value v matches
}

// Parse parses a 6-field (with seconds) or 5-field NCRONTAB expression.
func Parse(expr string) (*Schedule, error) {
	parts := strings.Fields(expr)
	s := &Schedule{expr: strings.Join(parts, " ")}
	switch len(parts) {
	case 6:
		s.hasSeconds = true
	case 5:
		parts = append([]string{"0"}, parts...)
	default:
		return nil, fmt.Errorf("ncrontab %q: want 6 fields ({second} {minute} {hour} {day} {month} {day-of-week}) or 5, got %d", expr, len(parts))
	}
	for f := second; f < numFields; f++ {
		set, err := parseField(f, parts[f])
		if err != nil {
			return nil, fmt.Errorf("ncrontab %q: %s field %q: %w", expr, fieldInfo[f].name, parts[f], err)
		}
		s.sets[f] = set
	}
	return s, nil
}

// MustParse is Parse for expressions known to be valid; it panics on error.
func MustParse(expr string) *Schedule {
	s, err := Parse(expr)
	if err != nil {
		panic(err)
	}
	return s
}

// String returns the expression, fields separated by single spaces.
func (s *Schedule) String() string { return s.expr }

// HasSeconds reports whether the expression has a seconds field.
func (s *Schedule) HasSeconds() bool { return s.hasSeconds }

func parseField(f field, text string) (uint64, error) {
	var set uint64
	for _, item := range strings.Split(text, ",") {
		bitsOf, err := parseItem(f, item)
		if err != nil {
			return 0, err
		}
		set |= bitsOf
	}
	return set, nil
}

func parseItem(f field, item string) (uint64, error) {
	info := fieldInfo[f]
	if item == "" {
		return 0, fmt.Errorf("empty value")
	}
	step := 1
	if i := strings.IndexByte(item, '/'); i >= 0 {
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("step %q: want a positive number", item[i+1:])
		}
		step, item = n, item[:i]
		if item == "" {
			return 0, fmt.Errorf("missing value before /")
		}
	}
	lo, hi := info.min, info.max
	switch {
	case item == "*":
	case strings.Contains(item, "-"):
		i := strings.IndexByte(item, '-')
		var err error
		if lo, err = parseValue(f, item[:i]); err != nil {
			return 0, err
		}
		if hi, err = parseValue(f, item[i+1:]); err != nil {
			return 0, err
		}
		if lo > hi {
			return 0, fmt.Errorf("range %s is reversed", item)
		}
	default:
		v, err := parseValue(f, item)
		if err != nil {
			return 0, err
		}
		lo = v
		if step == 1 {
			hi = v
		}
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << uint(v)
	}
	return set, nil
}

func parseValue(f field, text string) (int, error) {
	info := fieldInfo[f]
	if text == "" {
		return 0, fmt.Errorf("empty value")
	}
	if text[0] >= '0' && text[0] <= '9' {
		v, err := strconv.Atoi(text)
		if err != nil || v < info.min || v > info.max {
			return 0, fmt.Errorf("%q: want %d-%d", text, info.min, info.max)
		}
		return v, nil
	}
	for i, name := range info.names {
		if len(text) <= len(name) && strings.EqualFold(name[:len(text)], text) {
			return info.min + i, nil
		}
	}
	if info.names != nil {
		return 0, fmt.Errorf("%q is not a %s name", text, info.name)
	}
	return 0, fmt.Errorf("%q: want a number %d-%d", text, info.min, info.max)
}

func (s *Schedule) has(f field, v int) bool { return s.sets[f]&(1<<uint(v)) != 0 }

// first returns the smallest value >= from in the field's set, or -1.
func (s *Schedule) first(f field, from int) int {
	if from > 63 {
		return -1
	}
	rest := s.sets[f] >> uint(from)
	if rest == 0 {
		return -1
	}
	return from + bits.TrailingZeros64(rest)
}

// maxSearch bounds Next: every satisfiable schedule occurs within 8 years
// (Feb 29 can be 8 years apart around 2100).
const maxSearch = 8

// Next returns the first occurrence strictly after t (compared at whole
// seconds; for 5-field expressions at whole minutes), in t's location.
// It returns the zero time when the schedule never occurs (e.g. Feb 30).
func (s *Schedule) Next(t time.Time) time.Time {
	loc := t.Location()
	t = t.Truncate(time.Second).Add(time.Second)
	if !s.hasSeconds && t.Second() != 0 {
		t = t.Add(time.Duration(60-t.Second()) * time.Second)
	}
	limit := t.Year() + maxSearch
	for i := 0; i < 1_000_000 && t.Year() <= limit; i++ {
		y, mo, d := t.Date()
		h, mi, sec := t.Clock()
		var next time.Time
		switch {
		case !s.has(month, int(mo)):
			if m := s.first(month, int(mo)); m >= 0 {
				next = time.Date(y, time.Month(m), 1, 0, 0, 0, 0, loc)
			} else {
				next = time.Date(y+1, 1, 1, 0, 0, 0, 0, loc)
			}
		case !s.has(day, d) || !s.has(weekday, int(t.Weekday())):
			next = time.Date(y, mo, d+1, 0, 0, 0, 0, loc)
		case !s.has(hour, h):
			if hh := s.first(hour, h); hh >= 0 {
				next = time.Date(y, mo, d, hh, 0, 0, 0, loc)
			} else {
				next = time.Date(y, mo, d+1, 0, 0, 0, 0, loc)
			}
		case !s.has(minute, mi):
			if mm := s.first(minute, mi); mm >= 0 {
				next = time.Date(y, mo, d, h, mm, 0, 0, loc)
			} else {
				next = time.Date(y, mo, d, h+1, 0, 0, 0, loc)
			}
		case !s.has(second, sec):
			if ss := s.first(second, sec); ss >= 0 {
				next = time.Date(y, mo, d, h, mi, ss, 0, loc)
			} else {
				next = time.Date(y, mo, d, h, mi+1, 0, 0, loc)
			}
		default:
			return t
		}
		// Around a DST change a wall time may normalize backwards; always
		// make progress.
		if !next.After(t) {
			next = t.Add(time.Second)
		}
		t = next
	}
	return time.Time{}
}

// Occurrences returns the next n occurrences after t.
func (s *Schedule) Occurrences(t time.Time, n int) []time.Time {
	var out []time.Time
	for i := 0; i < n; i++ {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// DisablesMonitor is the host's TimerSchedule.ShouldDisableScheduleMonitor
// (azure-webjobs-sdk-extensions
// src/WebJobs.Extensions/Extensions/Timers/Scheduling/TimerSchedule.cs): the
// host turns the schedule monitor off (useMonitor=false, invocations carry
// ScheduleStatus null) only for a schedule whose every field from minutes
// up is "*" in NCrontab's normalized form (a field matching all its values)
// and that occurs more than once in the minute after t. "*/30 * 9-17 * * *"
// occurs every 30 s yet keeps its monitor.
func (s *Schedule) DisablesMonitor(t time.Time) bool {
	if !s.hasSeconds {
		return false
	}
	for f := minute; f < numFields; f++ {
		fi := fieldInfo[f]
		full := (uint64(1)<<uint(fi.max+1) - 1) &^ (uint64(1)<<uint(fi.min) - 1)
		if s.sets[f]&full != full {
			return false
		}
	}
	end := t.Add(time.Minute)
	n := 0
	for next := s.Next(t); !next.IsZero() && next.Before(end); next = s.Next(next) {
		if n++; n > 1 {
			return true
		}
	}
	return false
}
