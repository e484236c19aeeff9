package functions

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// HTTPRequest is the trigger data of an httpTrigger binding in the default
// (non-forwarding) mode, sent as Data.<binding name> (usually "req").
type HTTPRequest struct {
	// URL is the public URL of the original request, query string included
	// (e.g. http://localhost:7071/api/status?code=…); JSON name "Url".
	URL string
	// Method is the original request method, e.g. "POST".
	Method string
	// Query holds the query parameters; repeated keys are joined with ",".
	Query map[string]string
	// Headers holds the original request headers (keys canonicalized).
	Headers http.Header
	// Params holds the route parameters of the function's route template.
	Params map[string]string
	// Identities are the request's claims identities; with key
	// authorization one has AuthenticationType "WebJobsAuthLevel".
	Identities []Identity
	// Body is the raw request body. The host sends it only when the request
	// had Content-Length > 0 (a chunked request arrives without a body);
	// for application/octet-stream and multipart/* it is base64 text.
	Body string
}

// MarshalJSON writes the request in the host's shape and member order:
// Url, Method, Query, Headers, Params, Identities, Body (Body only when
// non-empty).
func (r HTTPRequest) MarshalJSON() ([]byte, error) {
	headers := make(map[string][]string, len(r.Headers))
	for k, v := range r.Headers {
		if v == nil {
			v = []string{}
		}
		headers[k] = v
	}
	ids := r.Identities
	if ids == nil {
		ids = []Identity{}
	}
	return json.Marshal(struct {
		URL        string              `json:"Url"`
		Method     string              `json:"Method"`
		Query      map[string]string   `json:"Query"`
		Headers    map[string][]string `json:"Headers"`
		Params     map[string]string   `json:"Params"`
		Identities []Identity          `json:"Identities"`
		Body       string              `json:"Body,omitempty"`
	}{r.URL, r.Method, nonNilStrings(r.Query), headers, nonNilStrings(r.Params), ids, r.Body})
}

// UnmarshalJSON reads a request in the host's shape; see Invocation.HTTP
// for the rules.
func (r *HTTPRequest) UnmarshalJSON(data []byte) error {
	req, err := decodeHTTPRequest("HTTPRequest", data)
	if err != nil {
		return err
	}
	*r = req
	return nil
}

// ContentType returns the media type of the request's Content-Type header,
// lower-cased, without parameters ("" when absent).
func (r HTTPRequest) ContentType() string {
	mt, _, err := mime.ParseMediaType(r.Headers.Get("Content-Type"))
	if err != nil {
		return strings.ToLower(strings.TrimSpace(strings.Split(r.Headers.Get("Content-Type"), ";")[0]))
	}
	return mt
}

// BodyBytes returns the request body as bytes: Body itself, or its base64
// decoding for the media types the host encodes (application/octet-stream
// and multipart/*).
func (r HTTPRequest) BodyBytes() ([]byte, error) {
	if !BinaryMediaType(r.ContentType()) {
		return []byte(r.Body), nil
	}
	b, err := base64.StdEncoding.DecodeString(r.Body)
	if err != nil {
		return nil, fmt.Errorf("request body: %s body is not base64: %w", r.ContentType(), err)
	}
	return b, nil
}

// BinaryMediaType reports whether the host passes a request body of this
// media type as bytes (so base64 in the envelope) rather than as text.
func BinaryMediaType(mediaType string) bool {
	mediaType = strings.ToLower(mediaType)
	return mediaType == "application/octet-stream" || strings.HasPrefix(mediaType, "multipart/")
}

