package funchost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

// Routes returns the public routes of the HTTP functions, sorted by
// function name.
func (h *Host) Routes() []Route {
	out := make([]Route, 0, len(h.routes))
	for _, rt := range h.routes {
		out = append(out, rt.route)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Function < out[j].Function })
	return out
}

// Handler returns the host's public HTTP front end:
//
//   - /<routePrefix>/<route> for each HTTP function: route template and
//     methods from function.json (404 when nothing matches, as the host);
//     authLevel enforced with Keys (a key in ?code= or x-functions-key;
//     401 without a valid one); the request becomes Data.req of a JSON
//     envelope POSTed to /<FunctionName>; Outputs.res becomes the
//     response; a failed invocation answers 500.
//   - POST /admin/functions/<name> (master key): fires a non-HTTP function
//     in the background, 202, like the host's admin API.
//   - GET /admin/host/status (master key): the host's state as JSON.
//   - GET /: a plain "up and running" page.
func (h *Host) Handler() http.Handler { return frontEnd{h} }

type frontEnd struct{ h *Host }

// ServeHTTP implements http.Handler.
func (f frontEnd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	switch {
	case path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "Your Functions app is up and running (funchost, a local Azure Functions host for custom handlers).\n")
	case strings.HasPrefix(strings.ToLower(path), "/admin/"):
		f.serveAdmin(w, r, path)
	default:
		f.serveFunction(w, r, path)
	}
}

// matchRoute finds the best route for a path and method.
func (h *Host) matchRoute(path, method string) (*compiledRoute, map[string]string) {
	var best *compiledRoute
	var bestParams map[string]string
	for _, rt := range h.routes {
		if h.disabled(rt.fn) {
			continue
		}
		params, ok := rt.match(path)
		if !ok || (rt.methods != nil && !rt.methods[method]) {
			continue
		}
		if best == nil || rt.precedence() < best.precedence() {
			best, bestParams = rt, params
		}
	}
	return best, bestParams
}

func (f frontEnd) serveFunction(w http.ResponseWriter, r *http.Request, path string) {
	h := f.h
	rt, params := h.matchRoute(path, r.Method)
	if rt == nil {
		writeJSONError(w, http.StatusNotFound, h.noRoute(path, r.Method))
		return
	}
	fn := rt.fn
	id, ok := h.keys.authorize(r, fn.Name, fn.Trigger().AuthLevel)
	if !ok {
		writeJSONError(w, http.StatusUnauthorized, keyRefusal(r, fn.Name))
		return
	}
	var body []byte
	if r.ContentLength > 0 {
		limit := h.opts.MaxRequestBytes
		if limit <= 0 {
			limit = defaultMaxRequestBytes
		}
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	// The host sends the invocation with no cancellation token
	// (DefaultHttpWorkerService.ProcessDefaultInvocationRequest calls
	// HttpClient.SendAsync without one): a client that goes away does not
	// cancel the handler's request, which runs on until it answers or
	// functionTimeout kills the handler. The client itself is cut at the
	// front end's limit (230 s on App Service) with 502, while the
	// invocation runs on.
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	// A copy: the invocation may outlive this request.
	req := r.Clone(context.WithoutCancel(r.Context()))
	go func() {
		res, err := h.invokeHTTP(req.Context(), fn, req, body, params, []functions.Identity{id})
		done <- outcome{res, err}
	}()
	cutoff := time.NewTimer(h.frontEndTimeout())
	defer cutoff.Stop()
	select {
	case o := <-done:
		if o.err != nil || o.res.Err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		writeOutput(w, r, o.res.HTTP)
	case <-cutoff.C:
		h.log.Warn(fmt.Sprintf("front end: %s %s got no answer within %s; the client gets 502 and the invocation runs on", r.Method, path, h.frontEndTimeout()), "category", hostGeneralLogCategory)
		http.Error(w, "502 Bad Gateway: the function did not answer within the front end's limit", http.StatusBadGateway)
	case <-r.Context().Done():
		// The client went away; the invocation runs on.
	}
}

// frontEndTimeout is how long the front end waits for an HTTP function.
func (h *Host) frontEndTimeout() time.Duration {
	if h.opts.FrontEndTimeout > 0 {
		return h.opts.FrontEndTimeout
	}
	return DefaultFrontEndTimeout
}

// writeOutput writes an http output binding as the response (HttpBinding).
func writeOutput(w http.ResponseWriter, r *http.Request, out *functions.HTTPOutput) {
	if out == nil {
		out = &functions.HTTPOutput{StatusCode: http.StatusOK}
	}
	for k, v := range out.Headers {
		switch strings.ToLower(k) {
		case "content-length", "transfer-encoding":
			continue
		}
		w.Header().Set(k, v)
	}
	if out.Body != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	status := out.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		io.WriteString(w, out.Body)
	}
}

func (f frontEnd) serveAdmin(w http.ResponseWriter, r *http.Request, path string) {
	h := f.h
	if _, ok := h.keys.authorize(r, "", "admin"); !ok {
		writeJSONError(w, http.StatusUnauthorized, "the admin API needs the master key (?code= or x-functions-key)")
		return
	}
	lower := strings.ToLower(strings.TrimSuffix(path, "/"))
	switch {
	case lower == "/admin/host/status" && r.Method == http.MethodGet:
		state := "Running"
		select {
		case <-h.done:
			state = "Stopped"
			if h.Err() != nil {
				state = "Error"
			}
		default:
		}
		errs := map[string]string{}
		for name, err := range h.funcErrors {
			errs[name] = err.Error()
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(map[string]any{"state": state, "version": h.hostVersion, "functionErrors": errs})
	case strings.HasPrefix(lower, "/admin/functions/") && r.Method == http.MethodPost:
		name := path[len("/admin/functions/"):]
		fn, err := h.function(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		ts, ok := h.timers[fn.Name]
		if !ok {
			http.Error(w, "funchost: only timer functions can be invoked through the admin API", http.StatusBadRequest)
			return
		}
		// FunctionsController.Invoke takes [FromBody] FunctionInvocation:
		// without a JSON body (at least {}) it answers 400.
		var invocation map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&invocation); err != nil || invocation == nil {
			http.Error(w, `the admin API needs a JSON body, at least {} (FunctionInvocation: {"input": "..."})`, http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer cancel()
			select {
			case <-h.done:
			case <-ctx.Done():
			}
		}()
		go func() {
			defer cancel()
			h.fireTimer(ctx, ts, fireAdmin, TimerInvocation{})
		}()
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, r)
	}
}

// writeJSONError answers {"error": reason} with status: a caller learns
// why, not only that, its request failed.
func writeJSONError(w http.ResponseWriter, status int, reason string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": reason})
}

// noRoute says that no function answers method on path, and which routes
// exist.
func (h *Host) noRoute(path, method string) string {
	var routes []string
	for _, rt := range h.Routes() {
		methods := "any method"
		if len(rt.Methods) > 0 {
			methods = strings.Join(rt.Methods, ", ")
		}
		routes = append(routes, fmt.Sprintf("%s (%s)", rt.Template, methods))
	}
	return fmt.Sprintf("no function answers %s %s; the routes are %s", method, path, strings.Join(routes, ", "))
}

// keyRefusal says why a request's function key was refused, never
// echoing the key.
func keyRefusal(r *http.Request, function string) string {
	if presentedKey(r) == "" {
		return "a function key is required: pass it as ?code=KEY or in the x-functions-key header"
	}
	return fmt.Sprintf("the function key is not valid for function %s", function)
}
