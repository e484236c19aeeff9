package mirror

import (
	"fmt"
	"regexp"
	"strings"
)

// Route renames topics into event hubs: a topic that matches Pattern goes to
// the hub named by expanding Hub with the match (regexp.Expand syntax: $1,
// ${name}). Several topics may share one hub.
type Route struct {
	Pattern *regexp.Regexp
	Hub     string
}

// ParseRoutes parses rules written as "REGEX=>TEMPLATE", separated by ";".
// An empty string means no rules: every topic goes to the hub of its own name.
func ParseRoutes(s string) ([]Route, error) {
	var routes []Route
	for _, rule := range strings.Split(s, ";") {
		rule = strings.TrimSpace(rule)
		if rule == "" {
			continue
		}
		pattern, hub, ok := strings.Cut(rule, "=>")
		pattern, hub = strings.TrimSpace(pattern), strings.TrimSpace(hub)
		if !ok || pattern == "" || hub == "" {
			return nil, fmt.Errorf("route %q: want REGEX=>HUB", rule)
		}
		re, err := regexp.Compile(anchor(pattern))
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", rule, err)
		}
		routes = append(routes, Route{Pattern: re, Hub: hub})
	}
	return routes, nil
}

// anchor makes a pattern match whole topic names.
func anchor(pattern string) string {
	if !strings.HasPrefix(pattern, "^") {
		pattern = "^(?:" + pattern + ")"
	}
	if !strings.HasSuffix(pattern, "$") {
		pattern += "$"
	}
	return pattern
}

// Router decides which event hub a topic is mirrored into.
type Router struct {
	routes []Route
}

// NewRouter returns a router applying the first matching route; topics that
// match no route go to the hub of the same name.
func NewRouter(routes []Route) *Router { return &Router{routes: routes} }

// Hub returns the event hub for topic.
func (r *Router) Hub(topic string) string {
	for _, route := range r.routes {
		m := route.Pattern.FindStringSubmatchIndex(topic)
		if m == nil {
			continue
		}
		return string(route.Pattern.ExpandString(nil, route.Hub, topic, m))
	}
	return topic
}

// TopicFilter selects the topics to mirror: those matching Include and not
// Exclude. Internal topics (names starting with "__") are never selected.
type TopicFilter struct {
	Include *regexp.Regexp
	Exclude *regexp.Regexp
}

// CompileTopicFilter compiles include and exclude patterns; each must match
// the whole topic name. An empty include selects every topic; an empty
// exclude excludes nothing.
func CompileTopicFilter(include, exclude string) (TopicFilter, error) {
	var f TopicFilter
	var err error
	if include != "" {
		if f.Include, err = regexp.Compile(anchor(include)); err != nil {
			return f, fmt.Errorf("include pattern: %w", err)
		}
	}
	if exclude != "" {
		if f.Exclude, err = regexp.Compile(anchor(exclude)); err != nil {
			return f, fmt.Errorf("exclude pattern: %w", err)
		}
	}
	return f, nil
}

// Match reports whether topic is selected.
func (f TopicFilter) Match(topic string) bool {
	if strings.HasPrefix(topic, "__") {
		return false
	}
	if f.Include != nil && !f.Include.MatchString(topic) {
		return false
	}
	return f.Exclude == nil || !f.Exclude.MatchString(topic)
}