func nonNilStrings(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Identity is a serialized .NET ClaimsIdentity as the host sends it in
// HTTPRequest.Identities. Nullable .NET members are pointers.
type Identity struct {
	AuthenticationType *string         `json:"AuthenticationType"`
	IsAuthenticated    bool            `json:"IsAuthenticated"`
	Actor              json.RawMessage `json:"Actor"`
	BootstrapContext   json.RawMessage `json:"BootstrapContext"`
	Claims             []Claim         `json:"Claims"`
	Label              *string         `json:"Label"`
	Name               *string         `json:"Name"`
	NameClaimType      string          `json:"NameClaimType"`
	RoleClaimType      string          `json:"RoleClaimType"`
}

// Claim is a serialized .NET Claim.
type Claim struct {
	Issuer         string            `json:"Issuer"`
	OriginalIssuer string            `json:"OriginalIssuer"`
	Properties     map[string]string `json:"Properties"`
	Type           string            `json:"Type"`
	Value          string            `json:"Value"`
	ValueType      string            `json:"ValueType"`
}

// Claim types and values the host uses for key authorization.
const (
	AuthLevelAuthenticationType = "WebJobsAuthLevel"
	AuthLevelClaimType          = "http://schemas.microsoft.com/2017/07/functions/claims/authlevel"
	KeyIDClaimType              = "http://schemas.microsoft.com/2017/07/functions/claims/keyid"
	NameClaimType               = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name"
	RoleClaimType               = "http://schemas.microsoft.com/ws/2008/06/identity/claims/role"
	StringClaimValueType        = "http://www.w3.org/2001/XMLSchema#string"
	LocalAuthority              = "LOCAL AUTHORITY"
)

// AnonymousIdentity is the identity of a request that presented no key:
// unauthenticated, no claims.
func AnonymousIdentity() Identity {
	return Identity{Claims: []Claim{}, NameClaimType: NameClaimType, RoleClaimType: RoleClaimType}
}

// KeyIdentity is the identity the host attaches to a request authorized by
// a key: level is "Function" or "Admin", keyName the key's name (e.g.
// "default", "master").
func KeyIdentity(level, keyName string) Identity {
	typ := AuthLevelAuthenticationType
	claim := func(t, v string) Claim {
		return Claim{Issuer: LocalAuthority, OriginalIssuer: LocalAuthority, Properties: map[string]string{}, Type: t, Value: v, ValueType: StringClaimValueType}
	}
	return Identity{
		AuthenticationType: &typ,
		IsAuthenticated:    true,
		Claims:             []Claim{claim(AuthLevelClaimType, level), claim(KeyIDClaimType, keyName)},
		NameClaimType:      NameClaimType,
		RoleClaimType:      RoleClaimType,
	}
}

// AuthLevel returns the value of the authlevel claim of the first identity
// that has one ("Function", "Admin"), or "" when none has.
func (r HTTPRequest) AuthLevel() string {
	for _, id := range r.Identities {
		for _, c := range id.Claims {
			if c.Type == AuthLevelClaimType {
				return c.Value
			}
		}
	}
	return ""
}

func decodeHTTPRequest(path string, raw json.RawMessage) (HTTPRequest, error) {
	m, err := object(path, raw, "HTTP request object {Url, Method, Query, Headers, …}")
	if err != nil {
		return HTTPRequest{}, err
	}
	var r HTTPRequest
	get := func(name string) json.RawMessage { v, _ := member(m, name); return v }
	if r.URL, err = stringField(path+".Url", get("Url")); err != nil {
		return HTTPRequest{}, err
	}
	if r.Method, err = stringField(path+".Method", get("Method")); err != nil {
		return HTTPRequest{}, err
	}
	if r.Query, err = stringMap(path+".Query", get("Query"), "object of strings", false); err != nil {
		return HTTPRequest{}, err
	}
	if r.Headers, err = headerMap(path+".Headers", get("Headers")); err != nil {
		return HTTPRequest{}, err
	}
	if r.Params, err = stringMap(path+".Params", get("Params"), "object of strings", true); err != nil {
		return HTTPRequest{}, err
	}
	if ids := get("Identities"); !isNull(ids) {
		if k := jsonKind(ids); k != "array" {
			return HTTPRequest{}, decodeErr(path+".Identities", "want array of identity objects, got %s", k)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(ids, &items); err != nil {
			return HTTPRequest{}, decodeErr(path+".Identities", "want array of identity objects: %v", err)
		}
		for i, item := range items {
			p := fmt.Sprintf("%s.Identities[%d]", path, i)
			if k := jsonKind(item); k != "object" {
				return HTTPRequest{}, decodeErr(p, "want identity object, got %s", k)
			}
			var id Identity
			if err := json.Unmarshal(item, &id); err != nil {
				return HTTPRequest{}, decodeErr(p, "%s", typeErrorProblem(err))
			}
			r.Identities = append(r.Identities, id)
		}
	}
	if r.Body, err = stringField(path+".Body", get("Body")); err != nil {
		return HTTPRequest{}, err
	}
	return r, nil
}

func headerMap(path string, raw json.RawMessage) (http.Header, error) {
	const want = "object of string arrays"
	h := http.Header{}
	if isNull(raw) {
		return h, nil
	}
	m, err := object(path, raw, want)
	if err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(m) {
		v := m[k]
		if isNull(v) {
			continue
		}
		if kind := jsonKind(v); kind != "array" {
			return nil, decodeErr(path, "want %s, %q is %s", want, k, article(kind))
		}
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, decodeErr(path, "want %s, %q: %v", want, k, err)
		}
		for _, item := range items {
			if kind := jsonKind(item); kind != "string" {
				return nil, decodeErr(path, "want %s, %q has %s element", want, k, article(kind))
			}
			var s string
			if err := json.Unmarshal(item, &s); err != nil {
				return nil, decodeErr(path, "want %s, %q: %v", want, k, err)
			}
			h.Add(k, s)
		}
	}
	return h, nil
}

// HTTPOutput is the value of an http output binding (Outputs.res): the
// HTTP response the host returns to the original caller.
//
// It marshals as {"statusCode":202,"body":"…","headers":{"K":"V"}}. Use a
// string Body and set Content-Type in Headers; a zero StatusCode is left
// out, which the host answers as 200.
type HTTPOutput struct {
	StatusCode int
	Body       string
	Headers    map[string]string
}

// MarshalJSON writes the output in the host's expected shape.
func (o HTTPOutput) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		StatusCode int               `json:"statusCode,omitempty"`
		Body       string            `json:"body"`
		Headers    map[string]string `json:"headers,omitempty"`
	}{o.StatusCode, o.Body, o.Headers})
}

