package functions

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// HostConfig is what the host (and this project) reads from host.json.
type HostConfig struct {
	// Version must be "2.0".
	Version string
	// FunctionTimeout is functionTimeout, DefaultFunctionTimeout when
	// absent, and 0 for "-1" (unbounded).
	FunctionTimeout time.Duration
	// CustomHandler is the customHandler section (or the legacy httpWorker
	// section when customHandler is absent).
	CustomHandler CustomHandler
	// RoutePrefix is extensions.http.routePrefix: DefaultRoutePrefix when
	// absent, and possibly "" (no prefix).
	RoutePrefix string
	// Raw holds every top-level member of host.json.
	Raw map[string]json.RawMessage
}

// CustomHandler is host.json's customHandler section.
type CustomHandler struct {
	// DefaultExecutablePath is the handler executable: relative to the app
	// root when that file exists, otherwise a command looked up on PATH.
	// %VAR% references are expanded from the environment.
	DefaultExecutablePath string
	// WorkingDirectory is the handler's working directory, relative to the
	// app root; "" means the app root.
	WorkingDirectory string
	// Arguments are passed to the executable after %VAR% expansion;
	// references that stay unresolved are removed.
	Arguments []string
	// DefaultWorkerPath, when set, is passed (quoted) after Arguments.
	DefaultWorkerPath string
	// WorkerArguments follow DefaultWorkerPath.
	WorkerArguments []string
	// EnableForwardingHTTPRequest is enableForwardingHttpRequest.
	EnableForwardingHTTPRequest bool
	// EnableProxyingHTTPRequest is enableProxyingHttpRequest (newest hosts).
	EnableProxyingHTTPRequest bool
	// InitializationTimeout is the undocumented initializationTimeout,
	// DefaultInitializationTimeout when absent.
	InitializationTimeout time.Duration
	// Legacy is true when the values came from the httpWorker section,
	// which always forwards HTTP requests.
	Legacy bool
}

// handlerDescription is the "description" of host.json's customHandler
// (or legacy httpWorker) section: how the host starts the handler.
type handlerDescription struct {
	DefaultExecutablePath string   `json:"defaultExecutablePath"`
	WorkingDirectory      string   `json:"workingDirectory"`
	Arguments             []string `json:"arguments"`
	DefaultWorkerPath     string   `json:"defaultWorkerPath"`
	WorkerArguments       []string `json:"workerArguments"`
}

// handler is the CustomHandler d describes, its HTTP flags unset.
func (d handlerDescription) handler() CustomHandler {
	return CustomHandler{
		DefaultExecutablePath: d.DefaultExecutablePath,
		WorkingDirectory:      d.WorkingDirectory,
		Arguments:             d.Arguments,
		DefaultWorkerPath:     d.DefaultWorkerPath,
		WorkerArguments:       d.WorkerArguments,
	}
}

