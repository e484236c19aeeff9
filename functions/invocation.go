package functions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Headers the host sets on every invocation request it sends to the handler.
const (
	HeaderInvocationID = "X-Azure-Functions-InvocationId"
	HeaderHostVersion  = "X-Azure-Functions-HostVersion"
	// InvocationContentType is the Content-Type of invocation requests.
	InvocationContentType = "application/json; charset=utf-8"
	// UserAgentPrefix precedes the host version in the User-Agent header.
	UserAgentPrefix = "Azure-Functions-Host/"
)

// Environment variables the host sets for the handler process.
const (
	EnvPort           = "FUNCTIONS_CUSTOMHANDLER_PORT"
	EnvLegacyPort     = "FUNCTIONS_HTTPWORKER_PORT"
	EnvWorkerID       = "FUNCTIONS_CUSTOMHANDLER_WORKER_ID"
	EnvLegacyWorkerID = "FUNCTIONS_HTTPWORKER_ID"
	EnvAppRoot        = "FUNCTIONS_APP_ROOT_PATH"
)

// DefaultMaxInvocationBytes is the body limit DecodeInvocation applies when
// given maxBytes <= 0: room for the host's largest HTTP request (100 MB)
// after base64 encoding, plus the envelope.
const DefaultMaxInvocationBytes = 140 << 20

// Invocation is the body of an invocation request in the default
// (non-forwarding) mode: {"Data":{…},"Metadata":{…}}.
//
// Data has one member per input binding, named by the binding's name in
// function.json; Metadata holds the trigger's binding data (for HTTP:
// Query, Headers with single-string values, route params), always "sys",
// and "RetryContext" when a retry policy is active. Members are kept raw;
// the typed accessors (Timer, HTTP, Sys, RetryContext) decode them and
// report malformed input as a *DecodeError.
type Invocation struct {
	Data     map[string]json.RawMessage `json:"Data"`
	Metadata map[string]json.RawMessage `json:"Metadata"`
}

// DecodeInvocation reads an invocation request body of at most maxBytes
// (DefaultMaxInvocationBytes when maxBytes <= 0). It checks the envelope:
// a JSON object with a "Data" object and, when present, a "Metadata"
// object. It never panics; every error is one line, and malformed input is
// reported as a *DecodeError, e.g.
//
//	invocation body: Data: want object, got string
func DecodeInvocation(r io.Reader, maxBytes int64) (*Invocation, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxInvocationBytes
	}
	body, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("invocation body: read: %w", err)
	}
	if int64(len(body)) > maxBytes {
		return nil, decodeErr("", "larger than %d bytes", maxBytes)
	}
	return ParseInvocation(body)
}

// ParseInvocation is DecodeInvocation for a body already in memory.
func ParseInvocation(body []byte) (*Invocation, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, decodeErr("", `empty; want {"Data":{…},"Metadata":{…}}`)
	}
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, decodeErr("", "not valid JSON: %v (at byte %d)", se, se.Offset)
		}
		return nil, decodeErr("", "not valid JSON: %v", err)
	}
	top, err := object("", body, `JSON object {"Data":{…},"Metadata":{…}}`)
	if err != nil {
		return nil, err
	}
	data, ok := member(top, "Data")
	if !ok {
		return nil, decodeErr("Data", "missing")
	}
	inv := &Invocation{}
	if inv.Data, err = object("Data", data, "object"); err != nil {
		return nil, err
	}
	if md, ok := member(top, "Metadata"); ok && !isNull(md) {
		if inv.Metadata, err = object("Metadata", md, "object"); err != nil {
			return nil, err
		}
	}
	if inv.Metadata == nil {
		inv.Metadata = map[string]json.RawMessage{}
	}
	return inv, nil
}

// input returns Data.<binding>.
func (inv *Invocation) input(binding string) (json.RawMessage, error) {
	path := "Data." + binding
	if inv == nil || inv.Data == nil {
		return nil, decodeErr(path, "missing (no Data)")
	}
	v, ok := member(inv.Data, binding)
	if !ok {
		return nil, decodeErr(path, "missing (Data has: %s)", keyList(inv.Data))
	}
	return v, nil
}

