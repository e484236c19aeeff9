// Package funchost is a local Azure Functions host for custom handlers: it
// runs the real handler executable of a function app folder and talks to
// it exactly as the Functions host does in the default (non-forwarding)
// mode.
//
// It reproduces the host side of the protocol described in
// shared/reference/functions-custom-handler.md: the handler's environment
// (FUNCTIONS_CUSTOMHANDLER_PORT and friends), readiness by polling GET /
// every 25 ms, invocation requests (POST /<FunctionName>, the host's
// headers, a chunked JSON envelope), the host's response rules (2xx, a JSON
// content type, Logs dropped on failure), functionTimeout (SIGKILL and
// restart of the whole handler), the restart policy on exit, NCRONTAB timer
// schedules with the timer listener's semantics, and an HTTP front end
// serving /<routePrefix>/<route> with function keys.
//
// A Host is created with New, started with Start and stopped with Stop
// (SIGKILL, as the host does) or Interrupt (SIGINT first, for local runs).
package funchost

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/functions/ncrontab"
)

// DefaultHostVersion is the host version funchost announces in
// X-Azure-Functions-HostVersion and User-Agent.
const DefaultHostVersion = "4.1037.0.0"

// DefaultFrontEndTimeout is App Service's front-end limit for an HTTP
// request (Microsoft Learn, functions-scale#timeout: "230 seconds is the
// maximum amount of time that an HTTP triggered function can take to
// respond to a request"), after which the caller gets an error and the
// invocation continues.
const DefaultFrontEndTimeout = 230 * time.Second

// Restart policy of the host (HttpFunctionInvocationDispatcher): the third
// worker error within 30 minutes of the previous one shuts the host down.
const (
	errorEventsThreshold    = 3
	errorEventsWindow       = 30 * time.Minute
	readinessPollInterval   = 25 * time.Millisecond
	disposeWait             = time.Second
	timeoutGrace            = 2 * time.Second // TimeoutAttribute.GracePeriod
	maxResponseBytes        = 256 << 20
	defaultMaxRequestBytes  = 100 << 20
	stderrTailLines         = 10
	intentionalRestartCode  = 200
	timeZoneSetting         = "WEBSITE_TIME_ZONE"
	consoleLogCategory      = "Host.Function.Console"
	hostGeneralLogCategory  = "Host.General"
	dispatcherLogCategory   = "Host.Workers"
	functionLogCategoryTmpl = "Function.%s"
)

// Errors a Result or a Host method can carry; test them with errors.Is.
var (
	// ErrFunctionTimeout: the invocation exceeded functionTimeout; the
	// handler process was killed and restarted.
	ErrFunctionTimeout = errors.New("function timeout")
	// ErrStatus: the handler answered with a non-2xx status; the host fails
	// the invocation and ignores the body, Logs included.
	ErrStatus = errors.New("handler answered non-2xx")
	// ErrInvalidResponse: a 2xx response the host cannot use.
	ErrInvalidResponse = errors.New("invalid invocation response")
	// ErrStopped: the host was stopped or shut itself down.
	ErrStopped = errors.New("host stopped")
	// ErrNotStarted: Start has not been called.
	ErrNotStarted = errors.New("host not started")
)

