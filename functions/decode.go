package functions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// DecodeError reports a request body that does not have the shape the
// Functions host sends. Path names the offending field the way it appears
// in the JSON ("Data.req.Headers"); Problem says what is wrong with it.
// Its message is one line:
//
//	invocation body: Data.req.Headers: want object of string arrays, got string
type DecodeError struct {
	Path    string // dotted path of the field, empty for the whole body
	Problem string // what is wrong, e.g. "want object, got array"
}

// Error implements error.
func (e *DecodeError) Error() string {
	if e.Path == "" {
		return "invocation body: " + e.Problem
	}
	return "invocation body: " + e.Path + ": " + e.Problem
}

func decodeErr(path, format string, args ...any) error {
	return &DecodeError{Path: path, Problem: fmt.Sprintf(format, args...)}
}

// jsonKind names the JSON type of raw ("object", "array", "string",
// "number", "boolean", "null"), or "nothing" for an absent value.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// isNull reports whether raw is absent or the JSON literal null.
func isNull(raw json.RawMessage) bool {
	k := jsonKind(raw)
	return k == "nothing" || k == "null"
}

// object decodes raw as a JSON object of raw members.
func object(path string, raw json.RawMessage, want string) (map[string]json.RawMessage, error) {
	if k := jsonKind(raw); k != "object" {
		return nil, decodeErr(path, "want %s, got %s", want, k)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, decodeErr(path, "want %s: %v", want, err)
	}
	return m, nil
}

// member returns m[name], falling back to a case-insensitive match the way
// the host's JSON reader (Newtonsoft) matches property names. The fallback
// picks the alphabetically first of several case variants so the result
// does not depend on map order.
func member(m map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	var keys []string
	for k := range m {
		if strings.EqualFold(k, name) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, false
	}
	sort.Strings(keys)
	return m[keys[0]], true
}

// keyList renders the keys of m for an error message.
func keyList(m map[string]json.RawMessage) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, strconv.Quote(k))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// stringField decodes an optional string member; null and absent give "".
func stringField(path string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	if k := jsonKind(raw); k != "string" {
		return "", decodeErr(path, "want string, got %s", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", decodeErr(path, "want string: %v", err)
	}
	return s, nil
}

// boolField decodes an optional boolean member; null and absent give false.
func boolField(path string, raw json.RawMessage) (bool, error) {
	if isNull(raw) {
		return false, nil
	}
	if k := jsonKind(raw); k != "boolean" {
		return false, decodeErr(path, "want boolean, got %s", k)
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, decodeErr(path, "want boolean: %v", err)
	}
	return b, nil
}

// intField decodes an optional integer member; null and absent give 0.
func intField(path string, raw json.RawMessage) (int, error) {
	if isNull(raw) {
		return 0, nil
	}
	if k := jsonKind(raw); k != "number" {
		return 0, decodeErr(path, "want integer, got %s", k)
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	if err != nil {
		return 0, decodeErr(path, "want integer, got %s", bytes.TrimSpace(raw))
	}
	return n, nil
}

// scalarText renders a JSON scalar the way .NET's ToString() renders the
// corresponding value: strings as they are, numbers as written, booleans as
// True/False, null as "". ok is false for objects and arrays.
func scalarText(raw json.RawMessage) (string, bool) {
	switch jsonKind(raw) {
	case "nothing", "null":
		return "", true
	case "string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false
		}
		return s, true
	case "number":
		return string(bytes.TrimSpace(raw)), true
	case "boolean":
		if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("t")) {
			return "True", true
		}
		return "False", true
	default:
		return "", false
	}
}

// stringMap decodes an object whose members are strings. When scalars is
// true, numbers and booleans are accepted and rendered as text.
func stringMap(path string, raw json.RawMessage, want string, scalars bool) (map[string]string, error) {
	if isNull(raw) {
		return map[string]string{}, nil
	}
	m, err := object(path, raw, want)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		v := m[k]
		kind := jsonKind(v)
		if kind != "string" && kind != "null" && !(scalars && (kind == "number" || kind == "boolean")) {
			return nil, decodeErr(path, "want %s, %q is %s", want, k, article(kind))
		}
		s, ok := scalarText(v)
		if !ok {
			return nil, decodeErr(path, "want %s, %q is not valid", want, k)
		}
		out[k] = s
	}
	return out, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func article(kind string) string {
	switch kind {
	case "object", "array":
		return "an " + kind
	case "null":
		return "null"
	default:
		return "a " + kind
	}
}

// typeErrorProblem turns an encoding/json error into a short problem text.
func typeErrorProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s: want %s, got %s", te.Field, goTypeKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("want %s, got %s", goTypeKind(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

func goTypeKind(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr":
		return "object"
	default:
		return "number"
	}
}
