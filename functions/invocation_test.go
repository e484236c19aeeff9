package functions

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := ParseTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestDecodeReferenceHTTP decodes the exact HTTP payload of reference §3.4.
func TestDecodeReferenceHTTP(t *testing.T) {
	inv, err := DecodeInvocation(bytes.NewReader(readFile(t, "testdata/http_invocation.json")), 0)
	if err != nil {
		t.Fatal(err)
	}
	req, err := inv.HTTP("req")
	if err != nil {
		t.Fatal(err)
	}
	if req.URL != "http://localhost:7071/api/order?source=web" || req.Method != "POST" {
		t.Errorf("Url/Method = %q %q", req.URL, req.Method)
	}
	if !reflect.DeepEqual(req.Query, map[string]string{"source": "web"}) {
		t.Errorf("Query = %v", req.Query)
	}
	wantHeaders := http.Header{"Content-Type": {"application/json"}, "Content-Length": {"40"}, "Host": {"localhost:7071"}, "User-Agent": {"curl/8.0"}}
	if !reflect.DeepEqual(req.Headers, wantHeaders) {
		t.Errorf("Headers = %v", req.Headers)
	}
	if len(req.Params) != 0 || req.Params == nil {
		t.Errorf("Params = %#v, want empty map", req.Params)
	}
	if len(req.Identities) != 1 || req.Identities[0].IsAuthenticated || req.Identities[0].AuthenticationType != nil || req.Identities[0].NameClaimType != NameClaimType {
		t.Errorf("Identities = %+v", req.Identities)
	}
	if req.Body != `{"id":1005,"quantity":2,"color":"black"}` {
		t.Errorf("Body = %q", req.Body)
	}
	if req.ContentType() != "application/json" || req.AuthLevel() != "" {
		t.Errorf("ContentType/AuthLevel = %q %q", req.ContentType(), req.AuthLevel())
	}
	sys, err := inv.Sys()
	if err != nil {
		t.Fatal(err)
	}
	if sys.MethodName != "order" || !sys.UtcNow.Equal(time.Date(2024, 5, 14, 15, 14, 15, 128919000, time.UTC)) || sys.RandGuid != "7a85f722-0000-0000-0000-000000000000" {
		t.Errorf("sys = %+v", sys)
	}
	if rc, err := inv.RetryContext(); rc != nil || err != nil {
		t.Errorf("RetryContext = %v, %v; want nil, nil", rc, err)
	}
}