// Options configure a Host. The zero value is usable.
type Options struct {
	// Settings are the app settings (local.settings.json "Values"): added
	// to the handler's environment and used to resolve %NAME% in
	// function.json and host.json.
	Settings map[string]string
	// SettingDefaults are used for %NAME% references that neither Settings
	// nor the environment resolve; a warning is logged because the real
	// host has no defaults (see functions.SettingDefaults).
	SettingDefaults map[string]string
	// Environ is the environment the handler inherits before Settings are
	// applied; nil means os.Environ(), like the host's child processes.
	Environ []string
	// Stdout and Stderr receive the handler's output, one whole line per
	// Write. When nil, lines are logged to Logger (stdout at Info, stderr at
	// Error, or Warn when the line contains "warn"), as the host does.
	Stdout, Stderr io.Writer
	// Logger receives the host's own log records; nil discards them.
	Logger *slog.Logger
	// HostVersion is sent in X-Azure-Functions-HostVersion and User-Agent;
	// "" means DefaultHostVersion.
	HostVersion string
	// Keys are the function app's keys; zero Keys means GenerateKeys.
	Keys Keys
	// InitializationTimeout overrides host.json's (default 30 s) limit for
	// the handler to answer GET /.
	InitializationTimeout time.Duration
	// MaxRequestBytes limits HTTP request bodies on the front end; 0 means
	// the host's 100 MB.
	MaxRequestBytes int64
	// FrontEndTimeout is how long the front end waits for an HTTP
	// function before answering the client 502 while the invocation runs
	// on; 0 means DefaultFrontEndTimeout (App Service's 230 s).
	FrontEndTimeout time.Duration

	// Recycle makes the host recycle instead of stopping for good when the
	// handler failed three times within 30 minutes, as it does in Azure:
	// HttpFunctionInvocationDispatcher calls StopApplication ("proactively
	// recycling the Functions Host") and the platform starts the host
	// again, a new ScriptHost with a new handler on a new port and a fresh
	// error budget. By default funchost stops, as `func start` does.
	Recycle bool
	// FireEarly makes scheduled timer runs fire this much before their
	// occurrence. The host's timer may: System.Timers.Timer fires a few
	// milliseconds early at times, and TimerListener expects it ("If the
	// trigger fired before it was officially scheduled", ext
	// Timers/Listener/TimerListener.cs), recording the occurrence, not the
	// clock, as Last. 0: on time.
	FireEarly time.Duration
	// Storage, when set, is the storage this host shares with other
	// instances of the app: timer functions then run only while this host
	// holds their lock, from the shared schedule status (see Storage).
	Storage *Storage
	// OnResult, when set, is called after every invocation (scheduled,
	// manual or HTTP) with its result.
	OnResult func(*Result)
}

// Host runs one handler process for one function app folder.
type Host struct {
	app         *functions.App
	opts        Options
	log         *slog.Logger
	keys        Keys
	hostVersion string
	port        int
	instance    string // this instance's id (the lock owner in Storage)
	loc         *time.Location
	env         []string
	settings    func(string) (string, bool)
	transport   *http.Transport
	client      *http.Client
	timers      map[string]*timerState // by function name
	routes      []*compiledRoute
	funcErrors  map[string]error // functions the host could not index

	outMu sync.Mutex // serializes lines written to Options.Stdout/Stderr

	mu        sync.Mutex
	state     hostState
	cur       *worker
	changed   chan struct{} // closed and replaced when cur or state changes
	errEvents []time.Time
	done      chan struct{}
	doneErr   error
}

type hostState int

const (
	stateNew hostState = iota
	stateRunning
	stateStopped
)

// New loads the function app at appDir (host.json plus function folders)
// and prepares a host for it; Start launches the handler. Functions whose
// trigger cannot be set up (e.g. a %SETTING% schedule that does not
// resolve) are reported by FunctionErrors and are not invocable, as in the
// host; the others work.
func New(appDir string, opts Options) (*Host, error) {
	app, err := functions.LoadApp(appDir)
	if err != nil {
		return nil, fmt.Errorf("funchost: %w", err)
	}
	if len(app.Functions) == 0 {
		return nil, fmt.Errorf("funchost: no functions found in %s (each needs <name>/function.json)", appDir)
	}
	h := &Host{
		app:         app,
		opts:        opts,
		log:         opts.Logger,
		keys:        opts.Keys,
		hostVersion: opts.HostVersion,
		timers:      map[string]*timerState{},
		funcErrors:  map[string]error{},
		changed:     make(chan struct{}),
		done:        make(chan struct{}),
		loc:         time.UTC,
		instance:    newGUID(),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.hostVersion == "" {
		h.hostVersion = DefaultHostVersion
	}
	if h.keys.empty() {
		if h.keys, err = GenerateKeys(); err != nil {
			return nil, fmt.Errorf("funchost: %w", err)
		}
	}
	ch := app.Host.CustomHandler
	if ch.EnableForwardingHTTPRequest || ch.EnableProxyingHTTPRequest {
		for _, fn := range app.Functions {
			if fn.Forwarded() {
				return nil, fmt.Errorf("funchost: function %s would be forwarded (enableForwardingHttpRequest/enableProxyingHttpRequest or httpWorker); funchost only implements the default JSON-envelope mode", fn.Name)
			}
		}
	}
	base := opts.Environ
	if base == nil {
		base = os.Environ()
	}
	baseEnv := map[string]string{}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			baseEnv[k] = v
		}
	}
	h.settings = func(name string) (string, bool) {
		if v, ok := opts.Settings[name]; ok {
			return v, true
		}
		v, ok := baseEnv[name]
		return v, ok
	}
	if tz, ok := h.settings(timeZoneSetting); ok && tz != "" {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return nil, fmt.Errorf("funchost: app setting %s=%q: want an IANA time zone name (e.g. Europe/Berlin): %w", timeZoneSetting, tz, err)
		}
		h.loc = loc
	}
	if h.port, err = freePort(); err != nil {
		return nil, fmt.Errorf("funchost: %w", err)
	}
	h.env = append([]string(nil), base...)
	for _, k := range sortedKeys(opts.Settings) {
		h.env = append(h.env, k+"="+opts.Settings[k])
	}
	h.transport = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DisableCompression:  true, // the host sends no Accept-Encoding
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	h.client = &http.Client{Transport: h.transport}
	for _, fn := range app.Functions {
		if !fn.IsTimer() {
			continue
		}
		ts, err := h.newTimerState(fn)
		if err != nil {
			h.funcErrors[fn.Name] = err
			h.log.Error("function is in error and will not run", "category", hostGeneralLogCategory, "function", fn.Name, "error", err)
			continue
		}
		h.timers[fn.Name] = ts
	}
	for _, fn := range app.Functions {
		if !fn.IsHTTP() {
			continue
		}
		rt, err := compileRoute(app.Host.RoutePrefix, fn)
		if err != nil {
			h.funcErrors[fn.Name] = err
			h.log.Error("function is in error and will not run", "category", hostGeneralLogCategory, "function", fn.Name, "error", err)
			continue
		}
		h.routes = append(h.routes, rt)
	}
	return h, nil
}

