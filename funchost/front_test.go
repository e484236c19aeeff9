package funchost

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

func TestFrontEnd(t *testing.T) {
	t.Parallel()
	app := newApp(t, "", map[string]string{
		"EchoHTTP":     httpFn("function", `["get","post"]`, "echo"),
		"EchoAnon":     httpFn("anonymous", `["get"]`, "anon"),
		"EchoAdmin":    httpFn("admin", `["get"]`, "adm"),
		"EchoItems":    httpFn("function", `["get"]`, "items/{id:int}/{rest?}"),
		"CreatedHTTP":  httpFn("anonymous", `["post"]`, "things"),
		"FailHTTP":     httpFn("anonymous", `["post"]`, "fail"),
		"EchoDisabled": httpFn("anonymous", `["get"]`, "off"),
		"EchoTimer":    timerFn(yearly, true),
	})
	appKeys := Keys{Master: "master-key", Host: map[string]string{"default": "host-key"}, Function: map[string]map[string]string{"echoitems": {"items": "items-key"}}}
	results := make(chan *Result, 16)
	th := startHost(t, app, Options{Keys: appKeys, Settings: map[string]string{"AzureWebJobs.EchoDisabled.Disabled": "true"}, OnResult: func(r *Result) { results <- r }})
	srv := httptest.NewServer(th.Handler())
	defer srv.Close()

	do := func(method, path, body string, header http.Header) (*http.Response, string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+path, r)
		must(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := srv.Client().Do(req)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	// envelope decodes the invocation body the handler echoed.
	envelope := func(body string) (*functions.Invocation, functions.HTTPRequest) {
		t.Helper()
		inv, err := functions.ParseInvocation([]byte(body))
		must(t, err)
		req, err := inv.HTTP("req")
		must(t, err)
		return inv, req
	}

	t.Run("keys", func(t *testing.T) {
		for _, tc := range []struct {
			path   string
			header http.Header
			want   int
		}{
			{"/api/echo", nil, 401},
			{"/api/echo?code=wrong", nil, 401},
			{"/api/echo?code=items-key", nil, 401}, // another function's key
			{"/api/echo?code=host-key", nil, 200},
			{"/api/echo?code=master-key", nil, 200},
			{"/api/echo", http.Header{"X-Functions-Key": {"host-key"}}, 200},
			{"/api/items/5?code=items-key", nil, 200},
			{"/api/adm?code=host-key", nil, 401},
			{"/api/adm?code=master-key", nil, 200},
			{"/api/anon", nil, 200},
			{"/admin/host/status", nil, 401},
			{"/admin/host/status?code=host-key", nil, 401},
		} {
			resp, body := do("GET", tc.path, "", tc.header)
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s %v: %d, want %d", tc.path, tc.header, resp.StatusCode, tc.want)
			}
			if tc.want == 401 {
				// A refused key answers JSON with the reason, never the key.
				var e map[string]string
				if err := json.Unmarshal([]byte(body), &e); err != nil || e["error"] == "" || strings.Contains(body, "wrong") || strings.Contains(body, "items-key") {
					t.Errorf("GET %s: 401 body %q, want {\"error\": reason} without the key", tc.path, body)
				}
			}
		}
	})

	t.Run("routing", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			want         int
		}{
			{"PUT", "/api/echo?code=host-key", 404},    // method not in function.json
			{"GET", "/api/nothing?code=host-key", 404}, // no route
			{"GET", "/echo?code=host-key", 404},        // no route prefix
			{"GET", "/api/ECHO?code=host-key", 200},    // literals match case-insensitively
			{"GET", "/api/items/x?code=host-key", 404}, // {id:int}
			{"GET", "/api/off", 404},                   // disabled by app setting
			{"GET", "/", 200},
		} {
			resp, body := do(tc.method, tc.path, "", nil)
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
			}
			if tc.want == 404 {
				// An unknown route answers JSON naming the routes there are.
				var e map[string]string
				if err := json.Unmarshal([]byte(body), &e); err != nil || !strings.Contains(e["error"], "/api/echo (GET, POST)") || strings.Contains(body, "host-key") {
					t.Errorf("%s %s: 404 body %q, want {\"error\": reason with the routes}", tc.method, tc.path, body)
				}
			}
		}
		resp, body := do("GET", "/api/items/42/more%20stuff?code=host-key", "", nil)
		inv, req := envelope(body)
		if resp.StatusCode != 200 || !reflect.DeepEqual(req.Params, map[string]string{"id": "42", "rest": "more stuff"}) {
			t.Errorf("params = %v", req.Params)
		}
		var id string
		json.Unmarshal(inv.Metadata["id"], &id)
		if id != "42" {
			t.Errorf("Metadata.id = %q", id)
		}
	})

	t.Run("GET envelope", func(t *testing.T) {
		resp, body := do("GET", "/api/echo?code=host-key&x=1&x=2&e=a%20b", "", http.Header{"Accept": {"text/plain", "application/json"}})
		if resp.StatusCode != 200 || resp.Header.Get("X-Handler") != "echo" || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("response %d %v", resp.StatusCode, resp.Header)
		}
		inv, req := envelope(body)
		u, _ := url.Parse(srv.URL)
		if req.URL != srv.URL+"/api/echo?code=host-key&x=1&x=2&e=a%20b" || req.Method != "GET" {
			t.Errorf("Url %q Method %q", req.URL, req.Method)
		}
		if !reflect.DeepEqual(req.Query, map[string]string{"code": "host-key", "x": "1,2", "e": "a b"}) {
			t.Errorf("Query = %v", req.Query)
		}
		if req.Headers.Get("Host") != u.Host || !reflect.DeepEqual(req.Headers.Values("Accept"), []string{"text/plain", "application/json"}) {
			t.Errorf("Headers = %v", req.Headers)
		}
		if req.Params == nil || len(req.Params) != 0 {
			t.Errorf("Params = %#v, want {}", req.Params)
		}
		if strings.Contains(body, `"Body"`) {
			t.Errorf("GET without body has a Body member: %s", body)
		}
		if len(req.Identities) != 1 || req.AuthLevel() != "Function" || *req.Identities[0].AuthenticationType != "WebJobsAuthLevel" || req.Identities[0].Claims[1].Value != "default" {
			t.Errorf("Identities = %+v", req.Identities)
		}
		var mdHeaders map[string]string
		must(t, json.Unmarshal(inv.Metadata["Headers"], &mdHeaders))
		if mdHeaders["Accept"] != "text/plain,application/json" {
			t.Errorf("Metadata.Headers = %v", mdHeaders)
		}
		var mdQuery map[string]string
		must(t, json.Unmarshal(inv.Metadata["Query"], &mdQuery))
		if mdQuery["x"] != "1,2" {
			t.Errorf("Metadata.Query = %v", mdQuery)
		}
		if sys, err := inv.Sys(); err != nil || sys.MethodName != "EchoHTTP" {
			t.Errorf("sys = %+v, %v", sys, err)
		}
		if keys(inv.Metadata) != "Headers Params Query sys" {
			t.Errorf("Metadata members = %s", keys(inv.Metadata))
		}
	})

	t.Run("POST body only with Content-Length", func(t *testing.T) {
		_, body := do("POST", "/api/echo?code=host-key", `{"topics":["a"]}`, http.Header{"Content-Type": {"application/json"}})
		_, req := envelope(body)
		if req.Body != `{"topics":["a"]}` || req.Headers.Get("Content-Length") != "16" {
			t.Errorf("Body %q, Content-Length %q", req.Body, req.Headers.Get("Content-Length"))
		}
		_, body = do("POST", "/api/echo?code=host-key", "\x00\x01binary", http.Header{"Content-Type": {"application/octet-stream"}})
		if _, req := envelope(body); req.Body != "AAFiaW5hcnk=" {
			t.Errorf("octet-stream Body %q, want base64", req.Body)
		}
		// A chunked request (no Content-Length) arrives without Body.
		pr, pw := io.Pipe()
		go func() { pw.Write([]byte(`{"chunked":true}`)); pw.Close() }()
		chunked, _ := http.NewRequest("POST", srv.URL+"/api/echo?code=host-key", pr)
		resp, err := srv.Client().Do(chunked)
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if _, r := envelope(string(b)); r.Body != "" {
			t.Errorf("chunked request produced Body %q", r.Body)
		}
	})

	t.Run("outputs", func(t *testing.T) {
		resp, body := do("POST", "/api/things", "x", nil)
		if resp.StatusCode != 201 || body != "created" || resp.Header.Get("Location") != "/api/things/1" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("created: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		resp, body = do("POST", "/api/fail", "x", nil)
		if resp.StatusCode != 500 || body != "" {
			t.Errorf("failed invocation: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("admin", func(t *testing.T) {
		drain(results)
		resp, body := do("GET", "/admin/host/status", "", http.Header{"X-Functions-Key": {"master-key"}})
		if resp.StatusCode != 200 || !strings.Contains(body, `"state":"Running"`) {
			t.Errorf("status: %d %s", resp.StatusCode, body)
		}
		resp, _ = do("POST", "/admin/functions/EchoTimer", `{"input":""}`, http.Header{"X-Functions-Key": {"master-key"}, "Content-Type": {"application/json"}})
		if resp.StatusCode != 202 {
			t.Errorf("admin invoke: %d", resp.StatusCode)
		}
		select {
		case r := <-results:
			if r.Function != "EchoTimer" || r.Err != nil {
				t.Errorf("admin invocation result %+v", r)
			}
		case <-time.After(5 * time.Second):
			t.Error("admin invocation did not run")
		}
		if resp, _ := do("POST", "/admin/functions/EchoTimer", "", nil); resp.StatusCode != 401 {
			t.Errorf("admin invoke without key: %d", resp.StatusCode)
		}
		if resp, _ := do("POST", "/admin/functions/EchoHTTP?code=master-key", "", nil); resp.StatusCode != 400 {
			t.Errorf("admin invoke of an HTTP function: %d", resp.StatusCode)
		}
	})

	t.Run("routes", func(t *testing.T) {
		var got []string
		for _, r := range th.Routes() {
			got = append(got, r.Function+" "+strings.Join(r.Methods, ",")+" "+r.Template+" "+r.AuthLevel)
		}
		want := []string{"CreatedHTTP POST /api/things anonymous", "EchoAdmin GET /api/adm admin", "EchoAnon GET /api/anon anonymous", "EchoDisabled GET /api/off anonymous", "EchoHTTP GET,POST /api/echo function", "EchoItems GET /api/items/{id:int}/{rest?} function", "FailHTTP POST /api/fail anonymous"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Routes = %q", got)
		}
	})
}

func drain(c chan *Result) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func TestInvokeHTTPDirect(t *testing.T) {
	t.Parallel()
	th := startHost(t, newApp(t, "", map[string]string{"EchoHTTP": httpFn("function", `["post"]`, "echo")}), Options{})
	req := httptest.NewRequest("POST", "http://localhost:7071/api/echo?source=web", strings.NewReader(`{"id":1005,"quantity":2,"color":"black"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "curl/8.0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := th.InvokeHTTP(ctx, "EchoHTTP", HTTPInvocation{Request: req})
	must(t, err)
	if res.Err != nil || res.HTTP == nil || res.HTTP.StatusCode != 200 {
		t.Fatalf("result %+v", res)
	}
	// The echoed request matches reference §3.4 member for member.
	inv, err := functions.ParseInvocation([]byte(res.HTTP.Body))
	must(t, err)
	r, err := inv.HTTP("req")
	must(t, err)
	want := functions.HTTPRequest{
		URL:        "http://localhost:7071/api/echo?source=web",
		Method:     "POST",
		Query:      map[string]string{"source": "web"},
		Headers:    http.Header{"Content-Type": {"application/json"}, "Content-Length": {"40"}, "Host": {"localhost:7071"}, "User-Agent": {"curl/8.0"}},
		Params:     map[string]string{},
		Identities: []functions.Identity{functions.AnonymousIdentity()},
		Body:       `{"id":1005,"quantity":2,"color":"black"}`,
	}
	gotJSON, _ := json.Marshal(r)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("Data.req\n got %s\nwant %s", gotJSON, wantJSON)
	}
}
