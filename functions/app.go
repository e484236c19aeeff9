package functions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Host defaults (host code, not docs, where they differ).
const (
	// DefaultFunctionTimeout applies when host.json has no functionTimeout
	// on every plan but Consumption.
	DefaultFunctionTimeout = 30 * time.Minute
	// DefaultInitializationTimeout is how long the host waits for the
	// handler to answer GET / before it restarts it.
	DefaultInitializationTimeout = 30 * time.Second
	// DefaultRoutePrefix is extensions.http.routePrefix when unset.
	DefaultRoutePrefix = "api"
	// ReturnBindingName is the binding name fed by Response.ReturnValue.
	ReturnBindingName = "$return"
)

// App is a function app folder as the host reads it: host.json at Root and
// one function per immediate subfolder that holds a function.json.
type App struct {
	Root      string
	Host      HostConfig
	Functions []*Function // sorted by name
}

// LoadApp reads host.json and every <root>/<name>/function.json. Folders
// without a function.json are skipped, as the host does; deeper folders are
// never searched.
func LoadApp(root string) (*App, error) {
	hostPath := filepath.Join(root, "host.json")
	data, err := os.ReadFile(hostPath)
	if err != nil {
		return nil, fmt.Errorf("load app: %w", err)
	}
	cfg, err := ParseHostJSON(data)
	if err != nil {
		return nil, fmt.Errorf("load app: %s: %w", hostPath, err)
	}
	app := &App{Root: root, Host: cfg}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("load app: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(root, e.Name(), "function.json")
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("load app: %w", err)
		}
		fn, err := ParseFunctionJSON(e.Name(), data)
		if err != nil {
			return nil, fmt.Errorf("load app: %s: %w", path, err)
		}
		fn.Dir = filepath.Join(root, e.Name())
		app.Functions = append(app.Functions, fn)
	}
	sort.Slice(app.Functions, func(i, j int) bool { return app.Functions[i].Name < app.Functions[j].Name })
	return app, nil
}

// Function returns the function with this name; names match
// case-insensitively, as in the host.
func (a *App) Function(name string) (*Function, bool) {
	for _, fn := range a.Functions {
		if strings.EqualFold(fn.Name, name) {
			return fn, true
		}
	}
	return nil, false
}

// Function is one function.json.
type Function struct {
	// Name is the folder name (case preserved): the path the host POSTs to.
	Name string
	// Dir is the function's folder ("" when parsed from bytes).
	Dir string
	// Bindings in function.json order.
	Bindings []Binding
	// Disabled is function.json's "disabled". The app setting
	// AzureWebJobs.<Name>.Disabled also disables a function; see
	// DisabledSetting.
	Disabled bool
	// Retry is the function-level retry policy, nil when none.
	Retry *RetryPolicy
}

// RetryPolicy is a function.json or host.json "retry" section.
type RetryPolicy struct {
	Strategy        string // "fixedDelay" or "exponentialBackoff"
	MaxRetryCount   int
	DelayInterval   time.Duration
	MinimumInterval time.Duration
	MaximumInterval time.Duration
}

// Binding is one entry of function.json "bindings". Properties that do not
// apply to the binding's type are zero.
type Binding struct {
	Name      string
	Type      string // as written, e.g. "timerTrigger"
	Direction string // "in", "out" or "inout", lower-cased
	DataType  string

	// Timer trigger.
	Schedule     string // raw, possibly "%SETTING%"
	RunOnStartup bool
	UseMonitor   bool // default true

	// HTTP trigger.
	AuthLevel string   // "anonymous", "function" (default) or "admin"
	Methods   []string // lower-cased; nil accepts every method
	Route     string   // without leading/trailing "/"; defaults to the function name

	// Properties holds every member of the binding, raw.
	Properties map[string]json.RawMessage
}

// Binding types this project's host handles.
const (
	TimerTriggerType = "timerTrigger"
	HTTPTriggerType  = "httpTrigger"
	HTTPOutputType   = "http"
)

// IsTrigger reports whether the binding is the function's trigger.
func (b Binding) IsTrigger() bool {
	return strings.HasSuffix(strings.ToLower(b.Type), "trigger")
}

// IsOutput reports whether the binding's direction is out or inout.
func (b Binding) IsOutput() bool {
	return b.Direction == "out" || b.Direction == "inout"
}

// Is reports whether the binding has type typ (case-insensitive).
func (b Binding) Is(typ string) bool { return strings.EqualFold(b.Type, typ) }

// Trigger returns the function's trigger binding.
func (f *Function) Trigger() Binding {
	for _, b := range f.Bindings {
		if b.IsTrigger() {
			return b
		}
	}
	return Binding{}
}

// IsTimer reports whether the function has a timer trigger.
func (f *Function) IsTimer() bool { return f.Trigger().Is(TimerTriggerType) }