// lookupSetting resolves %NAME% references: settings, environment, then
// SettingDefaults (with a warning).
func (h *Host) lookupSetting(name string) (string, bool) {
	if v, ok := h.settings(name); ok {
		return v, true
	}
	if v, ok := h.opts.SettingDefaults[name]; ok {
		h.log.Warn("app setting is not set; using the local default (the real host has none and would not index the function)", "category", hostGeneralLogCategory, "setting", name, "default", v)
		return v, true
	}
	return "", false
}

func (h *Host) newTimerState(fn *functions.Function) (*timerState, error) {
	tr := fn.Trigger()
	expr, err := fn.ResolvedSchedule(h.lookupSetting)
	if err != nil {
		return nil, err
	}
	sched, err := ncrontab.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("timer %s: %w", fn.Name, err)
	}
	if sched.Next(time.Now().In(h.loc)).IsZero() {
		return nil, fmt.Errorf("timer %s: schedule %q never occurs", fn.Name, expr)
	}
	useMonitor := tr.UseMonitor
	if useMonitor && sched.DisablesMonitor(time.Now().In(h.loc)) {
		// TimerSchedule.ShouldDisableScheduleMonitor.
		h.log.Debug("UseMonitor changed to false based on schedule frequency.", "function", fn.Name)
		useMonitor = false
	}
	return &timerState{fn: fn, binding: tr.Name, schedule: sched, useMonitor: useMonitor, runOnStartup: tr.RunOnStartup}, nil
}

// App returns the function app the host serves.
func (h *Host) App() *functions.App { return h.app }

// Keys returns the function app's keys.
func (h *Host) Keys() Keys { return h.keys.clone() }

// HandlerPort returns FUNCTIONS_CUSTOMHANDLER_PORT: the loopback port the
// current handler listens on. A worker restart reuses it; RestartHost, a
// new ScriptHost, picks a new one.
func (h *Host) HandlerPort() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.port
}

// FunctionErrors returns the functions the host could not index, with why.
func (h *Host) FunctionErrors() map[string]error {
	out := make(map[string]error, len(h.funcErrors))
	for k, v := range h.funcErrors {
		out[k] = v
	}
	return out
}

// Schedule returns the resolved schedule of a timer function.
func (h *Host) Schedule(name string) (*ncrontab.Schedule, bool) {
	fn, ok := h.app.Function(name)
	if !ok {
		return nil, false
	}
	ts, ok := h.timers[fn.Name]
	if !ok {
		return nil, false
	}
	return ts.schedule, true
}

