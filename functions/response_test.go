package functions

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestResponseJSON(t *testing.T) {
	b, _ := json.Marshal(Response{})
	if string(b) != `{"Outputs":{},"Logs":[],"ReturnValue":null}` {
		t.Errorf("zero Response = %s", b)
	}
	out, err := JSONOutput(http.StatusAccepted, map[string]string{"runId": "r1"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(HTTPResponse("res", out, "started r1"))
	want := `{"Outputs":{"res":{"statusCode":202,"body":"{\"runId\":\"r1\"}","headers":{"Content-Type":"application/json; charset=utf-8"}}},"Logs":["started r1"],"ReturnValue":null}`
	if string(b) != want {
		t.Errorf("HTTPResponse = %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(NewResponse("a", "b"))
	if string(b) != `{"Outputs":{},"Logs":["a","b"],"ReturnValue":null}` {
		t.Errorf("NewResponse = %s", b)
	}
}

func TestWriteResponse(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := WriteResponse(rec, http.StatusInternalServerError, NewResponse("failed: x")); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 500 || rec.Header().Get("Content-Type") != "application/json" || !strings.Contains(rec.Body.String(), `"failed: x"`) {
		t.Errorf("recorded %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

func TestParseInvocationResult(t *testing.T) {
	res, err := ParseInvocationResult("application/json; charset=utf-8", []byte(`{"outputs":{"res":{"statusCode":"201"}},"LOGS":["a"],"ReturnValue":7}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Logs) != 1 || res.Logs[0] != "a" || string(res.ReturnValue) != "7" || res.Outputs["res"] == nil {
		t.Errorf("result = %+v", res)
	}
	if res, err := ParseInvocationResult("text/json", []byte(`{}`)); err != nil || len(res.Outputs) != 0 || res.Logs != nil || res.ReturnValue != nil {
		t.Errorf("{} = %+v, %v", res, err)
	}
	tests := []struct{ ct, body, want string }{
		{"application/json", ``, "empty body"},
		{"", `{}`, "Content-Type none is not application/json"},
		{"text/plain; charset=utf-8", `{}`, "Content-Type text/plain; charset=utf-8 is not"},
		{"application/problem+json", `{}`, "is not application/json"},
		{"application/json", `{`, "not valid JSON"},
		{"application/json", `[]`, "want JSON object"},
		{"application/json", `{"Logs":"x"}`, "Logs: want array of strings, got string"},
		{"application/json", `{"Logs":["a",1]}`, "Logs[1]: want string, got number"},
		{"application/json", `{"Outputs":[]}`, "Outputs: want object"},
	}
	for _, tt := range tests {
		_, err := ParseInvocationResult(tt.ct, []byte(tt.body))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "invocation response: ") {
			t.Errorf("%q %q: error %v, want %q", tt.ct, tt.body, err, tt.want)
		}
	}
}

func TestHTTPOutputDecode(t *testing.T) {
	tests := []struct {
		json string
		want HTTPOutput
	}{
		{`{"statusCode":201,"body":"x","headers":{"Content-Type":"text/plain"}}`, HTTPOutput{201, "x", map[string]string{"Content-Type": "text/plain"}}},
		{`{"StatusCode":"202"}`, HTTPOutput{StatusCode: 202}},
		{`{"status":404}`, HTTPOutput{StatusCode: 200}},
		{`{"body":{"a":1}}`, HTTPOutput{StatusCode: 200, Body: "{\n  \"a\": 1\n}"}},
		{`{"body":12,"headers":{"X-N":5,"X-B":true}}`, HTTPOutput{200, "12", map[string]string{"X-N": "5", "X-B": "True"}}},
		{`{}`, HTTPOutput{StatusCode: 200}},
	}
	for _, tt := range tests {
		var got HTTPOutput
		if err := json.Unmarshal([]byte(tt.json), &got); err != nil {
			t.Errorf("%s: %v", tt.json, err)
			continue
		}
		if got.StatusCode != tt.want.StatusCode || got.Body != tt.want.Body || len(got.Headers) != len(tt.want.Headers) {
			t.Errorf("%s = %+v, want %+v", tt.json, got, tt.want)
		}
		for k, v := range tt.want.Headers {
			if got.Headers[k] != v {
				t.Errorf("%s header %s = %q, want %q", tt.json, k, got.Headers[k], v)
			}
		}
	}
	for js, want := range map[string]string{
		`"ok"`:                 "want object",
		`{"statusCode":"abc"}`: "want number or numeric string",
		`{"statusCode":true}`:  "want number or numeric string",
		`{"statusCode":42}`:    "not a valid HTTP status code",
		`{"headers":["a"]}`:    "headers: want object",
	} {
		var o HTTPOutput
		if err := json.Unmarshal([]byte(js), &o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", js, err, want)
		}
	}
}

func TestCheckOutputs(t *testing.T) {
	fn, err := ParseFunctionJSON("Status", []byte(`{"bindings":[{"name":"req","type":"httpTrigger","direction":"in"},{"name":"res","type":"http","direction":"out"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	raw := func(keys ...string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for _, k := range keys {
			m[k] = json.RawMessage(`{}`)
		}
		return m
	}
	if err := CheckOutputs(fn, raw("res")); err != nil {
		t.Error(err)
	}
	if err := CheckOutputs(fn, raw()); err != nil {
		t.Error(err)
	}
	if err := CheckOutputs(fn, raw("Res")); err == nil || !strings.Contains(err.Error(), "differs in case") {
		t.Errorf("Res: %v", err)
	}
	if err := CheckOutputs(fn, raw("req")); err == nil || !strings.Contains(err.Error(), `"req" is not an output binding of Status (have res)`) {
		t.Errorf("req: %v", err)
	}
}

func TestBodyBytes(t *testing.T) {
	r := HTTPRequest{Headers: http.Header{"Content-Type": {"application/octet-stream"}}, Body: "aGk="}
	if b, err := r.BodyBytes(); err != nil || string(b) != "hi" {
		t.Errorf("octet = %q, %v", b, err)
	}
	r = HTTPRequest{Headers: http.Header{"Content-Type": {"application/json"}}, Body: "aGk="}
	if b, _ := r.BodyBytes(); string(b) != "aGk=" {
		t.Errorf("json = %q", b)
	}
	r = HTTPRequest{Headers: http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}, Body: "!!"}
	if _, err := r.BodyBytes(); err == nil {
		t.Error("bad base64 accepted")
	}
}