// UnmarshalJSON reads an output the way the host does
// (HttpOutputBindingResponse + HttpBinding): the value must be an object;
// member names match case-insensitively; statusCode may be a number or a
// numeric string and defaults to 200 ("status" is ignored); a string body is
// taken as is, an object or array body as indented JSON, other scalars as
// text; header values as text.
func (o *HTTPOutput) UnmarshalJSON(data []byte) error {
	out, err := decodeHTTPOutput(data)
	if err != nil {
		return err
	}
	*o = out
	return nil
}

func decodeHTTPOutput(raw json.RawMessage) (HTTPOutput, error) {
	k := jsonKind(raw)
	if k != "object" {
		return HTTPOutput{}, fmt.Errorf("http output: want object {statusCode, body, headers}, got %s (the host fails with \"Failed while trying to Deserialize to httpOutputBindingResponse\")", k)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return HTTPOutput{}, fmt.Errorf("http output: %w", err)
	}
	out := HTTPOutput{StatusCode: http.StatusOK}
	if v, ok := member(m, "statusCode"); ok && !isNull(v) {
		text, ok := scalarText(v)
		code, err := strconv.Atoi(strings.TrimSpace(text))
		if !ok || err != nil || jsonKind(v) == "boolean" {
			return HTTPOutput{}, fmt.Errorf("http output: statusCode: want number or numeric string, got %s", bytes.TrimSpace(v))
		}
		if code < 100 || code > 999 {
			return HTTPOutput{}, fmt.Errorf("http output: statusCode: %d is not a valid HTTP status code", code)
		}
		out.StatusCode = code
	}
	if v, ok := member(m, "body"); ok {
		switch jsonKind(v) {
		case "object", "array":
			var buf bytes.Buffer
			if err := json.Indent(&buf, v, "", "  "); err != nil {
				return HTTPOutput{}, fmt.Errorf("http output: body: %w", err)
			}
			out.Body = buf.String()
		default:
			out.Body, _ = scalarText(v)
		}
	}
	if v, ok := member(m, "headers"); ok && !isNull(v) {
		if jsonKind(v) != "object" {
			return HTTPOutput{}, fmt.Errorf("http output: headers: want object of strings, got %s", jsonKind(v))
		}
		var hm map[string]json.RawMessage
		if err := json.Unmarshal(v, &hm); err != nil {
			return HTTPOutput{}, fmt.Errorf("http output: headers: %w", err)
		}
		out.Headers = make(map[string]string, len(hm))
		keys := make([]string, 0, len(hm))
		for hk := range hm {
			keys = append(keys, hk)
		}
		sort.Strings(keys)
		for _, hk := range keys {
			hv := hm[hk]
			text, ok := scalarText(hv)
			if !ok {
				// .NET ToString() of a JObject/JArray is its JSON text.
				text = string(bytes.TrimSpace(hv))
			}
			out.Headers[hk] = text
		}
	}
	return out, nil
}