// ParseHostJSON parses host.json. Member names match case-insensitively
// (.NET configuration is case-insensitive).
func ParseHostJSON(data []byte) (HostConfig, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return HostConfig{}, fmt.Errorf("host.json: %w", err)
	}
	var doc struct {
		Version         *string `json:"version"`
		FunctionTimeout *string `json:"functionTimeout"`
		CustomHandler   *struct {
			Description                 handlerDescription `json:"description"`
			EnableForwardingHTTPRequest bool               `json:"enableForwardingHttpRequest"`
			EnableProxyingHTTPRequest   bool               `json:"enableProxyingHttpRequest"`
			InitializationTimeout       *string            `json:"initializationTimeout"`
		} `json:"customHandler"`
		HTTPWorker *struct {
			Description           handlerDescription `json:"description"`
			InitializationTimeout *string            `json:"initializationTimeout"`
		} `json:"httpWorker"`
		Extensions struct {
			HTTP struct {
				RoutePrefix *string `json:"routePrefix"`
			} `json:"http"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return HostConfig{}, fmt.Errorf("host.json: %s", typeErrorProblem(err))
	}
	cfg := HostConfig{Raw: raw, FunctionTimeout: DefaultFunctionTimeout, RoutePrefix: DefaultRoutePrefix}
	if doc.Version == nil {
		return HostConfig{}, errors.New(`host.json: "version" is missing; want "2.0"`)
	}
	if cfg.Version = *doc.Version; cfg.Version != "2.0" {
		return HostConfig{}, fmt.Errorf(`host.json: "version" is %q; want "2.0"`, cfg.Version)
	}
	if doc.FunctionTimeout != nil {
		d, err := ParseTimeSpan(*doc.FunctionTimeout)
		switch {
		case err != nil:
			return HostConfig{}, fmt.Errorf("host.json: functionTimeout: %w", err)
		case d == -24*time.Hour:
			cfg.FunctionTimeout = 0
		case d < time.Second:
			return HostConfig{}, fmt.Errorf("host.json: functionTimeout %q: want at least 00:00:01, or -1 for unbounded", *doc.FunctionTimeout)
		default:
			cfg.FunctionTimeout = d
		}
	}
	initTimeout := (*string)(nil)
	switch {
	case doc.CustomHandler != nil:
		cfg.CustomHandler = doc.CustomHandler.Description.handler()
		cfg.CustomHandler.EnableForwardingHTTPRequest = doc.CustomHandler.EnableForwardingHTTPRequest
		cfg.CustomHandler.EnableProxyingHTTPRequest = doc.CustomHandler.EnableProxyingHTTPRequest
		initTimeout = doc.CustomHandler.InitializationTimeout
	case doc.HTTPWorker != nil:
		cfg.CustomHandler = doc.HTTPWorker.Description.handler()
		cfg.CustomHandler.EnableForwardingHTTPRequest = true
		cfg.CustomHandler.Legacy = true
		initTimeout = doc.HTTPWorker.InitializationTimeout
	default:
		return HostConfig{}, errors.New(`host.json: "customHandler" section is missing`)
	}
	if strings.TrimSpace(cfg.CustomHandler.DefaultExecutablePath) == "" {
		return HostConfig{}, errors.New("host.json: customHandler.description.defaultExecutablePath is empty")
	}
	cfg.CustomHandler.InitializationTimeout = DefaultInitializationTimeout
	if initTimeout != nil {
		d, err := ParseTimeSpan(*initTimeout)
		if err != nil || d <= 0 {
			return HostConfig{}, fmt.Errorf("host.json: customHandler.initializationTimeout %q: want a positive hh:mm:ss", *initTimeout)
		}
		cfg.CustomHandler.InitializationTimeout = d
	}
	if p := doc.Extensions.HTTP.RoutePrefix; p != nil {
		cfg.RoutePrefix = strings.Trim(*p, "/")
	}
	return cfg, nil
}

// LoadHostConfig reads and parses <root>/host.json; a handler can use it
// with FUNCTIONS_APP_ROOT_PATH to learn its functionTimeout.
func LoadHostConfig(root string) (HostConfig, error) {
	data, err := os.ReadFile(filepath.Join(root, "host.json"))
	if err != nil {
		return HostConfig{}, fmt.Errorf("host config: %w", err)
	}
	return ParseHostJSON(data)
}

var timeSpanRE = regexp.MustCompile(`^(-)?(?:(\d+)\.)?(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,7}))?)?$`)

// ParseTimeSpan parses a .NET TimeSpan string as used in host.json and
// function.json: "[-][d.]hh:mm[:ss[.fffffff]]" or a whole number of days
// ("-1" is minus one day, the host's "unbounded").
func ParseTimeSpan(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * 24 * time.Hour, nil
	}
	m := timeSpanRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a TimeSpan; want hh:mm:ss (e.g. 00:10:00)", s)
	}
	num := func(v string) int { n, _ := strconv.Atoi(v); return n }
	h, mi, sec := num(m[3]), num(m[4]), num(m[5])
	if h > 23 || mi > 59 || sec > 59 {
		return 0, fmt.Errorf("%q is not a TimeSpan: hours 0-23, minutes and seconds 0-59", s)
	}
	d := time.Duration(num(m[2]))*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec)*time.Second
	if frac := m[6]; frac != "" {
		frac += strings.Repeat("0", 7-len(frac))
		d += time.Duration(num(frac)) * 100 * time.Nanosecond
	}
	if m[1] == "-" {
		d = -d
	}
	return d, nil
}