// Timer decodes Data.<binding> as timer trigger data. Timestamps are parsed
// leniently (see ParseTime); a null or absent ScheduleStatus gives nil.
func (inv *Invocation) Timer(binding string) (Timer, error) {
	raw, err := inv.input(binding)
	if err != nil {
		return Timer{}, err
	}
	return decodeTimer("Data."+binding, raw)
}

// HTTP decodes Data.<binding> as HTTP trigger data. Query must be an object
// of strings, Headers an object of string arrays, Params an object of
// scalars, Identities an array of objects and Body a string; absent or null
// members give empty values.
func (inv *Invocation) HTTP(binding string) (HTTPRequest, error) {
	raw, err := inv.input(binding)
	if err != nil {
		return HTTPRequest{}, err
	}
	return decodeHTTPRequest("Data."+binding, raw)
}

// Input decodes Data.<binding> into v with encoding/json, for bindings this
// package has no type for.
func (inv *Invocation) Input(binding string, v any) error {
	raw, err := inv.input(binding)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return decodeErr("Data."+binding, "%s", typeErrorProblem(err))
	}
	return nil
}

// Sys decodes Metadata.sys. An absent sys gives the zero Sys and no error.
func (inv *Invocation) Sys() (Sys, error) {
	if inv == nil {
		return Sys{}, nil
	}
	raw, ok := member(inv.Metadata, "sys")
	if !ok || isNull(raw) {
		return Sys{}, nil
	}
	return decodeSys("Metadata.sys", raw)
}

// RetryContext decodes Metadata.RetryContext; it returns nil, nil when the
// host sent none (no retry policy).
func (inv *Invocation) RetryContext() (*RetryContext, error) {
	if inv == nil {
		return nil, nil
	}
	raw, ok := member(inv.Metadata, "RetryContext")
	if !ok || isNull(raw) {
		return nil, nil
	}
	m, err := object("Metadata.RetryContext", raw, "object {RetryCount, MaxRetryCount, Exception}")
	if err != nil {
		return nil, err
	}
	rc := &RetryContext{}
	v, _ := member(m, "RetryCount")
	if rc.RetryCount, err = intField("Metadata.RetryContext.RetryCount", v); err != nil {
		return nil, err
	}
	v, _ = member(m, "MaxRetryCount")
	if rc.MaxRetryCount, err = intField("Metadata.RetryContext.MaxRetryCount", v); err != nil {
		return nil, err
	}
	if v, ok := member(m, "Exception"); ok && !isNull(v) {
		rc.Exception = v
	}
	return rc, nil
}

// Sys is Metadata.sys: the WebJobs system binding data.
type Sys struct {
	// MethodName is the function name.
	MethodName string
	// UtcNow is the time the host built the invocation.
	UtcNow time.Time
	// RandGuid is a random GUID per invocation.
	RandGuid string
}

// MarshalJSON writes sys in the host's shape, UtcNow as 2024-05-14T15:14:15.128919Z.
func (s Sys) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		MethodName string `json:"MethodName"`
		UtcNow     string `json:"UtcNow"`
		RandGuid   string `json:"RandGuid"`
	}{s.MethodName, FormatUTCTime(s.UtcNow), s.RandGuid})
}

