package funchost

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

// Result is the outcome of one invocation, as the host records it.
type Result struct {
	Function     string
	InvocationID string
	// Reason is why the function ran, as in the host's "Executing" log.
	Reason string
	// Request is the invocation body sent to the handler.
	Request []byte
	// Timer is the timer trigger data sent (timer invocations only).
	Timer *functions.Timer
	// WorkerID is FUNCTIONS_CUSTOMHANDLER_WORKER_ID of the process that got
	// the request.
	WorkerID string

	// Status, Header and Body are the handler's raw response (Status 0 when
	// none arrived).
	Status int
	Header http.Header
	Body   []byte

	// Logs are the lines the host logs for the invocation: the response's
	// Logs, only for a 2xx response.
	Logs []string
	// DroppedLogs are Logs of a non-2xx response, which the real host
	// discards; kept here so tests can see what was lost.
	DroppedLogs []string
	// Outputs and ReturnValue come from a 2xx response.
	Outputs     map[string]json.RawMessage
	ReturnValue json.RawMessage
	// HTTP is the function's http output as the host reads it (HTTP
	// functions, successful invocations).
	HTTP *functions.HTTPOutput

	Start    time.Time
	Duration time.Duration
	// Err is why the host fails the invocation; nil when it succeeded.
	// Test it with errors.Is against ErrFunctionTimeout, ErrStatus,
	// ErrInvalidResponse, ErrStopped or context errors.
	Err error
}

// Succeeded reports whether the host records the invocation as succeeded.
func (r *Result) Succeeded() bool { return r.Err == nil }

// failure is an invocation failure of a kind (ErrStatus, …).
type failure struct {
	kind error
	err  error
}

// Error implements error.
func (f *failure) Error() string { return f.err.Error() }

// Unwrap exposes the kind and the cause to errors.Is and errors.As.
func (f *failure) Unwrap() []error { return []error{f.kind, f.err} }

func fail(kind error, format string, args ...any) error {
	return &failure{kind: kind, err: fmt.Errorf(format, args...)}
}

// function looks up a function by name (case-insensitive).
func (h *Host) function(name string) (*functions.Function, error) {
	fn, ok := h.app.Function(name)
	if !ok {
		return nil, fmt.Errorf("funchost: no function %q in %s", name, h.app.Root)
	}
	if err := h.funcErrors[fn.Name]; err != nil {
		return nil, fmt.Errorf("funchost: function %s is in error: %w", fn.Name, err)
	}
	return fn, nil
}

// Invoke sends body as-is as the invocation request for the named
// function, with the host's headers. Use it to test how the handler copes
// with payloads the typed builders cannot produce. The error is non-nil
// only when the function does not exist.
func (h *Host) Invoke(ctx context.Context, name string, body []byte) (*Result, error) {
	fn, err := h.function(name)
	if err != nil {
		return nil, err
	}
	return h.report(h.invoke(ctx, fn, body, newGUID(), "This function was programmatically called via the host APIs.", nil)), nil
}

// report hands a finished invocation to Options.OnResult.
func (h *Host) report(res *Result) *Result {
	if h.opts.OnResult != nil {
		h.opts.OnResult(res)
	}
	return res
}

