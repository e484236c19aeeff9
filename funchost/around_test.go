package funchost

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClientDisconnectDoesNotCancelInvocation: the host sends the
// invocation without a cancellation token (host
// src/WebJobs.Script/Workers/Http/DefaultHttpWorkerService.cs,
// ProcessDefaultInvocationRequest: _httpClient.SendAsync(request) with no
// token), so a client that gives up does not cancel the handler's request:
// it runs to its end and succeeds.
func TestClientDisconnectDoesNotCancelInvocation(t *testing.T) {
	t.Parallel()
	results := make(chan *Result, 4)
	th := startHost(t, newApp(t, "", map[string]string{"SleepHTTP": httpFn("anonymous", `["post"]`, "sleep")}),
		Options{Settings: map[string]string{"TEST_SLEEP_MS": "1500"}, OnResult: func(r *Result) { results <- r }})
	srv := httptest.NewServer(th.Handler())
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/sleep", strings.NewReader(`{}`))
	must(t, err)
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the client got %d before its own deadline; want it to give up first", resp.StatusCode)
	}
	select {
	case res := <-results:
		if res.Err != nil {
			t.Fatalf("the invocation ended with %v after the client went away; the host never cancels it", res.Err)
		}
		if res.Duration < time.Second {
			t.Errorf("the invocation took %s; the handler sleeps 1.5 s, so it was cut short", res.Duration)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no result for the invocation whose client went away")
	}
}

// TestFrontEndCutsTheClientNotTheInvocation: App Service's front end
// answers the caller with an error after 230 s while the invocation runs on
// (Microsoft Learn functions-scale#timeout; the host's own request to the
// handler has HttpClient.Timeout = functionTimeout + 1 min,
// DefaultHttpWorkerService.cs). Options.FrontEndTimeout models it.
func TestFrontEndCutsTheClientNotTheInvocation(t *testing.T) {
	t.Parallel()
	results := make(chan *Result, 4)
	th := startHost(t, newApp(t, "", map[string]string{"SleepHTTP": httpFn("anonymous", `["post"]`, "sleep")}),
		Options{Settings: map[string]string{"TEST_SLEEP_MS": "1500"}, FrontEndTimeout: 300 * time.Millisecond, OnResult: func(r *Result) { results <- r }})
	srv := httptest.NewServer(th.Handler())
	defer srv.Close()

	start := time.Now()
	resp, err := srv.Client().Post(srv.URL+"/api/sleep", "application/json", strings.NewReader(`{}`))
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || time.Since(start) > time.Second {
		t.Fatalf("front end answered %d %q after %s; want 502 at the 300 ms cutoff", resp.StatusCode, body, time.Since(start))
	}
	select {
	case res := <-results:
		if res.Err != nil || res.Duration < time.Second {
			t.Fatalf("invocation after the cutoff: err %v, duration %s; want it to run to its end", res.Err, res.Duration)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no result for the invocation after the front end's cutoff")
	}
	if DefaultFrontEndTimeout != 230*time.Second {
		t.Errorf("DefaultFrontEndTimeout = %s, want App Service's 230 s", DefaultFrontEndTimeout)
	}
}

// TestRestartHostOverlaps: RestartHostAsync (host
// src/WebJobs.Script.WebHost/WebJobsScriptHostService.cs) starts the new
// ScriptHost, with a new handler on a new port, before the old one is
// orphaned; the old handler finishes its running invocation and is then
// killed without a signal.
func TestRestartHostOverlaps(t *testing.T) {
	t.Parallel()
	results := make(chan *Result, 4)
	th := startHost(t, newApp(t, "", map[string]string{
		"SleepHTTP": httpFn("anonymous", `["post"]`, "sleep"),
		"EchoTimer": timerFn(yearly, true),
	}), Options{Settings: map[string]string{"TEST_SLEEP_MS": "2000"}, OnResult: func(r *Result) { results <- r }})
	srv := httptest.NewServer(th.Handler())
	defer srv.Close()
	oldPID, oldPort := th.PID(), th.HandlerPort()

	go func() {
		if resp, err := srv.Client().Post(srv.URL+"/api/sleep", "application/json", strings.NewReader(`{}`)); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return strings.Contains(th.stdout.String(), "request POST /SleepHTTP") })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	orphaned, err := th.RestartHost(ctx)
	must(t, err)
	if th.PID() == oldPID || th.HandlerPort() == oldPort {
		t.Fatalf("RestartHost: pid %d → %d, port %d → %d; want a new process on a new port", oldPID, th.PID(), oldPort, th.HandlerPort())
	}
	if !alive(oldPID) {
		t.Fatal("the old handler was gone when the new one was ready; the host overlaps them")
	}
	// New invocations go to the new handler while the old one still runs.
	if f := factsOf(t, invokeTimer(t, th, "EchoTimer", TimerInvocation{})); f.Pid == oldPID {
		t.Errorf("an invocation after RestartHost went to the old handler %d", oldPID)
	}
	for res := range results {
		if res.Function != "SleepHTTP" {
			continue
		}
		if res.Err != nil {
			t.Errorf("the old handler's running invocation failed: %v", res.Err)
		}
		break
	}
	select {
	case <-orphaned:
	case <-time.After(OrphanWait + 5*time.Second):
		t.Fatal("the old handler was not disposed of")
	}
	if alive(oldPID) {
		t.Error("the old handler outlived its orphaned ScriptHost")
	}
	if strings.Contains(th.stderr.String(), "got signal") {
		t.Errorf("the old handler got a signal; the host kills it: %s", th.stderr)
	}
	if err := th.Err(); err != nil {
		t.Errorf("the restart counted as a worker error: %v", err)
	}
}

