// Command handler is a custom handler for funchost's tests. It listens on
// 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT and behaves according to the
// invoked function's name (lower-cased prefix):
//
//	echo*      200 JSON; Logs[0] = "facts <JSON>" describing the request
//	           (method, path, headers, raw body, transfer encoding, content
//	           length, environment, readiness probes seen); for an HTTP
//	           envelope also Outputs.res echoing the body.
//	fail*      500 JSON with Logs (which the host must drop).
//	sleep*     sleeps $TEST_SLEEP_MS (default 3000) then 200; reports
//	           whether another sleep* invocation overlapped.
//	plain*     200 text/plain "{}".
//	empty*     200 application/json with no body.
//	badlogs*   200 {"Logs":"x"}.
//	wrongout*  200 {"Outputs":{"nope":1}}.
//	stringres* 200 {"Outputs":{"res":"just a string"}}.
//	created*   200 {"Outputs":{"res":{"statusCode":"201",…}}}.
//	crash*     exits with code 3 mid-request.
//
// GET / answers 404 (any response means ready). $TEST_START_DELAY_MS
// delays listening; $TEST_EXIT_CODE makes it exit at start with that code,
// only on the first start when $TEST_EXIT_ONCE names a marker file.
// SIGINT shuts it down gracefully with exit code 0.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type state struct {
	probes   atomic.Int64
	inFlight atomic.Int64
	mu       sync.Mutex
}

func main() {
	if code := os.Getenv("TEST_EXIT_CODE"); code != "" {
		marker := os.Getenv("TEST_EXIT_ONCE")
		first := true
		if marker != "" {
			if _, err := os.Stat(marker); err == nil {
				first = false
			} else {
				os.WriteFile(marker, []byte("x"), 0o644)
			}
		}
		if first {
			n, _ := strconv.Atoi(code)
			fmt.Fprintf(os.Stderr, "exiting at start with code %d\n", n)
			os.Exit(n)
		}
	}
	if ms, _ := strconv.Atoi(os.Getenv("TEST_START_DELAY_MS")); ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	port := os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT")
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	st := &state{}
	srv := &http.Server{Handler: st}
	fmt.Printf("handler listening on port %s\n", port)
	fmt.Fprintln(os.Stderr, "warning: a test stderr line")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "got signal %v, shutting down\n", sig)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	fmt.Println("handler stopped")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (st *state) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/" {
		st.probes.Add(1)
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	name := strings.ToLower(strings.TrimPrefix(r.URL.Path, "/"))
	fmt.Printf("request %s %s\n", r.Method, r.URL.Path)
	switch {
	case strings.HasPrefix(name, "echo"):
		env := map[string]string{}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && (strings.HasPrefix(k, "FUNCTIONS_") || strings.HasPrefix(k, "TEST_") || strings.HasPrefix(k, "APP_")) {
				env[k] = v
			}
		}
		cwd, _ := os.Getwd()
		facts, _ := json.Marshal(map[string]any{
			"method":           r.Method,
			"path":             r.URL.Path,
			"headers":          r.Header,
			"host":             r.Host,
			"transferEncoding": r.TransferEncoding,
			"contentLength":    r.ContentLength,
			"body":             string(body),
			"env":              env,
			"cwd":              cwd,
			"args":             os.Args[1:],
			"probes":           st.probes.Load(),
			"pid":              os.Getpid(),
		})
		resp := map[string]any{"Logs": []string{"facts " + string(facts), "second line"}, "ReturnValue": nil}
		var env2 struct {
			Data map[string]json.RawMessage
		}
		json.Unmarshal(body, &env2)
		if _, ok := env2.Data["req"]; ok {
			resp["Outputs"] = map[string]any{"res": map[string]any{
				"statusCode": 200,
				"body":       string(body),
				"headers":    map[string]string{"Content-Type": "application/json", "X-Handler": "echo"},
			}}
		} else {
			resp["Outputs"] = map[string]any{}
		}
		writeJSON(w, http.StatusOK, resp)
	case strings.HasPrefix(name, "fail"):
		writeJSON(w, http.StatusInternalServerError, map[string]any{"Logs": []string{"failing on purpose", "records could not be mirrored"}})
	case strings.HasPrefix(name, "sleep"):
		overlap := st.inFlight.Add(1) > 1
		defer st.inFlight.Add(-1)
		ms, _ := strconv.Atoi(os.Getenv("TEST_SLEEP_MS"))
		if ms <= 0 {
			ms = 3000
		}
		start := time.Now()
		time.Sleep(time.Duration(ms) * time.Millisecond)
		writeJSON(w, http.StatusOK, map[string]any{"Logs": []string{
			fmt.Sprintf("overlap=%v", overlap),
			fmt.Sprintf("start=%d", start.UnixNano()),
			fmt.Sprintf("end=%d", time.Now().UnixNano()),
			"body " + string(body),
		}})
	case strings.HasPrefix(name, "plain"):
		w.Write([]byte("{}"))
	case strings.HasPrefix(name, "empty"):
		w.Header().Set("Content-Type", "application/json")
	case strings.HasPrefix(name, "badlogs"):
		writeJSON(w, http.StatusOK, map[string]any{"Logs": "x"})
	case strings.HasPrefix(name, "wrongout"):
		writeJSON(w, http.StatusOK, map[string]any{"Outputs": map[string]any{"nope": 1}})
	case strings.HasPrefix(name, "stringres"):
		writeJSON(w, http.StatusOK, map[string]any{"Outputs": map[string]any{"res": "just a string"}})
	case strings.HasPrefix(name, "created"):
		writeJSON(w, http.StatusOK, map[string]any{"Outputs": map[string]any{"res": map[string]any{
			"statusCode": "201", "body": "created", "headers": map[string]string{"Location": "/api/things/1"},
		}}, "Logs": []string{"made a thing"}})
	case strings.HasPrefix(name, "crash"):
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		os.Exit(3)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"Logs": []string{"no such function " + name}})
	}
}
