package funchost

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/functions"
)

func TestRouteTemplates(t *testing.T) {
	fn := func(route string) *functions.Function {
		f, err := functions.ParseFunctionJSON("F", []byte(httpFn("function", `["get"]`, route)))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := []struct {
		prefix, route, path string
		want                map[string]string // nil: no match
	}{
		{"api", "catchup", "/api/catchup", map[string]string{}},
		{"api", "catchup", "/API/CatchUp/", map[string]string{}},
		{"api", "catchup", "/api/catchup/x", nil},
		{"api", "catchup", "/catchup", nil},
		{"", "catchup", "/catchup", map[string]string{}},
		{"api/v1", "status", "/api/v1/status", map[string]string{}},
		{"api", "orders/{id?}", "/api/orders", map[string]string{}},
		{"api", "orders/{id?}", "/api/orders/7", map[string]string{"id": "7"}},
		{"api", "orders/{id:int}", "/api/orders/x", nil},
		{"api", "orders/{id:int}", "/api/orders/-3", map[string]string{"id": "-3"}},
		{"api", "orders/{id=none}", "/api/orders", map[string]string{"id": "none"}},
		{"api", "files/{*path}", "/api/files/a/b%20c", map[string]string{"path": "a/b c"}},
		{"api", "files/{*path}", "/api/files", map[string]string{}},
		{"api", "t/{g:guid}", "/api/t/4e773554-f6b7-4ea2-b07d-4c5fd5aba741", map[string]string{"g": "4e773554-f6b7-4ea2-b07d-4c5fd5aba741"}},
		{"api", "t/{a:alpha}", "/api/t/abc1", nil},
	}
	for _, tt := range tests {
		rt, err := compileRoute(tt.prefix, fn(tt.route))
		if err != nil {
			t.Errorf("%s: %v", tt.route, err)
			continue
		}
		got, ok := rt.match(tt.path)
		if ok != (tt.want != nil) || ok && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s/%s on %s: %v %v, want %v", tt.prefix, tt.route, tt.path, got, ok, tt.want)
		}
	}
	for _, bad := range []string{"a/{x}.{y}", "{*rest}/x", "{opt?}/x", "a//b", "{}"} {
		if _, err := parseTemplate(bad); err == nil {
			t.Errorf("template %q accepted", bad)
		}
	}
	lit, _ := compileRoute("api", fn("items/all"))
	par, _ := compileRoute("api", fn("items/{id}"))
	if !(lit.precedence() < par.precedence()) {
		t.Error("literal route does not take precedence over a parameter")
	}
}

func TestAuthorize(t *testing.T) {
	k := Keys{Master: "m", Host: map[string]string{"default": "h", "other": "o"}, Function: map[string]map[string]string{"Status": {"fk": "f"}}}
	tests := []struct {
		query, header, fn, level string
		ok                       bool
		wantLevel, wantKey       string
	}{
		{"", "", "Status", "function", false, "", ""},
		{"h", "", "Status", "function", true, "Function", "default"},
		{"o", "", "Status", "function", true, "Function", "other"},
		{"", "h", "Status", "function", true, "Function", "default"},
		{"x", "h", "Status", "function", true, "Function", "default"}, // the header wins (AuthenticationLevelHandler)
		{"f", "", "status", "function", true, "Function", "fk"},
		{"f", "", "CatchUp", "function", false, "", ""},
		{"m", "", "Status", "function", true, "Admin", "master"},
		{"h", "", "Status", "admin", false, "", ""},
		{"m", "", "Status", "admin", true, "Admin", "master"},
		{"", "", "Status", "anonymous", true, "", ""},
		{"h", "", "Status", "anonymous", true, "Function", "default"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/api/status?code="+tt.query, nil)
		if tt.header != "" {
			r.Header.Set("x-functions-key", tt.header)
		}
		id, ok := k.authorize(r, tt.fn, tt.level)
		if ok != tt.ok {
			t.Errorf("%+v: ok %v", tt, ok)
			continue
		}
		if !ok {
			continue
		}
		req := functions.HTTPRequest{Identities: []functions.Identity{id}}
		gotKey := ""
		for _, c := range id.Claims {
			if c.Type == functions.KeyIDClaimType {
				gotKey = c.Value
			}
		}
		if req.AuthLevel() != tt.wantLevel || gotKey != tt.wantKey || id.IsAuthenticated != (tt.wantLevel != "") {
			t.Errorf("%+v: identity %+v", tt, id)
		}
	}
	g, err := GenerateKeys()
	if err != nil || g.Master == "" || g.DefaultKey() == "" || g.Master == g.DefaultKey() || len(g.DefaultKey()) < 40 {
		t.Errorf("GenerateKeys = %+v, %v", g, err)
	}
}

func TestReadLocalSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "local.settings.json")
		must(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	ls, err := ReadLocalSettings(write(`{"IsEncrypted":false,"Values":{"FUNCTIONS_WORKER_RUNTIME":"Custom","MIRROR_SCHEDULE":"0 */1 * * * *"},"Host":{"LocalHttpPort":7072},"ConnectionStrings":{}}`))
	if err != nil || ls.Values["MIRROR_SCHEDULE"] != "0 */1 * * * *" || ls.LocalHTTPPort != 7072 {
		t.Errorf("= %+v, %v", ls, err)
	}
	for body, want := range map[string]string{
		`{"IsEncrypted":true,"Values":{}}`: "IsEncrypted",
		`{"Values":{"N":5}}`:               "Values.N: want a string",
		`{"Values":`:                       "local settings",
	} {
		if _, err := ReadLocalSettings(write(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func TestFormatTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{10 * time.Minute: "00:10:00", time.Second: "00:00:01", 0: "unbounded", 90*time.Minute + 1500*time.Millisecond: "01:30:01.5"} {
		if got := formatTimeout(d); got != want {
			t.Errorf("formatTimeout(%v) = %q, want %q", d, got, want)
		}
	}
}

// The local host keeps its keys across restarts: the same keys file gives
// the same keys; a new file gets new random ones, readable only by the
// user.
func TestKeysFileKeepsKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "keys.json")
	first, err := LoadOrCreateKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	if first.DefaultKey() == "" || first.Master == "" || again.DefaultKey() != first.DefaultKey() || again.Master != first.Master {
		t.Errorf("keys changed across loads: %+v then %+v", first, again)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("keys file mode: %v %v", fi.Mode(), err)
	}
	other, err := LoadOrCreateKeys(filepath.Join(t.TempDir(), "keys.json"))
	if err != nil || other.DefaultKey() == first.DefaultKey() {
		t.Errorf("a new keys file reused keys: %v", err)
	}
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKeys(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a broken keys file: %v", err)
	}
}