// TestSubMinuteMonitorRule: the host turns the schedule monitor off only
// when every field from minutes up is "*" (TimerSchedule.Create →
// ShouldDisableScheduleMonitor, azure-webjobs-sdk-extensions
// Timers/Scheduling/TimerSchedule.cs): a 30 s schedule restricted to
// office hours keeps its ScheduleStatus.
func TestSubMinuteMonitorRule(t *testing.T) {
	t.Parallel()
	th := newHost(t, newApp(t, "", map[string]string{
		"EveryTenSeconds": timerFn("*/10 * * * * *", true),
		"OfficeHours":     timerFn("*/30 * 0-22 * * *", true),
		"EveryMinute":     timerFn("0 */1 * * * *", true),
	}), Options{})
	for name, want := range map[string]bool{"EveryTenSeconds": false, "OfficeHours": true, "EveryMinute": true} {
		if got := th.timers[name].useMonitor; got != want {
			t.Errorf("%s: useMonitor %v, want %v", name, got, want)
		}
	}
}

// hoursExcept is an hour field with every hour but the one 12 hours from
// now: a sub-minute schedule restricted by it keeps its schedule monitor
// (ShouldDisableScheduleMonitor) and fires all through a test.
func hoursExcept(now time.Time) string {
	skip := (now.UTC().Hour() + 12) % 24
	var hours []string
	for h := range 24 {
		if h != skip {
			hours = append(hours, strconv.Itoa(h))
		}
	}
	return strings.Join(hours, ",")
}