// TestDecodeReferenceTimer decodes the exact timer payload of reference §3.5.
func TestDecodeReferenceTimer(t *testing.T) {
	inv, err := DecodeInvocation(bytes.NewReader(readFile(t, "testdata/timer_invocation.json")), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := inv.Timer("myTimer")
	if err != nil {
		t.Fatal(err)
	}
	want := Timer{
		Schedule: TimerSchedule{AdjustForDST: true},
		ScheduleStatus: &ScheduleStatus{
			Last:        mustTime(t, "2026-01-10T10:00:00.0087264+00:00"),
			Next:        mustTime(t, "2026-01-10T10:05:00+00:00"),
			LastUpdated: mustTime(t, "2026-01-10T10:00:00.0087264+00:00"),
		},
	}
	if !reflect.DeepEqual(tm, want) {
		t.Errorf("Timer = %+v, want %+v", tm, want)
	}
	if tm.ScheduleStatus.FirstRun() {
		t.Error("FirstRun = true")
	}
	if tm.ScheduleStatus.Last.Nanosecond() != 8726400 {
		t.Errorf("7-digit fraction lost: %v", tm.ScheduleStatus.Last)
	}
}

func TestTimerVariants(t *testing.T) {
	body := func(timer string) string {
		return `{"Data":{"timer":` + timer + `},"Metadata":{"sys":{"MethodName":"MirrorTimer","UtcNow":"2026-01-10T10:05:00Z","RandGuid":"g"}}}`
	}
	t.Run("first run", func(t *testing.T) {
		inv, err := ParseInvocation([]byte(body(`{"Schedule":{"AdjustForDST":true},"ScheduleStatus":{"Last":"0001-01-01T00:00:00+00:00","Next":"2026-01-10T10:05:00+00:00","LastUpdated":"0001-01-01T00:00:00+00:00"},"IsPastDue":false}`)))
		if err != nil {
			t.Fatal(err)
		}
		tm, err := inv.Timer("timer")
		if err != nil {
			t.Fatal(err)
		}
		if !tm.ScheduleStatus.FirstRun() || !tm.ScheduleStatus.Last.IsZero() {
			t.Errorf("first run not detected: %+v", tm.ScheduleStatus)
		}
	})
	t.Run("no offset, past due, empty schedule", func(t *testing.T) {
		inv, _ := ParseInvocation([]byte(body(`{"Schedule":{},"ScheduleStatus":{"Last":"2026-01-10T10:00:00.0087264","Next":"2026-01-10T10:05:00","LastUpdated":null},"IsPastDue":true}`)))
		tm, err := inv.Timer("timer")
		if err != nil {
			t.Fatal(err)
		}
		if !tm.IsPastDue || tm.Schedule.AdjustForDST || !tm.ScheduleStatus.Next.Equal(time.Date(2026, 1, 10, 10, 5, 0, 0, time.UTC)) || !tm.ScheduleStatus.LastUpdated.IsZero() {
			t.Errorf("Timer = %+v %+v", tm, tm.ScheduleStatus)
		}
	})
	t.Run("useMonitor false", func(t *testing.T) {
		inv, _ := ParseInvocation([]byte(body(`{"Schedule":{"AdjustForDST":true},"ScheduleStatus":null,"IsPastDue":false}`)))
		tm, err := inv.Timer("timer")
		if err != nil || tm.ScheduleStatus != nil {
			t.Errorf("Timer = %+v, %v; want nil status", tm, err)
		}
	})
	t.Run("retry context", func(t *testing.T) {
		inv, _ := ParseInvocation([]byte(`{"Data":{"timer":{}},"Metadata":{"RetryContext":{"RetryCount":2,"MaxRetryCount":3,"Exception":{"Message":"boom"}}}}`))
		rc, err := inv.RetryContext()
		if err != nil || rc == nil || rc.RetryCount != 2 || rc.MaxRetryCount != 3 || !strings.Contains(string(rc.Exception), "boom") {
			t.Errorf("RetryContext = %+v, %v", rc, err)
		}
	})
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, body, binding, kind, want string
	}{
		{"empty", "", "", "", "invocation body: empty"},
		{"whitespace", " \n", "", "", "invocation body: empty"},
		{"syntax", `{"Data":`, "", "", "invocation body: not valid JSON"},
		{"array", `[]`, "", "", "invocation body: want JSON object"},
		{"no data", `{"Metadata":{}}`, "", "", "invocation body: Data: missing"},
		{"data string", `{"Data":"x"}`, "", "", "invocation body: Data: want object, got string"},
		{"metadata array", `{"Data":{},"Metadata":[]}`, "", "", "invocation body: Metadata: want object, got array"},
		{"missing binding", `{"Data":{"req":{}}}`, "timer", "timer", `invocation body: Data.timer: missing (Data has: "req")`},
		{"timer not object", `{"Data":{"timer":"x"}}`, "timer", "timer", "invocation body: Data.timer: want timer object"},
		{"IsPastDue string", `{"Data":{"timer":{"IsPastDue":"yes"}}}`, "timer", "timer", "invocation body: Data.timer.IsPastDue: want boolean, got string"},
		{"status array", `{"Data":{"timer":{"ScheduleStatus":[]}}}`, "timer", "timer", "invocation body: Data.timer.ScheduleStatus: want object"},
		{"bad time", `{"Data":{"timer":{"ScheduleStatus":{"Next":"tomorrow"}}}}`, "timer", "timer", `invocation body: Data.timer.ScheduleStatus.Next: want a timestamp like 2026-01-10T10:05:00+00:00, got "tomorrow"`},
		{"time number", `{"Data":{"timer":{"ScheduleStatus":{"Last":5}}}}`, "timer", "timer", "invocation body: Data.timer.ScheduleStatus.Last: want timestamp string, got number"},
		{"headers string", `{"Data":{"req":{"Headers":"x"}}}`, "req", "http", "invocation body: Data.req.Headers: want object of string arrays, got string"},
		{"header single string", `{"Data":{"req":{"Headers":{"Accept":"*/*"}}}}`, "req", "http", `invocation body: Data.req.Headers: want object of string arrays, "Accept" is a string`},
		{"header number element", `{"Data":{"req":{"Headers":{"Accept":[1]}}}}`, "req", "http", `invocation body: Data.req.Headers: want object of string arrays, "Accept" has a number element`},
		{"query as docs string", `{"Data":{"req":{"Query":"{}"}}}`, "req", "http", "invocation body: Data.req.Query: want object of strings, got string"},
		{"query number", `{"Data":{"req":{"Query":{"n":1}}}}`, "req", "http", `invocation body: Data.req.Query: want object of strings, "n" is a number`},
		{"url number", `{"Data":{"req":{"Url":1}}}`, "req", "http", "invocation body: Data.req.Url: want string, got number"},
		{"body object", `{"Data":{"req":{"Body":{}}}}`, "req", "http", "invocation body: Data.req.Body: want string, got object"},
		{"identities object", `{"Data":{"req":{"Identities":{}}}}`, "req", "http", "invocation body: Data.req.Identities: want array of identity objects, got object"},
		{"identity claims", `{"Data":{"req":{"Identities":[{"Claims":"x"}]}}}`, "req", "http", "invocation body: Data.req.Identities[0]: Claims: want array, got string"},
		{"sys string", `{"Data":{},"Metadata":{"sys":"x"}}`, "", "sys", "invocation body: Metadata.sys: want object"},
		{"sys time", `{"Data":{},"Metadata":{"sys":{"UtcNow":"now"}}}`, "", "sys", "invocation body: Metadata.sys.UtcNow: want a timestamp"},
		{"retry count string", `{"Data":{},"Metadata":{"RetryContext":{"RetryCount":"1"}}}`, "", "retry", "invocation body: Metadata.RetryContext.RetryCount: want integer, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := DecodeInvocation(strings.NewReader(tt.body), 0)
			if err == nil {
				switch tt.kind {
				case "timer":
					_, err = inv.Timer(tt.binding)
				case "http":
					_, err = inv.HTTP(tt.binding)
				case "sys":
					_, err = inv.Sys()
				case "retry":
					_, err = inv.RetryContext()
				}
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %q\nwant prefix %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error has several lines: %q", err)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Errorf("error %T is not a *DecodeError", err)
			}
		})
	}
}

