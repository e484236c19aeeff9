package funchost

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/ehmirror/ehmirror/functions"
)

// Route is an HTTP function's public route.
type Route struct {
	Function string
	// Methods are upper-case; empty means every method.
	Methods []string
	// Template is "/<routePrefix>/<route>", e.g. "/api/catchup".
	Template  string
	AuthLevel string
}

// segment is one "/"-separated part of a route template: a literal, or a
// {parameter} (optional "?", catch-all "*", default "=v", constraint ":c").
type segment struct {
	literal    string
	param      string
	optional   bool
	catchAll   bool
	def        string
	hasDef     bool
	constraint string
}

type compiledRoute struct {
	fn       *functions.Function
	route    Route
	methods  map[string]bool
	segments []segment
}

var guidRE = regexp.MustCompile(`^[{(]?[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}[)}]?$`)

// parseTemplate parses an ASP.NET-style route template (the subset
// function.json routes use: literals and whole-segment parameters).
func parseTemplate(template string) ([]segment, error) {
	var segs []segment
	parts := strings.Split(strings.Trim(template, "/"), "/")
	for i, p := range parts {
		if p == "" {
			if len(parts) == 1 {
				break
			}
			return nil, fmt.Errorf("route %q: empty segment", template)
		}
		if !strings.HasPrefix(p, "{") {
			if strings.ContainsAny(p, "{}") {
				return nil, fmt.Errorf("route %q: segment %q mixes text and parameters (not supported)", template, p)
			}
			segs = append(segs, segment{literal: p})
			continue
		}
		if !strings.HasSuffix(p, "}") || strings.Count(p, "{") != 1 {
			return nil, fmt.Errorf("route %q: segment %q: want a whole-segment {parameter}", template, p)
		}
		s := segment{}
		body := p[1 : len(p)-1]
		if strings.HasPrefix(body, "*") {
			s.catchAll = true
			body = strings.TrimLeft(body, "*")
			if i != len(parts)-1 {
				return nil, fmt.Errorf("route %q: catch-all %q must be the last segment", template, p)
			}
		}
		if strings.HasSuffix(body, "?") {
			s.optional = true
			body = strings.TrimSuffix(body, "?")
		}
		if name, def, ok := strings.Cut(body, "="); ok {
			body, s.def, s.hasDef = name, def, true
		}
		if name, c, ok := strings.Cut(body, ":"); ok {
			body, s.constraint = name, strings.ToLower(c)
		}
		if body == "" {
			return nil, fmt.Errorf("route %q: parameter without a name", template)
		}
		s.param = body
		segs = append(segs, s)
	}
	for i, s := range segs {
		if (s.optional || s.hasDef) && i != len(segs)-1 {
			return nil, fmt.Errorf("route %q: optional parameter {%s} must be the last segment", template, s.param)
		}
	}
	return segs, nil
}

func constraintOK(c, v string) bool {
	c, _, _ = strings.Cut(c, "(")
	switch c {
	case "int", "long":
		_, err := strconv.ParseInt(v, 10, 64)
		return err == nil
	case "bool":
		_, err := strconv.ParseBool(v)
		return err == nil
	case "alpha":
		for _, r := range v {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
		return v != ""
	case "guid":
		return guidRE.MatchString(v)
	case "double", "float", "decimal":
		_, err := strconv.ParseFloat(v, 64)
		return err == nil
	default:
		return true
	}
}

// match matches an escaped URL path; it returns the route parameters.
func (rt *compiledRoute) match(escapedPath string) (map[string]string, bool) {
	var parts []string
	for _, p := range strings.Split(strings.Trim(escapedPath, "/"), "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	params := map[string]string{}
	for i, s := range rt.segments {
		if s.catchAll {
			rest := strings.Join(parts[min(i, len(parts)):], "/")
			if v, err := url.PathUnescape(rest); err == nil {
				rest = v
			}
			if rest != "" || s.hasDef {
				if rest == "" {
					rest = s.def
				}
				params[s.param] = rest
			}
			return params, true
		}
		if i >= len(parts) {
			if !s.optional && !s.hasDef {
				return nil, false
			}
			if s.hasDef {
				params[s.param] = s.def
			}
			continue
		}
		v, err := url.PathUnescape(parts[i])
		if err != nil {
			return nil, false
		}
		if s.param == "" {
			if !strings.EqualFold(v, s.literal) {
				return nil, false
			}
			continue
		}
		if s.constraint != "" && !constraintOK(s.constraint, v) {
			return nil, false
		}
		params[s.param] = v
	}
	if len(parts) > len(rt.segments) {
		return nil, false
	}
	return params, true
}

// precedence orders routes like ASP.NET routing: per segment, literals
// before constrained parameters before parameters before optional ones
// before catch-alls.
func (rt *compiledRoute) precedence() string {
	var b strings.Builder
	for _, s := range rt.segments {
		switch {
		case s.param == "":
			b.WriteByte('1')
		case s.catchAll:
			b.WriteByte('5')
		case s.optional || s.hasDef:
			b.WriteByte('4')
		case s.constraint != "":
			b.WriteByte('2')
		default:
			b.WriteByte('3')
		}
	}
	return b.String()
}

func compileRoute(prefix string, fn *functions.Function) (*compiledRoute, error) {
	tr := fn.Trigger()
	template := "/" + strings.Trim(strings.Trim(prefix, "/")+"/"+tr.Route, "/")
	segs, err := parseTemplate(template)
	if err != nil {
		return nil, err
	}
	rt := &compiledRoute{fn: fn, segments: segs, route: Route{Function: fn.Name, Template: template, AuthLevel: tr.AuthLevel}}
	if len(tr.Methods) > 0 {
		rt.methods = map[string]bool{}
		for _, m := range tr.Methods {
			rt.methods[strings.ToUpper(m)] = true
			rt.route.Methods = append(rt.route.Methods, strings.ToUpper(m))
		}
	}
	return rt, nil
}