// TestTimerLockMoves: two hosts share a Storage, as instances share
// AzureWebJobsStorage. Only the holder of the timer's singleton lock runs
// the schedule (SingletonListener.StartAsync, azure-webjobs-sdk
// src/Microsoft.Azure.WebJobs.Host/Singleton/SingletonListener.cs, with
// TimerListener's [Singleton(Mode = SingletonMode.Listener)]); when its
// listener stops it finishes the running invocation and releases the lease,
// and the other, polling every ListenerLockRecoveryPollingInterval, takes
// it over and starts from the shared status: past due when it missed an
// occurrence (ScheduleMonitor.CheckPastDueAsync).
func TestTimerLockMoves(t *testing.T) {
	t.Parallel()
	schedule := "*/1 * " + hoursExcept(time.Now()) + " * * *"
	app := newApp(t, "", map[string]string{"EchoTimer": timerFn(schedule, true)})
	storage := &Storage{Dir: t.TempDir(), LockPeriod: 2 * time.Second, LockPoll: 2500 * time.Millisecond}
	type fired struct {
		host string
		res  *Result
		at   time.Time
	}
	fires := make(chan fired, 64)
	start := func(name string) (*testHost, context.CancelFunc, chan error) {
		th := startHost(t, app, Options{Storage: storage, OnResult: func(r *Result) { fires <- fired{name, r, time.Now()} }})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- th.RunSchedules(ctx) }()
		return th, cancel, done
	}
	_, stopA, doneA := start("a")
	waitFor(t, func() bool { return len(fires) >= 2 })
	_, stopB, doneB := start("b")
	defer stopB()
	// Three more ticks: all on a.
	for range 3 {
		if f := <-fires; f.host != "a" {
			t.Fatalf("instance %s ran the timer while a held the lock", f.host)
		}
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	recorded, err := storage.readStatus("EchoTimer")
	if err != nil || recorded == nil {
		t.Fatalf("no shared status after a's runs: %v", err)
	}
	var first fired
	for first.host != "b" {
		select {
		case first = <-fires:
			if first.host == "a" && first.at.After(released) {
				t.Fatal("a ran the timer after its listener stopped")
			}
		case <-time.After(storage.LockPoll + 5*time.Second):
			t.Fatalf("b did not take the lock over within its poll (%s)", storage.LockPoll)
		}
	}
	lateness := first.at.Sub(released)
	timer := first.res.Timer
	t.Logf("b's first run %s after a released the lock; past due %v", lateness.Round(time.Millisecond), timer.IsPastDue)
	if lateness > storage.LockPoll+time.Second {
		t.Errorf("b took over %s after the release, want within its poll (%s)", lateness, storage.LockPoll)
	}
	// Past due exactly when b started after the occurrence a recorded
	// as next (b's poll may land before it).
	missed := first.res.Start.After(recorded.Next)
	if timer.IsPastDue != missed || timer.ScheduleStatus == nil || !timer.ScheduleStatus.Next.Equal(recorded.Next) {
		t.Errorf("b's first run at %s: past due %v, status %+v; want past due %v, from a's recorded Next %s", first.res.Start, timer.IsPastDue, timer.ScheduleStatus, missed, recorded.Next)
	}
	if f := <-fires; f.host != "b" || f.res.Timer.IsPastDue {
		t.Errorf("after the takeover: %s ran (past due %v); want b on schedule", f.host, f.res.Timer.IsPastDue)
	}
	stopB()
	<-doneB
}

