package functions

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions/ncrontab"
)

// TestProjectFunctionFolders validates the project's own function folders
// (functions/<Name>/function.json) and the repository's host.json, the
// layout `make build` copies into build/app.
func TestProjectFunctionFolders(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*Function{}
	for _, e := range entries {
		path := filepath.Join(e.Name(), "function.json")
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		fn, err := ParseFunctionJSON(e.Name(), data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		found[fn.Name] = fn
	}
	if len(found) != 8 {
		t.Errorf("found functions %v, want MirrorTimer, CatchUp, Status, Offsets, Pause, Resume, Cutover, Metrics", keysOf(found))
	}
	lookup := func(name string) (string, bool) { v, ok := SettingDefaults()[name]; return v, ok }

	if fn := found["MirrorTimer"]; fn == nil {
		t.Error("MirrorTimer missing")
	} else {
		tr := fn.Trigger()
		if !fn.IsTimer() || tr.Name != "timer" || tr.Direction != "in" || tr.Schedule != "%MIRROR_SCHEDULE%" || tr.RunOnStartup || !tr.UseMonitor || len(fn.Bindings) != 1 {
			t.Errorf("MirrorTimer bindings = %+v", fn.Bindings)
		}
		sched, err := fn.ResolvedSchedule(lookup)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ncrontab.Parse(sched); err != nil {
			t.Errorf("default schedule: %v", err)
		}
	}
	for name, want := range map[string]struct{ method, route string }{
		"CatchUp": {"post", "catchup"}, "Status": {"get", "status"},
		"Offsets": {"post", "offsets"}, "Pause": {"post", "pause"}, "Resume": {"post", "resume"},
		"Cutover": {"post", "cutover"},
		"Metrics": {"get", "metrics"},
	} {
		fn := found[name]
		if fn == nil {
			t.Errorf("%s missing", name)
			continue
		}
		tr := fn.Trigger()
		out, ok := fn.HTTPOutput()
		if !fn.IsHTTP() || tr.Name != "req" || tr.AuthLevel != "function" || !reflect.DeepEqual(tr.Methods, []string{want.method}) || tr.Route != want.route || !ok || out.Name != "res" || len(fn.Bindings) != 2 {
			t.Errorf("%s bindings = %+v", name, fn.Bindings)
		}
	}

	cfg, err := LoadHostConfig("..")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FunctionTimeout != 10*time.Minute || cfg.CustomHandler.DefaultExecutablePath != "handler" || cfg.CustomHandler.EnableForwardingHTTPRequest || cfg.RoutePrefix != "api" {
		t.Errorf("host.json = %+v", cfg)
	}
	if _, ok := cfg.Raw["extensionBundle"]; ok {
		t.Error("host.json has an extensionBundle; timer and HTTP need none and it breaks offline func start")
	}
	if _, ok := cfg.Raw["logging"]; !ok {
		t.Error("host.json has no logging section")
	}
}

func keysOf(m map[string]*Function) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestLoadApp(t *testing.T) {
	root := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("host.json", `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"handler"}},"extensions":{"http":{"routePrefix":""}}}`)
	write("Zeta/function.json", `{"bindings":[{"name":"req","type":"httpTrigger","direction":"in"},{"name":"$return","type":"http","direction":"out"}]}`)
	write("alpha/function.json", `{"bindings":[{"name":"t","type":"timerTrigger","direction":"in","schedule":"*/5 * * * *","useMonitor":"false"}],"disabled":true}`)
	write("notes/readme.txt", "not a function")
	write("deep/nested/function.json", `{"bindings":[]}`)
	app, err := LoadApp(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(app.Functions) != 2 || app.Functions[0].Name != "Zeta" || app.Functions[1].Name != "alpha" {
		t.Fatalf("functions = %v", app.Functions)
	}
	if app.Host.RoutePrefix != "" || app.Host.FunctionTimeout != DefaultFunctionTimeout || app.Host.CustomHandler.InitializationTimeout != 30*time.Second {
		t.Errorf("host = %+v", app.Host)
	}
	z, ok := app.Function("zeta")
	if !ok || z.Trigger().AuthLevel != "function" || z.Trigger().Route != "Zeta" || z.Trigger().Methods != nil || !z.Forwarded() || z.Dir != filepath.Join(root, "Zeta") {
		t.Errorf("Zeta = %+v", z)
	}
	a, _ := app.Function("alpha")
	if !a.Disabled || a.Trigger().UseMonitor || a.DisabledSetting() != "AzureWebJobs.alpha.Disabled" {
		t.Errorf("alpha = %+v", a)
	}
}

func TestParseHostJSON(t *testing.T) {
	ok := func(extra string) string {
		return `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"handler"}}` + extra + `}`
	}
	tests := []struct {
		json    string
		timeout time.Duration
		err     string
	}{
		{ok(``), 30 * time.Minute, ""},
		{ok(`,"functionTimeout":"00:00:01"`), time.Second, ""},
		{ok(`,"functionTimeout":"-1"`), 0, ""},
		{ok(`,"functionTimeout":"1.00:00:00"`), 24 * time.Hour, ""},
		{ok(`,"FunctionTimeout":"00:05:00"`), 5 * time.Minute, ""},
		{ok(`,"functionTimeout":"00:00:00.5"`), 0, "at least 00:00:01"},
		{ok(`,"functionTimeout":"ten minutes"`), 0, "not a TimeSpan"},
		{`{"customHandler":{"description":{"defaultExecutablePath":"h"}}}`, 0, `"version" is missing`},
		{`{"version":"1.0","customHandler":{"description":{"defaultExecutablePath":"h"}}}`, 0, `want "2.0"`},
		{`{"version":"2.0"}`, 0, "customHandler"},
		{`{"version":"2.0","customHandler":{"description":{}}}`, 0, "defaultExecutablePath is empty"},
		{`{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":5}}}`, 0, "want string"},
		{`not json`, 0, "host.json"},
	}
	for _, tt := range tests {
		cfg, err := ParseHostJSON([]byte(tt.json))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.json, err, tt.err)
			}
			continue
		}
		if err != nil || cfg.FunctionTimeout != tt.timeout {
			t.Errorf("%s: timeout %v, %v; want %v", tt.json, cfg.FunctionTimeout, err, tt.timeout)
		}
	}
	cfg, err := ParseHostJSON([]byte(`{"version":"2.0","httpWorker":{"description":{"defaultExecutablePath":"w","arguments":["a"]}}}`))
	if err != nil || !cfg.CustomHandler.Legacy || !cfg.CustomHandler.EnableForwardingHTTPRequest || cfg.CustomHandler.Arguments[0] != "a" {
		t.Errorf("httpWorker = %+v, %v", cfg.CustomHandler, err)
	}
}