// IsHTTP reports whether the function has an HTTP trigger.
func (f *Function) IsHTTP() bool { return f.Trigger().Is(HTTPTriggerType) }

// HTTPOutput returns the function's http output binding.
func (f *Function) HTTPOutput() (Binding, bool) {
	for _, b := range f.Bindings {
		if b.IsOutput() && b.Is(HTTPOutputType) {
			return b, true
		}
	}
	return Binding{}, false
}

// Forwarded reports whether, with HTTP forwarding or proxying enabled, the
// host would forward this function's requests instead of sending the JSON
// envelope: exactly one input binding (httpTrigger) and exactly one output
// binding (http).
func (f *Function) Forwarded() bool {
	var in, out []Binding
	for _, b := range f.Bindings {
		if b.IsOutput() {
			out = append(out, b)
		} else {
			in = append(in, b)
		}
	}
	return len(in) == 1 && in[0].Is(HTTPTriggerType) && len(out) == 1 && out[0].Is(HTTPOutputType)
}

// ResolvedSchedule returns the timer trigger's schedule with %SETTING%
// references resolved by lookup (see ExpandSettings).
func (f *Function) ResolvedSchedule(lookup func(string) (string, bool)) (string, error) {
	tr := f.Trigger()
	if !tr.Is(TimerTriggerType) {
		return "", fmt.Errorf("function %s has no timer trigger", f.Name)
	}
	s, err := ExpandSettings(tr.Schedule, lookup)
	if err != nil {
		return "", fmt.Errorf("function %s: schedule %q: %w", f.Name, tr.Schedule, err)
	}
	return s, nil
}

// DisabledSetting is the app setting that disables the function when "true".
func (f *Function) DisabledSetting() string { return "AzureWebJobs." + f.Name + ".Disabled" }

var (
	functionNameRE = regexp.MustCompile(`(?i)^[a-z][a-z0-9_\-]{0,127}$`)
	bindingNameRE  = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9]{0,127}|\$return)$`)
)

// ValidFunctionName checks a function (folder) name with the host's rule:
// ^[a-z][a-z0-9_\-]{0,127}$ case-insensitively, and not "host".
func ValidFunctionName(name string) error {
	if !functionNameRE.MatchString(name) || strings.EqualFold(name, "host") {
		return fmt.Errorf("%q is not a valid function name (want ^[a-z][a-z0-9_-]{0,127}$, case-insensitive, not \"host\")", name)
	}
	return nil
}

// ParseFunctionJSON parses the function.json of the function named name
// (its folder name) and checks it the way the host does: a valid name, at
// least one binding, exactly one trigger, valid and unique binding names,
// a direction on every binding, a schedule on timer triggers, a known
// authLevel on HTTP triggers.
func ParseFunctionJSON(name string, data []byte) (*Function, error) {
	if err := ValidFunctionName(name); err != nil {
		return nil, fmt.Errorf("function.json: %w", err)
	}
	var doc struct {
		Bindings []map[string]json.RawMessage `json:"bindings"`
		Disabled json.RawMessage              `json:"disabled"`
		Retry    *struct {
			Strategy        string `json:"strategy"`
			MaxRetryCount   int    `json:"maxRetryCount"`
			DelayInterval   string `json:"delayInterval"`
			MinimumInterval string `json:"minimumInterval"`
			MaximumInterval string `json:"maximumInterval"`
		} `json:"retry"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("function.json of %s: %s", name, typeErrorProblem(err))
	}
	fn := &Function{Name: name}
	if len(doc.Disabled) > 0 {
		text, _ := scalarText(doc.Disabled)
		fn.Disabled = strings.EqualFold(text, "true")
	}
	if len(doc.Bindings) == 0 {
		return nil, fmt.Errorf("function.json of %s: at least one binding must be declared", name)
	}
	seen := map[string]bool{}
	triggers := 0
	for i, props := range doc.Bindings {
		b, err := parseBinding(fn.Name, props)
		if err != nil {
			return nil, fmt.Errorf("function.json of %s: bindings[%d]: %w", name, i, err)
		}
		if seen[strings.ToLower(b.Name)] {
			return nil, fmt.Errorf("function.json of %s: multiple bindings with name %q; binding names must be unique", name, b.Name)
		}
		seen[strings.ToLower(b.Name)] = true
		if b.IsTrigger() {
			triggers++
		}
		fn.Bindings = append(fn.Bindings, b)
	}
	switch {
	case triggers == 0:
		return nil, fmt.Errorf("function.json of %s: no trigger binding; a function must have exactly one", name)
	case triggers > 1:
		return nil, fmt.Errorf("function.json of %s: %d trigger bindings; a function can only have one", name, triggers)
	}
	if r := doc.Retry; r != nil {
		p := &RetryPolicy{Strategy: r.Strategy, MaxRetryCount: r.MaxRetryCount}
		for _, f := range []struct {
			name, value string
			dst         *time.Duration
		}{{"delayInterval", r.DelayInterval, &p.DelayInterval}, {"minimumInterval", r.MinimumInterval, &p.MinimumInterval}, {"maximumInterval", r.MaximumInterval, &p.MaximumInterval}} {
			if f.value == "" {
				continue
			}
			d, err := ParseTimeSpan(f.value)
			if err != nil {
				return nil, fmt.Errorf("function.json of %s: retry.%s: %w", name, f.name, err)
			}
			*f.dst = d
		}
		if p.Strategy != "fixedDelay" && p.Strategy != "exponentialBackoff" {
			return nil, fmt.Errorf("function.json of %s: retry.strategy %q: want fixedDelay or exponentialBackoff", name, p.Strategy)
		}
		fn.Retry = p
	}
	return fn, nil
}