// invoke sends one invocation request and judges the response the way the
// host does.
func (h *Host) invoke(ctx context.Context, fn *functions.Function, body []byte, id, reason string, timer *functions.Timer) *Result {
	res := &Result{Function: fn.Name, InvocationID: id, Reason: reason, Request: body, Timer: timer, Start: time.Now()}
	category := fmt.Sprintf(functionLogCategoryTmpl, fn.Name)
	h.log.Info(fmt.Sprintf("Executing 'Functions.%s' (Reason='%s', Id=%s)", fn.Name, reason, id), "category", category)
	defer func() {
		res.Duration = time.Since(res.Start)
		if res.Err == nil {
			h.log.Info(fmt.Sprintf("Executed 'Functions.%s' (Succeeded, Id=%s, Duration=%dms)", fn.Name, id, res.Duration.Milliseconds()), "category", category)
		} else {
			h.log.Error(fmt.Sprintf("Executed 'Functions.%s' (Failed, Id=%s, Duration=%dms)", fn.Name, id, res.Duration.Milliseconds()), "category", category, "error", res.Err)
		}
	}()

	w, err := h.readyWorker(ctx)
	if err != nil {
		res.Err = err
		return res
	}
	res.WorkerID = w.id
	w.calls.Add(1)
	defer w.calls.Add(-1)
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	if timeout := h.app.Host.FunctionTimeout; timeout > 0 {
		answered := make(chan struct{})
		defer close(answered)
		t := time.AfterFunc(timeout, func() {
			timedOut.Store(true)
			h.log.Error(fmt.Sprintf("Timeout value of %s exceeded by function 'Functions.%s' (Id: '%s'). Initiating cancellation.", formatTimeout(timeout), fn.Name, id), "category", category)
			// The invocation has failed; the handler gets the grace
			// (TimeoutAttribute.GracePeriod) to answer before the worker
			// is restarted anyway (WebScriptHostExceptionHandler
			// .OnTimeoutExceptionAsync).
			select {
			case <-answered:
			case <-time.After(timeoutGrace):
			}
			h.log.Error(fmt.Sprintf("A function timeout has occurred. Restarting worker process executing invocationId '%s'.", id), "category", dispatcherLogCategory)
			h.replace(w, "function timeout", false, nil)
			cancel()
		})
		defer t.Stop()
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/%s", w.port, fn.Name)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, url, io.NopCloser(bytes.NewReader(body)))
	if err != nil {
		res.Err = fmt.Errorf("build invocation request: %w", err)
		return res
	}
	// The host's ObjectContent has no precomputed length: chunked body.
	req.ContentLength = -1
	req.Header = http.Header{
		"Content-Type":               {functions.InvocationContentType},
		functions.HeaderInvocationID: {id},
		functions.HeaderHostVersion:  {h.hostVersion},
		"User-Agent":                 {functions.UserAgentPrefix + h.hostVersion},
	}
	resp, err := h.client.Do(req)
	var respBody []byte
	if err == nil {
		respBody, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
		resp.Body.Close()
		res.Status, res.Header, res.Body = resp.StatusCode, resp.Header, respBody
		if err == nil && len(respBody) > maxResponseBytes {
			err = fmt.Errorf("response body larger than %d bytes", maxResponseBytes)
		}
	}
	switch {
	case timedOut.Load():
		res.Err = fail(ErrFunctionTimeout, "function timeout: Functions.%s did not complete within functionTimeout %s; the host killed the handler process (SIGKILL) and restarted it", fn.Name, formatTimeout(h.app.Host.FunctionTimeout))
		return res
	case err != nil && ctx.Err() != nil:
		res.Err = fmt.Errorf("invocation canceled: %w", ctx.Err())
		return res
	case err != nil:
		// When the handler died, let the host apply its exit policy before
		// reporting, so that the next invocation waits for the new process
		// instead of racing the exit.
		select {
		case <-w.handled:
		case <-time.After(250 * time.Millisecond):
		}
		res.Err = fmt.Errorf("invocation request to the handler failed: %w", err)
		return res
	}
	contentType := resp.Header.Get("Content-Type")
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		note := ""
		if parsed, perr := functions.ParseInvocationResult(contentType, respBody); perr == nil && len(parsed.Logs) > 0 {
			res.DroppedLogs = parsed.Logs
			note = fmt.Sprintf(", including %d Logs lines", len(parsed.Logs))
		}
		res.Err = fail(ErrStatus, "handler answered %d %s: the host fails the invocation and ignores the response body%s", resp.StatusCode, http.StatusText(resp.StatusCode), note)
		return res
	}
	parsed, err := functions.ParseInvocationResult(contentType, respBody)
	if err != nil {
		res.Err = &failure{kind: ErrInvalidResponse, err: err}
		return res
	}
	res.Logs, res.Outputs, res.ReturnValue = parsed.Logs, parsed.Outputs, parsed.ReturnValue
	for _, line := range res.Logs {
		h.log.Info(line, "category", category+".User", "invocationId", id)
	}
	if err := functions.CheckOutputs(fn, res.Outputs); err != nil {
		res.Err = &failure{kind: ErrInvalidResponse, err: err}
		return res
	}
	if b, ok := fn.HTTPOutput(); ok {
		out, err := httpOutput(b, res)
		if err != nil {
			res.Err = &failure{kind: ErrInvalidResponse, err: fmt.Errorf("invocation response: Outputs.%s: %w", b.Name, err)}
			return res
		}
		res.HTTP = &out
	}
	return res
}