// UnmarshalJSON reads sys leniently (see ParseTime).
func (s *Sys) UnmarshalJSON(data []byte) error {
	v, err := decodeSys("sys", data)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

func decodeSys(path string, raw json.RawMessage) (Sys, error) {
	m, err := object(path, raw, "object {MethodName, UtcNow, RandGuid}")
	if err != nil {
		return Sys{}, err
	}
	var s Sys
	v, _ := member(m, "MethodName")
	if s.MethodName, err = stringField(path+".MethodName", v); err != nil {
		return Sys{}, err
	}
	v, _ = member(m, "UtcNow")
	if s.UtcNow, err = timeField(path+".UtcNow", v); err != nil {
		return Sys{}, err
	}
	v, _ = member(m, "RandGuid")
	if s.RandGuid, err = stringField(path+".RandGuid", v); err != nil {
		return Sys{}, err
	}
	return s, nil
}

// RetryContext is Metadata.RetryContext, present when a retry policy
// (function.json or host.json "retry") applies to the invocation.
type RetryContext struct {
	RetryCount    int             `json:"RetryCount"`
	MaxRetryCount int             `json:"MaxRetryCount"`
	Exception     json.RawMessage `json:"Exception"` // the previous attempt's .NET exception, raw; null on the first attempt
}

// NewTimerInvocation builds the request body the host sends for a timer
// trigger: Data.<binding> = timer, Metadata = {sys[, RetryContext]}.
func NewTimerInvocation(binding string, timer Timer, sys Sys, retry *RetryContext) (*Invocation, error) {
	data, err := json.Marshal(timer)
	if err != nil {
		return nil, fmt.Errorf("timer invocation: %w", err)
	}
	inv := &Invocation{
		Data:     map[string]json.RawMessage{binding: data},
		Metadata: map[string]json.RawMessage{},
	}
	if err := inv.setMetadata("sys", sys); err != nil {
		return nil, err
	}
	if retry != nil {
		if err := inv.setMetadata("RetryContext", retry); err != nil {
			return nil, err
		}
	}
	return inv, nil
}

// NewHTTPInvocation builds the request body the host sends for an HTTP
// trigger: Data.<binding> = req, and Metadata with the binding data
// (Query, Headers as single strings joined with ",", Params, each route
// parameter by name) and sys.
func NewHTTPInvocation(binding string, req HTTPRequest, sys Sys) (*Invocation, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("http invocation: %w", err)
	}
	inv := &Invocation{
		Data:     map[string]json.RawMessage{binding: data},
		Metadata: map[string]json.RawMessage{},
	}
	for name, value := range req.Params {
		if err := inv.setMetadata(name, value); err != nil {
			return nil, err
		}
	}
	headers := make(map[string]string, len(req.Headers))
	for k, v := range req.Headers {
		headers[k] = strings.Join(v, ",")
	}
	for name, v := range map[string]any{"Query": nonNilStrings(req.Query), "Headers": headers, "Params": nonNilStrings(req.Params), "sys": sys} {
		if err := inv.setMetadata(name, v); err != nil {
			return nil, err
		}
	}
	return inv, nil
}

func (inv *Invocation) setMetadata(name string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("invocation metadata %s: %w", name, err)
	}
	inv.Metadata[name] = raw
	return nil
}

// MarshalJSON writes {"Data":{…},"Metadata":{…}}, with empty objects for
// nil maps.
func (inv Invocation) MarshalJSON() ([]byte, error) {
	data, md := inv.Data, inv.Metadata
	if data == nil {
		data = map[string]json.RawMessage{}
	}
	if md == nil {
		md = map[string]json.RawMessage{}
	}
	return json.Marshal(struct {
		Data     map[string]json.RawMessage `json:"Data"`
		Metadata map[string]json.RawMessage `json:"Metadata"`
	}{data, md})
}

// HandlerPort returns the port the handler must listen on, read with
// lookup (e.g. os.LookupEnv) from FUNCTIONS_CUSTOMHANDLER_PORT or, when
// unset, the legacy FUNCTIONS_HTTPWORKER_PORT. The host connects to
// 127.0.0.1:<port>.
func HandlerPort(lookup func(string) (string, bool)) (int, error) {
	name := EnvPort
	v, ok := lookup(name)
	if !ok || v == "" {
		name = EnvLegacyPort
		if v, ok = lookup(name); !ok || v == "" {
			return 0, fmt.Errorf("handler port: neither %s nor %s is set (the Functions host sets them)", EnvPort, EnvLegacyPort)
		}
	}
	port, err := strconv.Atoi(v)
	if err != nil || port <= 0 || port > 65535 {
		return 0, fmt.Errorf("handler port: %s=%q: want a TCP port number 1-65535", name, v)
	}
	return port, nil
}
