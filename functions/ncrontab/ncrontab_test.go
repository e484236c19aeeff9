package ncrontab

import (
	"strings"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestNext(t *testing.T) {
	tests := []struct {
		expr, from string
		want       []string
	}{
		// The project's default MIRROR_SCHEDULE: every minute at second 0.
		{"0 */1 * * * *", "2026-01-10T10:00:00Z", []string{"2026-01-10T10:01:00Z", "2026-01-10T10:02:00Z"}},
		{"0 */1 * * * *", "2026-01-10T10:00:59.999Z", []string{"2026-01-10T10:01:00Z"}},
		{"0 */5 * * * *", "2026-01-10T10:03:10Z", []string{"2026-01-10T10:05:00Z", "2026-01-10T10:10:00Z"}},
		{"*/15 * * * * *", "2026-01-10T10:00:50Z", []string{"2026-01-10T10:01:00Z", "2026-01-10T10:01:15Z"}},
		{"* * * * * *", "2026-01-10T10:00:00.5Z", []string{"2026-01-10T10:00:01Z", "2026-01-10T10:00:02Z"}},
		// Lists and ranges.
		{"0 0 9-10,17 * * *", "2026-01-10T09:30:00Z", []string{"2026-01-10T10:00:00Z", "2026-01-10T17:00:00Z", "2026-01-11T09:00:00Z"}},
		{"30 15 2,4 * * *", "2026-01-10T00:00:00Z", []string{"2026-01-10T02:15:30Z", "2026-01-10T04:15:30Z"}},
		// Steps on ranges and on a start value ("a/n" = a to max).
		{"0 10-30/10 * * * *", "2026-01-10T10:00:00Z", []string{"2026-01-10T10:10:00Z", "2026-01-10T10:20:00Z", "2026-01-10T10:30:00Z", "2026-01-10T11:10:00Z"}},
		{"0 45/5 * * * *", "2026-01-10T10:00:00Z", []string{"2026-01-10T10:45:00Z", "2026-01-10T10:50:00Z", "2026-01-10T10:55:00Z", "2026-01-10T11:45:00Z"}},
		// Day of week (Monday-Friday at 09:30) and names.
		{"0 30 9 * * 1-5", "2026-01-09T10:00:00Z", []string{"2026-01-12T09:30:00Z", "2026-01-13T09:30:00Z"}}, // Fri → Mon
		{"0 30 9 * * Mon-fri", "2026-01-09T10:00:00Z", []string{"2026-01-12T09:30:00Z"}},
		{"0 0 0 1 jan,Jul *", "2026-02-01T00:00:00Z", []string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		// Day-of-month AND day-of-week (NCrontab semantics): Friday the 13th.
		{"0 0 0 13 * 5", "2026-01-01T00:00:00Z", []string{"2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z", "2026-11-13T00:00:00Z"}},
		// Month ends and leap days.
		{"0 0 0 31 * *", "2026-01-31T00:00:00Z", []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"0 0 12 29 2 *", "2026-01-01T00:00:00Z", []string{"2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}},
		// Year rollover.
		{"59 59 23 31 12 *", "2026-12-31T23:59:59Z", []string{"2027-12-31T23:59:59Z"}},
		// Five fields: minute hour day month day-of-week, second 0.
		{"*/5 * * * *", "2026-01-10T10:03:10Z", []string{"2026-01-10T10:05:00Z", "2026-01-10T10:10:00Z"}},
		{"* * * * *", "2026-01-10T10:00:00Z", []string{"2026-01-10T10:01:00Z"}},
		{"* * * * *", "2026-01-10T10:00:30Z", []string{"2026-01-10T10:01:00Z"}},
		{"0 12 * * 0", "2026-01-10T00:00:00Z", []string{"2026-01-11T12:00:00Z", "2026-01-18T12:00:00Z"}},
		// Extra whitespace.
		{"  0  0  *  *  *  * ", "2026-01-10T10:00:00Z", []string{"2026-01-10T11:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr+"@"+tt.from, func(t *testing.T) {
			s, err := Parse(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			got := s.Occurrences(at(tt.from), len(tt.want))
			var gotS []string
			for _, g := range got {
				gotS = append(gotS, g.Format(time.RFC3339))
			}
			if strings.Join(gotS, " ") != strings.Join(tt.want, " ") {
				t.Errorf("Occurrences(%s) = %v, want %v", tt.from, gotS, tt.want)
			}
		})
	}
}

func TestNextInLocation(t *testing.T) {
	loc := time.FixedZone("UTC+2", 2*3600)
	s := MustParse("0 0 9 * * *")
	got := s.Next(time.Date(2026, 1, 10, 10, 0, 0, 0, loc))
	if want := time.Date(2026, 1, 11, 9, 0, 0, 0, loc); !got.Equal(want) || got.Location() != loc {
		t.Errorf("Next = %v, want %v in its location", got, want)
	}
}

func TestNextNever(t *testing.T) {
	if got := MustParse("0 0 0 30 2 *").Next(at("2026-01-01T00:00:00Z")); !got.IsZero() {
		t.Errorf("Feb 30: Next = %v, want zero", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "want 6 fields"},
		{"* * * *", "got 4"},
		{"* * * * * * *", "got 7"},
		{"60 * * * * *", `second field "60"`},
		{"* 60 * * * *", `minute field "60"`},
		{"* * 24 * * *", `hour field "24"`},
		{"* * * 0 * *", `day field "0"`},
		{"* * * 32 * *", `day field "32"`},
		{"* * * * 13 *", `month field "13"`},
		{"* * * * * 7", `day-of-week field "7"`},
		{"* * * * foo *", "not a month name"},
		{"*/0 * * * * *", "positive"},
		{"*/x * * * * *", "positive"},
		{"5-1 * * * * *", "reversed"},
		{"1,,2 * * * * *", "empty"},
		{"%MIRROR_SCHEDULE%", "want 6 fields"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %v, want it to contain %q", tt.expr, err, tt.want)
		}
	}
}

// TestDisablesMonitor follows TimerSchedule.ShouldDisableScheduleMonitor
// (azure-webjobs-sdk-extensions Timers/Scheduling/TimerSchedule.cs): only
// fields from minutes up that are all "*" and more than one occurrence in
// the next minute (NCrontab's GetNextOccurrences: end exclusive) turn the
// monitor off. The cases include the host's own
// (TimerScheduleTests.ShouldDisableScheduleMonitor_ReturnsExpectedValue);
// from is off the second, as the host's DateTime.Now is.
func TestDisablesMonitor(t *testing.T) {
	from := at("2026-01-10T10:00:00.5Z")
	for expr, want := range map[string]bool{
		"* * * * * *":          true,
		"*/10 * * * * *":       true,
		"*/30 * * * * *":       true,
		"0,30 * * * * *":       true,
		"*/3 * 0-23 * * *":     true, // 0-23 is every hour: "*" once normalized
		"*/30 * 9-17 * * *":    false,
		"*/3 * 0-22 * * *":     false,
		"*/10 0-58 * * * *":    false,
		"*/10 * * * Jan-Nov *": false,
		"0 * * * * *":          false,
		"0 */1 * * * *":        false,
		"* * * * *":            false,
	} {
		if got := MustParse(expr).DisablesMonitor(from); got != want {
			t.Errorf("DisablesMonitor(%q) = %v, want %v", expr, got, want)
		}
	}
}

func TestHasSeconds(t *testing.T) {
	if !MustParse("0 * * * * *").HasSeconds() || MustParse("* * * * *").HasSeconds() {
		t.Error("HasSeconds wrong")
	}
	if got := MustParse(" 0   */1 * * * * ").String(); got != "0 */1 * * * *" {
		t.Errorf("String = %q", got)
	}
}
