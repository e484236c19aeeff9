package functions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// ResponseContentType is the Content-Type a handler must put on its
// invocation responses: the host only reads application/json or text/json.
const ResponseContentType = "application/json"

// Response is the body a handler returns for an invocation:
//
//	{"Outputs":{"res":{…}},"Logs":["…"],"ReturnValue":null}
//
// Outputs keys must equal the names of the function's output bindings
// (case-sensitive); Logs lines are logged by the host at Information,
// in order, but only when the response status is 2xx: a non-2xx status
// fails the invocation and the host discards the whole body, Logs
// included. ReturnValue feeds a "$return" binding.
type Response struct {
	Outputs     map[string]any
	Logs        []string
	ReturnValue any
}

// NewResponse returns a response with no outputs and the given log lines.
func NewResponse(logs ...string) Response {
	return Response{Outputs: map[string]any{}, Logs: logs}
}

// HTTPResponse returns a response whose http output binding (named binding,
// usually "res") carries out.
func HTTPResponse(binding string, out HTTPOutput, logs ...string) Response {
	return Response{Outputs: map[string]any{binding: out}, Logs: logs}
}

// JSONOutput returns an HTTP output whose body is v as JSON, with
// Content-Type application/json; charset=utf-8.
func JSONOutput(status int, v any) (HTTPOutput, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return HTTPOutput{}, fmt.Errorf("json output: %w", err)
	}
	return HTTPOutput{StatusCode: status, Body: string(body), Headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, nil
}

// TextOutput returns an HTTP output with a text/plain body.
func TextOutput(status int, text string) HTTPOutput {
	return HTTPOutput{StatusCode: status, Body: text, Headers: map[string]string{"Content-Type": "text/plain; charset=utf-8"}}
}

// MarshalJSON writes the response with "Outputs" as an object and "Logs"
// as an array even when they are nil.
func (r Response) MarshalJSON() ([]byte, error) {
	outputs, logs := r.Outputs, r.Logs
	if outputs == nil {
		outputs = map[string]any{}
	}
	if logs == nil {
		logs = []string{}
	}
	return json.Marshal(struct {
		Outputs     map[string]any `json:"Outputs"`
		Logs        []string       `json:"Logs"`
		ReturnValue any            `json:"ReturnValue"`
	}{outputs, logs, r.ReturnValue})
}

// WriteResponse writes resp with the given status and Content-Type
// application/json, as a net/http handler must. With echo,
// c.JSON(status, resp) is equivalent.
func WriteResponse(w http.ResponseWriter, status int, resp Response) error {
	body, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("invocation response: %w", err)
	}
	w.Header().Set("Content-Type", ResponseContentType)
	w.WriteHeader(status)
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("invocation response: write: %w", err)
	}
	return nil
}

// InvocationResult is an invocation response as the host reads it.
type InvocationResult struct {
	Outputs     map[string]json.RawMessage
	Logs        []string
	ReturnValue json.RawMessage // nil when absent or null
}

// JSONMediaType reports whether the host's JSON formatter reads a body of
// this Content-Type: application/json or text/json, any parameters.
func JSONMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "text/json"
}

// ParseInvocationResult reads a 2xx invocation response body the way the
// host does (ReadAsAsync<HttpScriptInvocationResult>): the Content-Type
// must be application/json or text/json, the body a JSON object; member
// names match case-insensitively; Logs must be null or an array of strings;
// Outputs null or an object. An empty body is an error too: the real host
// then never completes the invocation (it waits for functionTimeout).
// Errors are one line and start with "invocation response: ".
func ParseInvocationResult(contentType string, body []byte) (*InvocationResult, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fmt.Errorf("invocation response: empty body; the host reads it as null and never completes the invocation (it waits for functionTimeout, then restarts the handler); return at least {}")
	}
	if !JSONMediaType(contentType) {
		if contentType == "" {
			contentType = "none"
		}
		return nil, fmt.Errorf("invocation response: Content-Type %s is not application/json or text/json; the host fails the invocation with \"Invalid HttpResponseMessage\"", contentType)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("invocation response: body is not valid JSON")
	}
	if k := jsonKind(body); k != "object" {
		return nil, fmt.Errorf("invocation response: want JSON object {Outputs, Logs, ReturnValue}, got %s", k)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("invocation response: %w", err)
	}
	res := &InvocationResult{Outputs: map[string]json.RawMessage{}}
	if v, ok := member(top, "Outputs"); ok && !isNull(v) {
		if k := jsonKind(v); k != "object" {
			return nil, fmt.Errorf("invocation response: Outputs: want object keyed by output binding name, got %s", k)
		}
		if err := json.Unmarshal(v, &res.Outputs); err != nil {
			return nil, fmt.Errorf("invocation response: Outputs: %w", err)
		}
	}
	if v, ok := member(top, "Logs"); ok && !isNull(v) {
		if k := jsonKind(v); k != "array" {
			return nil, fmt.Errorf("invocation response: Logs: want array of strings, got %s", k)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, fmt.Errorf("invocation response: Logs: %w", err)
		}
		res.Logs = make([]string, 0, len(items))
		for i, item := range items {
			if k := jsonKind(item); k != "string" {
				return nil, fmt.Errorf("invocation response: Logs[%d]: want string, got %s", i, k)
			}
			var s string
			if err := json.Unmarshal(item, &s); err != nil {
				return nil, fmt.Errorf("invocation response: Logs[%d]: %w", i, err)
			}
			res.Logs = append(res.Logs, s)
		}
	}
	if v, ok := member(top, "ReturnValue"); ok && !isNull(v) {
		res.ReturnValue = v
	}
	return res, nil
}

// CheckOutputs verifies that every key of outputs is the name of one of
// fn's output bindings, exactly (the host's lookup is case-sensitive, so a
// key that differs only in case is silently ignored by the real host).
func CheckOutputs(fn *Function, outputs map[string]json.RawMessage) error {
	names := map[string]bool{}
	var list []string
	for _, b := range fn.Bindings {
		if b.IsOutput() && b.Name != ReturnBindingName {
			names[b.Name] = true
			list = append(list, b.Name)
		}
	}
	for _, k := range sortedKeys(outputs) {
		if names[k] {
			continue
		}
		for n := range names {
			if strings.EqualFold(n, k) {
				return fmt.Errorf("invocation response: Outputs key %q differs in case from output binding %q; the host would ignore it", k, n)
			}
		}
		if len(list) == 0 {
			return fmt.Errorf("invocation response: Outputs key %q: function %s has no output bindings", k, fn.Name)
		}
		return fmt.Errorf("invocation response: Outputs key %q is not an output binding of %s (have %s)", k, fn.Name, strings.Join(list, ", "))
	}
	return nil
}