func TestParseTimeSpan(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"00:10:00":         10 * time.Minute,
		"00:00:30":         30 * time.Second,
		"01:30":            90 * time.Minute,
		"2.03:04:05":       51*time.Hour + 4*time.Minute + 5*time.Second,
		"00:00:00.5":       500 * time.Millisecond,
		"00:00:01.0000001": time.Second + 100,
		"-1":               -24 * time.Hour,
		"-00:00:10":        -10 * time.Second,
		" 00:01:00 ":       time.Minute,
		"3":                72 * time.Hour,
	} {
		if got, err := ParseTimeSpan(in); err != nil || got != want {
			t.Errorf("ParseTimeSpan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "10m", "00:60:00", "24:00:00", "1:2:3:4"} {
		if _, err := ParseTimeSpan(in); err == nil {
			t.Errorf("ParseTimeSpan(%q) succeeded", in)
		}
	}
}

func TestParseFunctionJSONErrors(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"1bad", `{"bindings":[{"name":"t","type":"timerTrigger","direction":"in","schedule":"* * * * *"}]}`, "not a valid function name"},
		{"host", `{"bindings":[{"name":"t","type":"timerTrigger","direction":"in","schedule":"* * * * *"}]}`, "not a valid function name"},
		{"bad.name", `{"bindings":[]}`, "not a valid function name"},
		{strings.Repeat("a", 129), `{"bindings":[]}`, "not a valid function name"},
		{"f", `{"bindings":[]}`, "at least one binding"},
		{"f", `{}`, "at least one binding"},
		{"f", `{"bindings":[{"name":"res","type":"http","direction":"out"}]}`, "no trigger binding"},
		{"f", `{"bindings":[{"name":"a","type":"timerTrigger","direction":"in","schedule":"* * * * *"},{"name":"b","type":"httpTrigger","direction":"in"}]}`, "2 trigger bindings"},
		{"f", `{"bindings":[{"name":"req","type":"httpTrigger","direction":"in"},{"name":"REQ","type":"http","direction":"out"}]}`, "multiple bindings with name"},
		{"f", `{"bindings":[{"name":"my-timer","type":"timerTrigger","direction":"in","schedule":"* * * * *"}]}`, "binding name \"my-timer\" is invalid"},
		{"f", `{"bindings":[{"name":"t","type":"timerTrigger","direction":"in"}]}`, "schedule is missing"},
		{"f", `{"bindings":[{"name":"t","type":"timerTrigger","direction":"sideways","schedule":"x"}]}`, "want in, out or inout"},
		{"f", `{"bindings":[{"name":"t","type":"timerTrigger","direction":"out","schedule":"x"}]}`, "direction must be in"},
		{"f", `{"bindings":[{"name":"t","direction":"in"}]}`, "type is missing"},
		{"f", `{"bindings":[{"name":"r","type":"httpTrigger","direction":"in","authLevel":"user"}]}`, "authLevel \"user\""},
		{"f", `{"bindings":[{"name":"r","type":"httpTrigger","direction":"in","methods":"get"}]}`, "methods: want array"},
		{"f", `{"bindings":[{"name":"t","type":"timerTrigger","direction":"in","schedule":"x","useMonitor":"maybe"}]}`, "useMonitor: want true or false"},
		{"f", `{"bindings":[{"name":"t","type":"timerTrigger","direction":"in","schedule":"x"}],"retry":{"strategy":"sometimes"}}`, "retry.strategy"},
		{"f", `{"bindings":[{"name":5}]}`, "want string"},
	}
	for _, tt := range tests {
		_, err := ParseFunctionJSON(tt.name, []byte(tt.json))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: error %v, want %q", tt.name, tt.json, err, tt.want)
		}
	}
	fn, err := ParseFunctionJSON("R", []byte(`{"bindings":[{"name":"t","type":"TimerTrigger","direction":"IN","schedule":"x","runOnStartup":true}],"retry":{"strategy":"fixedDelay","maxRetryCount":2,"delayInterval":"00:00:10"}}`))
	if err != nil || !fn.IsTimer() || !fn.Trigger().RunOnStartup || fn.Retry == nil || fn.Retry.MaxRetryCount != 2 || fn.Retry.DelayInterval != 10*time.Second {
		t.Errorf("fn = %+v, %v", fn, err)
	}
}

func TestExpandSettings(t *testing.T) {
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"A": "1", "EMPTY": ""}[k]
		return v, ok
	}
	for in, want := range map[string]string{"%A%": "1", "x%A%y%A%": "x1y1", "%EMPTY%": "", "plain": "plain", "100%": "100%"} {
		if got, err := ExpandSettings(in, lookup); err != nil || got != want {
			t.Errorf("ExpandSettings(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ExpandSettings("%MIRROR_SCHEDULE%", lookup); err == nil || err.Error() != "%MIRROR_SCHEDULE% does not resolve to a value: app setting MIRROR_SCHEDULE is not set" {
		t.Errorf("unresolved: %v", err)
	}
}
