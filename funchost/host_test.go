package funchost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

// handlerBin is the test handler (testdata/handler), built once by TestMain.
var handlerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "funchost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	handlerBin = filepath.Join(dir, "handler")
	if out, err := exec.Command("go", "build", "-o", handlerBin, "./testdata/handler").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build test handler: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const yearly = "0 0 0 1 1 *" // never fires during a test

func timerFn(schedule string, useMonitor bool) string {
	return fmt.Sprintf(`{"bindings":[{"name":"timer","type":"timerTrigger","direction":"in","schedule":%q,"useMonitor":%v}]}`, schedule, useMonitor)
}

func httpFn(authLevel, methods, route string) string {
	return fmt.Sprintf(`{"bindings":[{"name":"req","type":"httpTrigger","direction":"in","authLevel":%q,"methods":%s,"route":%q},{"name":"res","type":"http","direction":"out"}]}`, authLevel, methods, route)
}

// newApp writes a function app folder: host.json, one folder per function
// and the test handler at ./handler.
func newApp(t *testing.T, hostJSON string, fns map[string]string) string {
	t.Helper()
	root := t.TempDir()
	if hostJSON == "" {
		hostJSON = `{"version":"2.0","functionTimeout":"00:00:30","customHandler":{"description":{"defaultExecutablePath":"handler"}}}`
	}
	must(t, os.WriteFile(filepath.Join(root, "host.json"), []byte(hostJSON), 0o644))
	for name, js := range fns {
		must(t, os.MkdirAll(filepath.Join(root, name), 0o755))
		must(t, os.WriteFile(filepath.Join(root, name, "function.json"), []byte(js), 0o644))
	}
	must(t, os.Symlink(handlerBin, filepath.Join(root, "handler")))
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testHost struct {
	*Host
	stdout, stderr, log *syncBuffer
}

func startHost(t *testing.T, app string, opts Options) *testHost {
	t.Helper()
	th := newHost(t, app, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := th.Start(ctx); err != nil {
		t.Fatalf("Start: %v\nstderr: %s\nlog: %s", err, th.stderr, th.log)
	}
	return th
}

func newHost(t *testing.T, app string, opts Options) *testHost {
	t.Helper()
	th := &testHost{stdout: &syncBuffer{}, stderr: &syncBuffer{}, log: &syncBuffer{}}
	if opts.Stdout == nil {
		opts.Stdout = th.stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = th.stderr
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(th.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := New(app, opts)
	if err != nil {
		t.Fatal(err)
	}
	th.Host = h
	t.Cleanup(func() { h.Stop() })
	return th
}

// facts decodes the "facts {…}" log line of an echo* function.
type facts struct {
	Method           string
	Path             string
	Headers          map[string][]string
	Host             string
	TransferEncoding []string
	ContentLength    int64
	Body             string
	Env              map[string]string
	Cwd              string
	Args             []string
	Probes           int
	Pid              int
}

func factsOf(t *testing.T, res *Result) facts {
	t.Helper()
	if res.Err != nil {
		t.Fatalf("invocation failed: %v", res.Err)
	}
	if len(res.Logs) == 0 || !strings.HasPrefix(res.Logs[0], "facts ") {
		t.Fatalf("no facts in Logs %q", res.Logs)
	}
	var f facts
	must(t, json.Unmarshal([]byte(strings.TrimPrefix(res.Logs[0], "facts ")), &f))
	return f
}

func invokeTimer(t *testing.T, h *testHost, name string, opts TimerInvocation) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.InvokeTimer(ctx, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestReadinessEnvironmentAndOutput(t *testing.T) {
	t.Parallel()
	app := newApp(t, `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"handler","arguments":["--from=%APP_ARG%","%NOT_SET%","plain"]}}}`,
		map[string]string{"EchoTimer": timerFn(yearly, true)})
	th := newHost(t, app, Options{
		Environ:  []string{"PATH=" + os.Getenv("PATH"), "APP_INHERITED=yes", "APP_SETTING=overridden"},
		Settings: map[string]string{"TEST_START_DELAY_MS": "300", "APP_ARG": "settings", "APP_SETTING": "v1"},
	})
	start := time.Now()
	if err := th.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("ready after %v, before the handler listened", d)
	}
	f := factsOf(t, invokeTimer(t, th, "EchoTimer", TimerInvocation{}))
	if f.Probes != 1 {
		t.Errorf("handler saw %d GET / probes, want exactly 1 (refused connections before it listened)", f.Probes)
	}
	port := fmt.Sprint(th.HandlerPort())
	abs, _ := filepath.Abs(app)
	wantEnv := map[string]string{
		functions.EnvPort:           port,
		functions.EnvLegacyPort:     port,
		functions.EnvWorkerID:       th.WorkerID(),
		functions.EnvLegacyWorkerID: th.WorkerID(),
		functions.EnvAppRoot:        abs,
		"APP_SETTING":               "v1",
		"APP_INHERITED":             "yes",
		"APP_ARG":                   "settings",
		"TEST_START_DELAY_MS":       "300",
	}
	if !reflect.DeepEqual(f.Env, wantEnv) {
		t.Errorf("handler env = %v\nwant %v", f.Env, wantEnv)
	}
	if f.Cwd != abs {
		t.Errorf("cwd = %q, want the app root %q", f.Cwd, abs)
	}
	if want := []string{"--from=settings", "", "plain"}; !reflect.DeepEqual(f.Args, want) {
		t.Errorf("args = %q, want %q (expanded, unresolved removed)", f.Args, want)
	}
	if f.Pid != th.PID() {
		t.Errorf("pid %d, host says %d", f.Pid, th.PID())
	}
	waitFor(t, func() bool { return strings.Contains(th.stdout.String(), "request POST /EchoTimer") })
	if out := th.stdout.String(); !strings.Contains(out, "handler listening on port "+port+"\n") {
		t.Errorf("stdout = %q", out)
	}
	if errOut := th.stderr.String(); !strings.Contains(errOut, "warning: a test stderr line\n") {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestOutputToLogger(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{"EchoTimer": timerFn(yearly, true)})
	log := &syncBuffer{}
	h, err := New(app, Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
	must(t, err)
	defer h.Stop()
	must(t, h.Start(context.Background()))
	res, err := h.InvokeTimer(context.Background(), "EchoTimer", TimerInvocation{})
	must(t, err)
	must(t, res.Err)
	waitFor(t, func() bool {
		s := log.String()
		return strings.Contains(s, `level=INFO msg="handler listening on port`) && strings.Contains(s, `level=WARN msg="warning: a test stderr line" category=Host.Function.Console`)
	})
	s := log.String()
	for _, want := range []string{"Executing 'Functions.EchoTimer' (Reason='This function was programmatically called via the host APIs.', Id=" + res.InvocationID, "Executed 'Functions.EchoTimer' (Succeeded, Id=" + res.InvocationID, `msg="second line" category=Function.EchoTimer.User`} {
		if !strings.Contains(s, want) {
			t.Errorf("log lacks %q\n%s", want, s)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTimerRequestIsTheHosts checks headers, transfer encoding and the
// exact timer payload, first run and later runs.
func TestTimerRequestIsTheHosts(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{"EchoTimer": timerFn("0 */5 * * * *", true), "EchoNoMonitor": timerFn("0 */5 * * * *", false)})
	th := startHost(t, app, Options{HostVersion: "4.1037.0.1"})
	res := invokeTimer(t, th, "EchoTimer", TimerInvocation{})
	f := factsOf(t, res)

	if f.Method != "POST" || f.Path != "/EchoTimer" || f.Host != fmt.Sprintf("127.0.0.1:%d", th.HandlerPort()) {
		t.Errorf("request line = %s %s Host %s", f.Method, f.Path, f.Host)
	}
	wantHeaders := map[string][]string{
		"Content-Type":                   {"application/json; charset=utf-8"},
		"User-Agent":                     {"Azure-Functions-Host/4.1037.0.1"},
		"X-Azure-Functions-Hostversion":  {"4.1037.0.1"},
		"X-Azure-Functions-Invocationid": {res.InvocationID},
	}
	if !reflect.DeepEqual(f.Headers, wantHeaders) {
		t.Errorf("headers = %v\nwant exactly %v", f.Headers, wantHeaders)
	}
	if !reflect.DeepEqual(f.TransferEncoding, []string{"chunked"}) || f.ContentLength != -1 {
		t.Errorf("transfer encoding %v, content length %d; want chunked without Content-Length", f.TransferEncoding, f.ContentLength)
	}
	if f.Body != string(res.Request) {
		t.Errorf("handler got %s\nhost sent %s", f.Body, res.Request)
	}

	// The payload: exactly Data.timer and Metadata.sys.
	var top map[string]map[string]json.RawMessage
	must(t, json.Unmarshal([]byte(f.Body), &top))
	if keys(top) != "Data Metadata" || keys(top["Data"]) != "timer" || keys(top["Metadata"]) != "sys" {
		t.Errorf("payload members: %s / Data: %s / Metadata: %s", keys(top), keys(top["Data"]), keys(top["Metadata"]))
	}
	if !strings.Contains(f.Body, `"Schedule":{"AdjustForDST":true},"ScheduleStatus":{"Last":"0001-01-01T00:00:00+00:00","Next":"`) ||
		!strings.Contains(f.Body, `"LastUpdated":"0001-01-01T00:00:00+00:00"},"IsPastDue":false}`) {
		t.Errorf("first-run payload = %s", f.Body)
	}
	inv, err := functions.ParseInvocation([]byte(f.Body))
	must(t, err)
	tm, err := inv.Timer("timer")
	must(t, err)
	sched, _ := th.Schedule("EchoTimer")
	if !tm.ScheduleStatus.FirstRun() || !tm.ScheduleStatus.Next.Equal(sched.Next(res.Start)) || tm.IsPastDue {
		t.Errorf("first run status = %+v (start %v)", tm.ScheduleStatus, res.Start)
	}
	sys, err := inv.Sys()
	must(t, err)
	if sys.MethodName != "EchoTimer" || time.Since(sys.UtcNow) > time.Minute || len(sys.RandGuid) != 36 || sys.RandGuid == res.InvocationID {
		t.Errorf("sys = %+v", sys)
	}
	if !strings.Contains(f.Body, `"UtcNow":"`) || !strings.Contains(f.Body, `Z","RandGuid"`) {
		t.Errorf("UtcNow not written as UTC with Z: %s", f.Body)
	}
	if res.Logs[1] != "second line" || len(res.Outputs) != 0 || res.ReturnValue != nil || res.Status != 200 {
		t.Errorf("result = %+v", res)
	}

	// Second run: Last = LastUpdated = the first run's start, Next = the
	// occurrence after it.
	res2 := invokeTimer(t, th, "EchoTimer", TimerInvocation{IsPastDue: true, RetryContext: &functions.RetryContext{RetryCount: 1, MaxRetryCount: 3}})
	inv2, err := functions.ParseInvocation([]byte(factsOf(t, res2).Body))
	must(t, err)
	tm2, _ := inv2.Timer("timer")
	st := tm2.ScheduleStatus
	if st.FirstRun() || st.Last.Sub(res.Start).Abs() > 500*time.Millisecond || !st.LastUpdated.Equal(st.Last) || !st.Next.Equal(sched.Next(st.Last)) || !tm2.IsPastDue {
		t.Errorf("second run status = %+v, IsPastDue %v (first start %v)", st, tm2.IsPastDue, res.Start)
	}
	if rc, err := inv2.RetryContext(); err != nil || rc == nil || rc.RetryCount != 1 || rc.MaxRetryCount != 3 {
		t.Errorf("RetryContext = %+v, %v", rc, err)
	}
	if rec, ok := th.ScheduleStatus("EchoTimer"); !ok || rec.Last.Sub(res2.Start).Abs() > 500*time.Millisecond || !rec.Next.Equal(sched.Next(rec.Last)) || !rec.LastUpdated.Equal(rec.Last) {
		t.Errorf("record after second run = %+v, %v (start %v)", rec, ok, res2.Start)
	}

	// useMonitor false: ScheduleStatus null.
	res3 := invokeTimer(t, th, "EchoNoMonitor", TimerInvocation{})
	if body := factsOf(t, res3).Body; !strings.Contains(body, `"ScheduleStatus":null`) {
		t.Errorf("useMonitor=false payload = %s", body)
	}
}

func keys[V any](m map[string]V) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestResponseValidation checks that responses are judged as the host
// judges them.
func TestResponseValidation(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{
		"FailTimer":     timerFn(yearly, true),
		"PlainTimer":    timerFn(yearly, true),
		"EmptyTimer":    timerFn(yearly, true),
		"BadlogsTimer":  timerFn(yearly, true),
		"WrongoutTimer": timerFn(yearly, true),
		"StringresHTTP": httpFn("anonymous", `["get"]`, "s"),
	})
	th := startHost(t, app, Options{})

	res := invokeTimer(t, th, "FailTimer", TimerInvocation{})
	if !errors.Is(res.Err, ErrStatus) || res.Status != 500 || res.Logs != nil || !reflect.DeepEqual(res.DroppedLogs, []string{"failing on purpose", "records could not be mirrored"}) {
		t.Errorf("non-2xx: err %v, status %d, Logs %q, DroppedLogs %q", res.Err, res.Status, res.Logs, res.DroppedLogs)
	}
	if !strings.Contains(res.Err.Error(), "500 Internal Server Error: the host fails the invocation and ignores the response body, including 2 Logs lines") {
		t.Errorf("non-2xx message: %v", res.Err)
	}
	// A failure still advances the schedule record.
	if rec, ok := th.ScheduleStatus("FailTimer"); !ok || rec.FirstRun() {
		t.Errorf("record after a failed run = %+v, %v", rec, ok)
	}
	for name, want := range map[string]string{
		"PlainTimer":    "Content-Type text/plain; charset=utf-8 is not application/json or text/json",
		"EmptyTimer":    "empty body",
		"BadlogsTimer":  "Logs: want array of strings, got string",
		"WrongoutTimer": `Outputs key "nope": function WrongoutTimer has no output bindings`,
	} {
		res := invokeTimer(t, th, name, TimerInvocation{})
		if !errors.Is(res.Err, ErrInvalidResponse) || !strings.Contains(res.Err.Error(), want) || res.Status != 200 {
			t.Errorf("%s: err %v, status %d; want ErrInvalidResponse containing %q", name, res.Err, res.Status, want)
		}
	}
	req, _ := newRequest("GET", "http://localhost:7071/api/s", "")
	res, err := th.InvokeHTTP(context.Background(), "StringresHTTP", HTTPInvocation{Request: req})
	must(t, err)
	if !errors.Is(res.Err, ErrInvalidResponse) || !strings.Contains(res.Err.Error(), "Failed while trying to Deserialize to httpOutputBindingResponse") {
		t.Errorf("string res: %v", res.Err)
	}
	if _, err := th.InvokeTimer(context.Background(), "NoSuch", TimerInvocation{}); err == nil {
		t.Error("unknown function accepted")
	}
	if _, err := th.InvokeTimer(context.Background(), "StringresHTTP", TimerInvocation{}); err == nil {
		t.Error("HTTP function fired as a timer")
	}
}

func TestInvokeRawBody(t *testing.T) {
	t.Parallel()
	th := startHost(t, newApp(t, "", map[string]string{"EchoTimer": timerFn(yearly, true)}), Options{})
	res, err := th.Invoke(context.Background(), "echotimer", []byte(`{"Data":"malformed"}`))
	must(t, err)
	if f := factsOf(t, res); f.Body != `{"Data":"malformed"}` || f.Path != "/EchoTimer" {
		t.Errorf("raw invoke: %+v", f)
	}
}

func TestFunctionErrors(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{
		"MirrorTimer": timerFn("%MIRROR_SCHEDULE%", true),
		"BadTimer":    timerFn("every minute", true),
		"EchoTimer":   timerFn("%ECHO_SCHEDULE%", true),
	})
	th := newHost(t, app, Options{Settings: map[string]string{"ECHO_SCHEDULE": yearly}, Environ: []string{}})
	errs := th.FunctionErrors()
	if len(errs) != 2 || !strings.Contains(fmt.Sprint(errs["MirrorTimer"]), "%MIRROR_SCHEDULE% does not resolve to a value") || !strings.Contains(fmt.Sprint(errs["BadTimer"]), "want 6 fields") {
		t.Errorf("FunctionErrors = %v", errs)
	}
	if s, ok := th.Schedule("EchoTimer"); !ok || s.String() != yearly {
		t.Errorf("EchoTimer schedule = %v", s)
	}
	if _, err := th.InvokeTimer(context.Background(), "MirrorTimer", TimerInvocation{}); err == nil || !strings.Contains(err.Error(), "is in error") {
		t.Errorf("invoking a function in error: %v", err)
	}
	th2 := newHost(t, app, Options{Environ: []string{}, SettingDefaults: functions.SettingDefaults()})
	if s, ok := th2.Schedule("MirrorTimer"); !ok || s.String() != functions.DefaultMirrorSchedule {
		t.Errorf("MirrorTimer with defaults = %v (%v)", s, th2.FunctionErrors())
	}
	if !strings.Contains(th2.log.String(), "app setting is not set; using the local default") {
		t.Errorf("no warning about the default:\n%s", th2.log)
	}
}

func newRequest(method, url, body string) (*http.Request, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return http.NewRequest(method, url, r)
}