// httpOutput reads the http output binding's value from a result.
func httpOutput(b functions.Binding, res *Result) (functions.HTTPOutput, error) {
	var raw json.RawMessage
	if b.Name == functions.ReturnBindingName {
		raw = res.ReturnValue
		var s string
		if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
			// A string is tried as JSON, then used as the body.
			if trimmed := strings.TrimSpace(s); strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
				raw = json.RawMessage(trimmed)
			} else {
				return functions.HTTPOutput{StatusCode: http.StatusOK, Body: s}, nil
			}
		}
	} else {
		raw = res.Outputs[b.Name]
	}
	if len(raw) == 0 || string(raw) == "null" {
		// The host substitutes an empty object: 200, no body.
		return functions.HTTPOutput{StatusCode: http.StatusOK}, nil
	}
	var out functions.HTTPOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		return functions.HTTPOutput{}, err
	}
	return out, nil
}

// HTTPInvocation is an HTTP trigger invocation to send with InvokeHTTP.
type HTTPInvocation struct {
	// Request is the public request: method, URL, Host, headers; its body
	// is read (and sent) only when ContentLength > 0, as the host does.
	Request *http.Request
	// Params are the route parameters.
	Params map[string]string
	// Identities are sent as Data.req.Identities; nil sends one
	// unauthenticated identity (functions.AnonymousIdentity).
	Identities []functions.Identity
}

// InvokeHTTP invokes an HTTP-triggered function with the envelope the host
// builds from in.Request, without routing or key checks (the front end,
// Handler, does those). The error is non-nil only for an unknown function,
// one that is not HTTP-triggered, or an unreadable request body.
func (h *Host) InvokeHTTP(ctx context.Context, name string, in HTTPInvocation) (*Result, error) {
	fn, err := h.function(name)
	if err != nil {
		return nil, err
	}
	if !fn.IsHTTP() {
		return nil, fmt.Errorf("funchost: function %s is not HTTP-triggered", fn.Name)
	}
	var body []byte
	if in.Request.ContentLength > 0 && in.Request.Body != nil {
		if body, err = io.ReadAll(in.Request.Body); err != nil {
			return nil, fmt.Errorf("funchost: read request body: %w", err)
		}
	}
	return h.invokeHTTP(ctx, fn, in.Request, body, in.Params, in.Identities)
}

func (h *Host) invokeHTTP(ctx context.Context, fn *functions.Function, r *http.Request, body []byte, params map[string]string, ids []functions.Identity) (*Result, error) {
	req := httpTriggerData(r, body, params, ids)
	sys := functions.Sys{MethodName: fn.Name, UtcNow: time.Now().UTC(), RandGuid: newGUID()}
	inv, err := functions.NewHTTPInvocation(fn.Trigger().Name, req, sys)
	if err != nil {
		return nil, fmt.Errorf("funchost: %w", err)
	}
	payload, err := json.Marshal(inv)
	if err != nil {
		return nil, fmt.Errorf("funchost: %w", err)
	}
	reason := "This function was programmatically called via the host APIs."
	if r.URL != nil {
		reason = fmt.Sprintf("This function was invoked by HTTP %s %s", r.Method, r.URL.Path)
	}
	return h.report(h.invoke(ctx, fn, payload, newGUID(), reason, nil)), nil
}

// httpTriggerData builds Data.req as HttpRequestExtensions.GetRequestAsJObject
// does.
func httpTriggerData(r *http.Request, body []byte, params map[string]string, ids []functions.Identity) functions.HTTPRequest {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u := scheme + "://" + r.Host
	if r.URL != nil {
		u += r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			u += "?" + r.URL.RawQuery
		}
	}
	query := map[string]string{}
	if r.URL != nil {
		for k, v := range r.URL.Query() {
			query[k] = strings.Join(v, ",")
		}
	}
	headers := r.Header.Clone()
	if headers == nil {
		headers = http.Header{}
	}
	if r.Host != "" {
		headers.Set("Host", r.Host)
	}
	if r.ContentLength > 0 && headers.Get("Content-Length") == "" {
		headers.Set("Content-Length", fmt.Sprint(r.ContentLength))
	}
	if ids == nil {
		ids = []functions.Identity{functions.AnonymousIdentity()}
	}
	if params == nil {
		params = map[string]string{}
	}
	req := functions.HTTPRequest{URL: u, Method: r.Method, Query: query, Headers: headers, Params: params, Identities: ids}
	if r.ContentLength > 0 && len(body) > 0 {
		mt := functions.HTTPRequest{Headers: headers}.ContentType()
		if functions.BinaryMediaType(mt) {
			req.Body = base64.StdEncoding.EncodeToString(body)
		} else {
			req.Body = string(body)
		}
	}
	return req
}
