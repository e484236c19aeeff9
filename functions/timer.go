package functions

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Timer is the trigger data of a timerTrigger binding: the host's
// serialized TimerInfo, sent as Data.<binding name>.
//
//	{"Schedule":{"AdjustForDST":true},
//	 "ScheduleStatus":{"Last":"…+00:00","Next":"…+00:00","LastUpdated":"…+00:00"},
//	 "IsPastDue":false}
type Timer struct {
	// Schedule is the schedule's public state; for NCRONTAB schedules the
	// host only exposes AdjustForDST (always true).
	Schedule TimerSchedule `json:"Schedule"`
	// ScheduleStatus is nil when the function's binding has
	// useMonitor=false, which the host also forces for schedules that fire
	// more often than once a minute.
	ScheduleStatus *ScheduleStatus `json:"ScheduleStatus"`
	// IsPastDue is true only for the catch-up run the host makes at start
	// when it missed an occurrence while it was down.
	IsPastDue bool `json:"IsPastDue"`
}

// TimerSchedule is the serialized schedule of a timer trigger.
type TimerSchedule struct {
	// AdjustForDST is always true for NCRONTAB schedules.
	AdjustForDST bool `json:"AdjustForDST"`
}

// ScheduleStatus is the schedule monitor's record for a timer function.
// Next is the occurrence that caused this invocation (not the one after
// it); Last and LastUpdated are the start of the previous invocation.
// Before the first invocation ever, Last and LastUpdated are
// 0001-01-01T00:00:00+00:00 (see FirstRun).
type ScheduleStatus struct {
	Last        time.Time
	Next        time.Time
	LastUpdated time.Time
}

// FirstRun reports whether the status records no previous invocation, using
// the host's rule: a Last earlier than year 2 is the "unset" default.
func (s ScheduleStatus) FirstRun() bool {
	return s.Last.Year() < 2
}

// MarshalJSON writes the status with timestamps formatted the way the host
// (Newtonsoft, local time with offset) writes them.
func (s ScheduleStatus) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Last        string `json:"Last"`
		Next        string `json:"Next"`
		LastUpdated string `json:"LastUpdated"`
	}{FormatLocalTime(s.Last), FormatLocalTime(s.Next), FormatLocalTime(s.LastUpdated)})
}

// UnmarshalJSON reads a status leniently: see ParseTime for the accepted
// timestamp forms; null or absent timestamps give the zero time.
func (s *ScheduleStatus) UnmarshalJSON(data []byte) error {
	st, err := decodeScheduleStatus("ScheduleStatus", data)
	if err != nil {
		return err
	}
	if st != nil {
		*s = *st
	}
	return nil
}

// Layouts the host uses for timestamps.
const (
	// LocalTimeLayout is how the host writes local DateTime values: offset
	// always numeric ("+00:00", never "Z"), fraction trimmed, 7 digits max.
	LocalTimeLayout = "2006-01-02T15:04:05.9999999-07:00"
	// UTCTimeLayout is how the host writes UTC DateTime values (sys.UtcNow).
	UTCTimeLayout = "2006-01-02T15:04:05.9999999Z07:00"
)

// FormatLocalTime formats t the way the host serializes a local DateTime:
// 2026-01-10T10:00:00.0087264+00:00. The zero time gives
// 0001-01-01T00:00:00+00:00, the host's first-run value on a UTC machine.
func FormatLocalTime(t time.Time) string {
	if t.IsZero() {
		return "0001-01-01T00:00:00+00:00"
	}
	return t.Format(LocalTimeLayout)
}

// FormatUTCTime formats t the way the host serializes a UTC DateTime:
// 2024-05-14T15:14:15.128919Z.
func FormatUTCTime(t time.Time) string {
	return t.UTC().Format(UTCTimeLayout)
}

// ParseTime parses a host timestamp leniently. It accepts RFC 3339 with a
// "Z" or numeric offset and any number of fractional digits
// (2026-01-10T10:00:00.0087264+00:00, 0001-01-01T00:00:00+00:00,
// 2024-05-14T15:14:15.128919Z) and timestamps without an offset
// (2006-01-02T15:04:05.9999999), which are taken as UTC.
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.9999999", "2006-01-02 15:04:05.9999999Z07:00", "2006-01-02 15:04:05.9999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("want a timestamp like 2026-01-10T10:05:00+00:00, got %q", s)
}

func timeField(path string, raw json.RawMessage) (time.Time, error) {
	if isNull(raw) {
		return time.Time{}, nil
	}
	s, err := stringField(path, raw)
	if err != nil {
		return time.Time{}, decodeErr(path, "want timestamp string, got %s", jsonKind(raw))
	}
	t, err := ParseTime(s)
	if err != nil {
		return time.Time{}, decodeErr(path, "%v", err)
	}
	return t, nil
}

func decodeTimer(path string, raw json.RawMessage) (Timer, error) {
	m, err := object(path, raw, "timer object {Schedule, ScheduleStatus, IsPastDue}")
	if err != nil {
		return Timer{}, err
	}
	var t Timer
	if v, ok := member(m, "Schedule"); ok && !isNull(v) {
		sm, err := object(path+".Schedule", v, "object")
		if err != nil {
			return Timer{}, err
		}
		adj, _ := member(sm, "AdjustForDST")
		if t.Schedule.AdjustForDST, err = boolField(path+".Schedule.AdjustForDST", adj); err != nil {
			return Timer{}, err
		}
	}
	if v, ok := member(m, "ScheduleStatus"); ok {
		if t.ScheduleStatus, err = decodeScheduleStatus(path+".ScheduleStatus", v); err != nil {
			return Timer{}, err
		}
	}
	due, _ := member(m, "IsPastDue")
	if t.IsPastDue, err = boolField(path+".IsPastDue", due); err != nil {
		return Timer{}, err
	}
	return t, nil
}

func decodeScheduleStatus(path string, raw json.RawMessage) (*ScheduleStatus, error) {
	if isNull(raw) {
		return nil, nil
	}
	m, err := object(path, raw, "object {Last, Next, LastUpdated} or null")
	if err != nil {
		return nil, err
	}
	var st ScheduleStatus
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"Last", &st.Last}, {"Next", &st.Next}, {"LastUpdated", &st.LastUpdated}} {
		v, _ := member(m, f.name)
		if *f.dst, err = timeField(path+"."+f.name, v); err != nil {
			return nil, err
		}
	}
	return &st, nil
}