// TestAdminRunIsNotSerialized: a run through the admin API
// (FunctionsController.Invoke, azure-functions-host
// src/WebJobs.Script.WebHost/Controllers/FunctionsController.cs) needs a
// JSON body, and calls the function through TimerTriggerBinding.BindAsync
// (azure-webjobs-sdk-extensions Timers/Bindings/TimerTriggerBinding.cs),
// outside TimerListener: it runs alongside a running scheduled invocation
// (no _invocationLock) and leaves the schedule status as it was.
func TestAdminRunIsNotSerialized(t *testing.T) {
	t.Parallel()
	results := make(chan *Result, 4)
	th := startHost(t, newApp(t, "", map[string]string{"SleepTimer": timerFn(yearly, true)}),
		Options{Keys: Keys{Master: "master-key"}, Settings: map[string]string{"TEST_SLEEP_MS": "1500"}, OnResult: func(r *Result) { results <- r }})
	srv := httptest.NewServer(th.Handler())
	defer srv.Close()
	post := func(body string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/admin/functions/SleepTimer?code=master-key", strings.NewReader(body))
		must(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusBadRequest {
		t.Errorf("admin run without a body: %d, want 400", code)
	}

	scheduled := make(chan *Result, 1)
	go func() {
		res, _ := th.InvokeTimer(context.Background(), "SleepTimer", TimerInvocation{})
		scheduled <- res
	}()
	waitFor(t, func() bool { return strings.Contains(th.stdout.String(), "request POST /SleepTimer") })
	before, _ := th.ScheduleStatus("SleepTimer")
	if code := post("{}"); code != http.StatusAccepted {
		t.Fatalf("admin run: %d", code)
	}
	// The admin run starts second: the handler sees it overlap the
	// listener's run.
	overlapped := false
	for !overlapped {
		select {
		case r := <-results:
			overlapped = r.Reason == manualReason && strings.Contains(strings.Join(r.Logs, " "), "overlap=true")
		case <-time.After(10 * time.Second):
			t.Fatal("no admin run overlapping the running invocation")
		}
	}
	res := <-scheduled
	if after, _ := th.ScheduleStatus("SleepTimer"); after.Last.After(res.Start) || !after.Last.After(before.Last) {
		t.Errorf("schedule status %+v: want Last at the listener's run (started %s), not at the admin run", after, res.Start)
	}
}

// TestRecycleAfterThreeWorkerErrors: after the third worker error within
// 30 minutes the host calls StopApplication (azure-functions-host
// src/WebJobs.Script/Workers/Http/HttpFunctionInvocationDispatcher.cs,
// "Exceeded http worker restart retry count"), which in Azure recycles the
// host: a new handler on a new port, a fresh error budget. Options.Recycle
// models it; funchost's default stops, as `func start` does (TestExitPolicy).
func TestRecycleAfterThreeWorkerErrors(t *testing.T) {
	t.Parallel()
	th := startHost(t, newApp(t, "", map[string]string{"CrashTimer": timerFn(yearly, true), "EchoTimer": timerFn(yearly, true)}), Options{Recycle: true})
	port := th.HandlerPort()
	for i := 1; i <= 3; i++ {
		if res := invokeTimer(t, th, "CrashTimer", TimerInvocation{}); res.Err == nil {
			t.Fatalf("crash %d: the invocation succeeded", i)
		}
	}
	f := factsOf(t, invokeTimer(t, th, "EchoTimer", TimerInvocation{}))
	select {
	case <-th.Done():
		t.Fatalf("the host stopped after three worker errors: %v", th.Err())
	default:
	}
	if th.HandlerPort() == port || f.Env["FUNCTIONS_CUSTOMHANDLER_PORT"] == strconv.Itoa(port) {
		t.Errorf("the recycled host's handler listens on the old port %d", port)
	}
	if !strings.Contains(th.log.String(), "Recycling the Functions Host") {
		t.Errorf("no recycling line in the host's log")
	}
}

// TestTimerFiresEarly: with Options.FireEarly a scheduled run starts before
// its occurrence, as the host's timer may; the payload's ScheduleStatus.Next
// is still the occurrence, and the run is recorded at the occurrence
// (TimerListener: "If the trigger fired before it was officially
// scheduled", ext Timers/Listener/TimerListener.cs).
func TestTimerFiresEarly(t *testing.T) {
	t.Parallel()
	results := make(chan *Result, 8)
	th := startHost(t, newApp(t, "", map[string]string{"EchoTimer": timerFn("*/1 * "+hoursExcept(time.Now())+" * * *", true)}),
		Options{FireEarly: 300 * time.Millisecond, OnResult: func(r *Result) { results <- r }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- th.RunSchedules(ctx) }()
	res := <-results
	cancel()
	<-done
	st := res.Timer.ScheduleStatus
	if st == nil || !res.Start.Before(st.Next) || st.Next.Sub(res.Start) > time.Second {
		t.Fatalf("run started %s for occurrence %+v; want it up to 300 ms early", res.Start, st)
	}
	if rec, _ := th.ScheduleStatus("EchoTimer"); !rec.Last.Equal(st.Next) {
		t.Errorf("recorded Last %s, want the occurrence %s", rec.Last, st.Next)
	}
}

// TestFunctionTimeoutGrace: at functionTimeout the invocation fails, and
// the handler gets TimeoutAttribute's 2 s grace (azure-webjobs-sdk
// src/Microsoft.Azure.WebJobs/TimeoutAttribute.cs; the host's
// WebScriptHostExceptionHandler.OnTimeoutExceptionAsync waits for it)
// before the worker is restarted anyway: a handler that answers within the
// grace still fails the invocation, and is killed after it answered.
func TestFunctionTimeoutGrace(t *testing.T) {
	t.Parallel()
	app := newApp(t, `{"version":"2.0","functionTimeout":"00:00:01","customHandler":{"description":{"defaultExecutablePath":"handler"}}}`,
		map[string]string{"SleepTimer": timerFn(yearly, true)})
	th := startHost(t, app, Options{Settings: map[string]string{"TEST_SLEEP_MS": "1800"}})
	pid := th.PID()
	res := invokeTimer(t, th, "SleepTimer", TimerInvocation{})
	if !errors.Is(res.Err, ErrFunctionTimeout) {
		t.Fatalf("err %v; want a function timeout", res.Err)
	}
	if res.Status != http.StatusOK || res.Duration < 1700*time.Millisecond {
		t.Errorf("the handler's answer within the grace: status %d after %s; want its 200 after ~1.8 s", res.Status, res.Duration)
	}
	waitFor(t, func() bool { return !alive(pid) })
}