func TestDecodeLimitsAndReadErrors(t *testing.T) {
	body := readFile(t, "testdata/timer_invocation.json")
	if _, err := DecodeInvocation(bytes.NewReader(body), int64(len(body))); err != nil {
		t.Errorf("body of exactly maxBytes: %v", err)
	}
	_, err := DecodeInvocation(bytes.NewReader(body), int64(len(body)-1))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("over limit: %v", err)
	}
	boom := errors.New("boom")
	_, err = DecodeInvocation(iotest.ErrReader(boom), 0)
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "invocation body: read: ") {
		t.Errorf("read error = %v", err)
	}
}

func TestCaseInsensitiveMembers(t *testing.T) {
	inv, err := ParseInvocation([]byte(`{"data":{"req":{"url":"u","method":"GET","headers":{"x-a":["1","2"]}}},"metadata":{"Sys":{"methodName":"F"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req, err := inv.HTTP("req")
	if err != nil {
		t.Fatal(err)
	}
	if req.URL != "u" || req.Method != "GET" || !reflect.DeepEqual(req.Headers.Values("X-A"), []string{"1", "2"}) {
		t.Errorf("req = %+v", req)
	}
	if sys, _ := inv.Sys(); sys.MethodName != "F" {
		t.Errorf("sys = %+v", sys)
	}
}

func TestParseTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		"2026-01-10T10:00:00.0087264+00:00": time.Date(2026, 1, 10, 10, 0, 0, 8726400, time.UTC),
		"2022-10-11T10:52:00.003967+02:00":  time.Date(2022, 10, 11, 8, 52, 0, 3967000, time.UTC),
		"0001-01-01T00:00:00+00:00":         {},
		"2024-05-14T15:14:15.128919Z":       time.Date(2024, 5, 14, 15, 14, 15, 128919000, time.UTC),
		"2006-01-02T15:04:05.9999999":       time.Date(2006, 1, 2, 15, 4, 5, 999999900, time.UTC),
		"2006-01-02T15:04:05":               time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC),
	} {
		got, err := ParseTime(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseTime("yesterday"); err == nil {
		t.Error("ParseTime(yesterday) succeeded")
	}
}

func TestFormatTimes(t *testing.T) {
	if got := FormatLocalTime(time.Time{}); got != "0001-01-01T00:00:00+00:00" {
		t.Errorf("zero = %q", got)
	}
	if got := FormatLocalTime(time.Date(2026, 1, 10, 10, 0, 0, 8726400, time.UTC)); got != "2026-01-10T10:00:00.0087264+00:00" {
		t.Errorf("local = %q", got)
	}
	if got := FormatLocalTime(time.Date(2026, 1, 10, 10, 5, 0, 0, time.UTC)); got != "2026-01-10T10:05:00+00:00" {
		t.Errorf("local whole = %q", got)
	}
	if got := FormatUTCTime(time.Date(2024, 5, 14, 15, 14, 15, 128919000, time.UTC)); got != "2024-05-14T15:14:15.128919Z" {
		t.Errorf("utc = %q", got)
	}
}

// TestBuildersMatchReference checks that the host-side builders produce the
// reference payloads member for member.
func TestBuildersMatchReference(t *testing.T) {
	t.Run("timer", func(t *testing.T) {
		tm := Timer{
			Schedule: TimerSchedule{AdjustForDST: true},
			ScheduleStatus: &ScheduleStatus{
				Last:        time.Date(2026, 1, 10, 10, 0, 0, 8726400, time.UTC),
				Next:        time.Date(2026, 1, 10, 10, 5, 0, 0, time.UTC),
				LastUpdated: time.Date(2026, 1, 10, 10, 0, 0, 8726400, time.UTC),
			},
		}
		sys := Sys{MethodName: "MyTimerFunction", UtcNow: time.Date(2026, 1, 10, 10, 5, 0, 12345600, time.UTC), RandGuid: "4e773554-f6b7-4ea2-b07d-4c5fd5aba741"}
		inv, err := NewTimerInvocation("myTimer", tm, sys, nil)
		if err != nil {
			t.Fatal(err)
		}
		assertSameJSON(t, inv, readFile(t, "testdata/timer_invocation.json"))
	})
	t.Run("http", func(t *testing.T) {
		req := HTTPRequest{
			URL:        "http://localhost:7071/api/order?source=web",
			Method:     "POST",
			Query:      map[string]string{"source": "web"},
			Headers:    http.Header{"Content-Type": {"application/json"}, "Content-Length": {"40"}, "Host": {"localhost:7071"}, "User-Agent": {"curl/8.0"}},
			Identities: []Identity{AnonymousIdentity()},
			Body:       `{"id":1005,"quantity":2,"color":"black"}`,
		}
		sys := Sys{MethodName: "order", UtcNow: time.Date(2024, 5, 14, 15, 14, 15, 128919000, time.UTC), RandGuid: "7a85f722-0000-0000-0000-000000000000"}
		inv, err := NewHTTPInvocation("req", req, sys)
		if err != nil {
			t.Fatal(err)
		}
		// The reference trace omits Metadata.Params; KarlGW's fixtures and
		// this builder include it.
		want := readFile(t, "testdata/http_invocation.json")
		var doc map[string]map[string]any
		if err := json.Unmarshal(want, &doc); err != nil {
			t.Fatal(err)
		}
		doc["Metadata"]["Params"] = map[string]any{}
		want, _ = json.Marshal(doc)
		assertSameJSON(t, inv, want)
	})
	t.Run("body omitted when empty", func(t *testing.T) {
		b, _ := json.Marshal(HTTPRequest{Method: "GET"})
		if strings.Contains(string(b), "Body") {
			t.Errorf("Body present: %s", b)
		}
	})
}

func assertSameJSON(t *testing.T, got any, want []byte) {
	t.Helper()
	gb, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs\n got: %s\nwant: %s", gb, want)
	}
}

func TestHandlerPort(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	if p, err := HandlerPort(env(map[string]string{EnvPort: "7001", EnvLegacyPort: "1"})); p != 7001 || err != nil {
		t.Errorf("port = %d, %v", p, err)
	}
	if p, err := HandlerPort(env(map[string]string{EnvLegacyPort: "7002"})); p != 7002 || err != nil {
		t.Errorf("legacy port = %d, %v", p, err)
	}
	if _, err := HandlerPort(env(nil)); err == nil || !strings.Contains(err.Error(), EnvPort) {
		t.Errorf("unset: %v", err)
	}
	if _, err := HandlerPort(env(map[string]string{EnvPort: "http"})); err == nil || !strings.Contains(err.Error(), `FUNCTIONS_CUSTOMHANDLER_PORT="http"`) {
		t.Errorf("bad: %v", err)
	}
}