// Start launches the handler and waits until it answers GET /, through the
// host's restarts, until ctx ends or the host gives up.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	if h.state != stateNew {
		h.mu.Unlock()
		return errors.New("funchost: Start called twice")
	}
	h.state = stateRunning
	h.launchLocked()
	h.mu.Unlock()
	h.log.Info("Host started", "category", hostGeneralLogCategory, "functions", len(h.app.Functions), "handlerPort", h.port)
	_, err := h.readyWorker(ctx)
	return err
}

// launchLocked starts a new worker, counting failures to start as worker
// errors. h.mu must be held and the state running with no current worker.
func (h *Host) launchLocked() {
	for h.state == stateRunning {
		w, err := h.startWorker(h.port)
		if err == nil {
			h.setCurrentLocked(w)
			return
		}
		h.log.Error("Failed to start the handler process", "category", dispatcherLogCategory, "error", err)
		if h.errorEventLocked(err) {
			return
		}
	}
}

// errorEventLocked records a worker error; it reports true when the host
// gave up (the third error within 30 minutes of the previous one).
func (h *Host) errorEventLocked(cause error) bool {
	now := time.Now()
	if n := len(h.errEvents); n > 0 && now.Sub(h.errEvents[n-1]) > errorEventsWindow {
		h.errEvents = nil
	}
	h.errEvents = append(h.errEvents, now)
	if len(h.errEvents) < errorEventsThreshold {
		return false
	}
	if h.opts.Recycle {
		port, err := freePort()
		if err == nil {
			h.log.Error("Exceeded http worker restart retry count. Recycling the Functions Host", "category", dispatcherLogCategory, "error", cause)
			h.errEvents, h.port = nil, port
			return false
		}
		cause = fmt.Errorf("%w; recycling failed: %w", cause, err)
	}
	h.log.Error("Exceeded http worker restart retry count. Shutting down Functions Host", "category", dispatcherLogCategory, "error", cause)
	h.stopLocked(fmt.Errorf("%w: the handler failed %d times within %v; last error: %w", ErrStopped, len(h.errEvents), errorEventsWindow, cause))
	return true
}

func (h *Host) setCurrentLocked(w *worker) {
	h.cur = w
	close(h.changed)
	h.changed = make(chan struct{})
}

// stopLocked moves the host to stopped and kills the current worker.
func (h *Host) stopLocked(cause error) {
	if h.state == stateStopped {
		return
	}
	h.state = stateStopped
	h.doneErr = cause
	if w := h.cur; w != nil {
		w.disposed.Store(true)
		w.kill()
	}
	close(h.done)
	h.setCurrentLocked(nil)
}

// readyWorker waits for a worker that answered the readiness probe.
func (h *Host) readyWorker(ctx context.Context) (*worker, error) {
	for {
		h.mu.Lock()
		state, w, changed, doneErr := h.state, h.cur, h.changed, h.doneErr
		h.mu.Unlock()
		switch state {
		case stateNew:
			return nil, ErrNotStarted
		case stateStopped:
			if doneErr != nil {
				return nil, doneErr
			}
			return nil, ErrStopped
		}
		var ready <-chan struct{}
		if w != nil {
			ready = w.ready
		}
		select {
		case <-ready:
			return w, nil
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the handler to be ready: %w", ctx.Err())
		}
	}
}

// Done is closed when the host stops: Stop, Interrupt, or giving up after
// repeated handler failures (see Err).
func (h *Host) Done() <-chan struct{} { return h.done }

// Err returns why the host shut itself down, or nil.
func (h *Host) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.doneErr
}

// WorkerID returns the current worker's FUNCTIONS_CUSTOMHANDLER_WORKER_ID.
func (h *Host) WorkerID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return ""
	}
	return h.cur.id
}

// PID returns the current handler process id, or 0.
func (h *Host) PID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil || h.cur.cmd.Process == nil {
		return 0
	}
	return h.cur.cmd.Process.Pid
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// newGUID returns a random (version 4) GUID in the host's format.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func formatTimeout(d time.Duration) string {
	if d <= 0 {
		return "unbounded"
	}
	s := int(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60) + fracSuffix(d)
}

func fracSuffix(d time.Duration) string {
	if f := d % time.Second; f != 0 {
		return "." + strings.TrimRight(strconv.FormatInt(int64(f/100)+1e7, 10)[1:], "0")
	}
	return ""
}