func parseBinding(fnName string, props map[string]json.RawMessage) (Binding, error) {
	str := func(key string) (string, error) {
		v, _ := member(props, key)
		s, err := stringField(key, v)
		if err != nil {
			return "", errors.New(strings.TrimPrefix(err.Error(), "invocation body: "))
		}
		return s, nil
	}
	flag := func(key string, def bool) (bool, error) {
		v, ok := member(props, key)
		if !ok || isNull(v) {
			return def, nil
		}
		// The host reads these with GetMetadataValue<bool>, which also
		// accepts "true"/"false" strings.
		text, ok := scalarText(v)
		if b, err := strconv.ParseBool(text); ok && err == nil {
			return b, nil
		}
		return false, fmt.Errorf("%s: want true or false, got %s", key, v)
	}
	b := Binding{Properties: props}
	var err error
	if b.Name, err = str("name"); err != nil {
		return Binding{}, err
	}
	if !bindingNameRE.MatchString(b.Name) {
		return Binding{}, fmt.Errorf("binding name %q is invalid (want ^[a-zA-Z][a-zA-Z0-9]{0,127}$ or $return)", b.Name)
	}
	if b.Type, err = str("type"); err != nil {
		return Binding{}, err
	}
	if b.Type == "" {
		return Binding{}, fmt.Errorf("binding %q: type is missing", b.Name)
	}
	dir, err := str("direction")
	if err != nil {
		return Binding{}, err
	}
	b.Direction = strings.ToLower(dir)
	switch b.Direction {
	case "in", "out", "inout":
	default:
		return Binding{}, fmt.Errorf("binding %q: direction %q: want in, out or inout", b.Name, dir)
	}
	if b.IsTrigger() && b.Direction != "in" {
		return Binding{}, fmt.Errorf("binding %q: a trigger's direction must be in", b.Name)
	}
	if b.DataType, err = str("dataType"); err != nil {
		return Binding{}, err
	}
	switch {
	case b.Is(TimerTriggerType):
		if b.Schedule, err = str("schedule"); err != nil {
			return Binding{}, err
		}
		if strings.TrimSpace(b.Schedule) == "" {
			return Binding{}, fmt.Errorf("timer binding %q: schedule is missing", b.Name)
		}
		if b.RunOnStartup, err = flag("runOnStartup", false); err != nil {
			return Binding{}, err
		}
		if b.UseMonitor, err = flag("useMonitor", true); err != nil {
			return Binding{}, err
		}
	case b.Is(HTTPTriggerType):
		level, err := str("authLevel")
		if err != nil {
			return Binding{}, err
		}
		b.AuthLevel = strings.ToLower(level)
		switch b.AuthLevel {
		case "":
			b.AuthLevel = "function"
		case "anonymous", "function", "admin":
		default:
			return Binding{}, fmt.Errorf("http binding %q: authLevel %q: want anonymous, function or admin", b.Name, level)
		}
		if v, ok := member(props, "methods"); ok && !isNull(v) {
			var methods []string
			if err := json.Unmarshal(v, &methods); err != nil {
				return Binding{}, fmt.Errorf("http binding %q: methods: want array of strings", b.Name)
			}
			for _, m := range methods {
				b.Methods = append(b.Methods, strings.ToLower(strings.TrimSpace(m)))
			}
		}
		if b.Route, err = str("route"); err != nil {
			return Binding{}, err
		}
		b.Route = strings.Trim(b.Route, "/")
		if b.Route == "" {
			b.Route = fnName
		}
	}
	return b, nil
}

var settingRefRE = regexp.MustCompile(`%([^%\s]+)%`)

// ExpandSettings resolves every %NAME% in s with lookup (app settings, then
// the environment), the way the host resolves binding expressions such as
// "schedule": "%MIRROR_SCHEDULE%". A reference that does not resolve is an
// error naming the setting.
func ExpandSettings(s string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	out := settingRefRE.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[1 : len(ref)-1]
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%%%s%% does not resolve to a value: app setting %s is not set", missing[0], missing[0])
	}
	return out, nil
}
