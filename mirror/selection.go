package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
)

// TopicSelection names mirrored topics in a request: by their names, or by
// a regular expression anchored like KAFKA_TOPICS_INCLUDE. In JSON it is a
// list of names (["a","b"]) or a string (a pattern; a plain name selects
// that topic and any other it happens to match as a pattern, so prefer a
// list for exact names).
type TopicSelection struct {
	Names   []string
	Pattern string
}

// ErrBadTopicSelection is returned (wrapped) by TopicSelection's
// UnmarshalJSON for JSON that is neither a list of names nor a string.
var ErrBadTopicSelection = errors.New(`want a list of topic names like ["prod.test1"] or a regular expression like "prod\\..*"`)

// UnmarshalJSON accepts a list of names or a pattern string.
func (s *TopicSelection) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err == nil {
		*s = TopicSelection{Names: names}
		return nil
	}
	var pattern string
	if err := json.Unmarshal(b, &pattern); err != nil {
		return ErrBadTopicSelection
	}
	*s = TopicSelection{Pattern: pattern}
	return nil
}

// MarshalJSON writes what UnmarshalJSON reads.
func (s TopicSelection) MarshalJSON() ([]byte, error) {
	if s.Pattern != "" {
		return json.Marshal(s.Pattern)
	}
	return json.Marshal(s.Names)
}

// Empty reports whether nothing was selected.
func (s TopicSelection) Empty() bool { return len(s.Names) == 0 && s.Pattern == "" }

// String renders the selection for logs and status.
func (s TopicSelection) String() string {
	if s.Pattern != "" {
		return s.Pattern
	}
	return strings.Join(s.Names, ",")
}

// Filter returns a filter matching the selection: the names exactly, or
// the pattern.
func (s TopicSelection) Filter() (TopicFilter, error) {
	if s.Pattern != "" {
		return CompileTopicFilter(s.Pattern, "")
	}
	quoted := make([]string, len(s.Names))
	for i, n := range s.Names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return CompileTopicFilter(strings.Join(quoted, "|"), "")
}

// SelectTopics returns the mirrored topics sel names, sorted, or an
// *InputError for field: an unknown name, a bad pattern, or a pattern that
// matches no mirrored topic.
func (m *Mirror) SelectTopics(ctx context.Context, field string, sel TopicSelection) ([]string, error) {
	if sel.Empty() {
		return nil, inputErr(field, "missing: name mirrored topics as a list, or a regular expression")
	}
	if sel.Pattern == "" {
		var out []string
		for _, name := range sel.Names {
			if _, err := m.mirroredTopic(ctx, field, name); err != nil {
				return nil, err
			}
			out = append(out, name)
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	f, err := sel.Filter()
	if err != nil {
		return nil, inputErr(field, "%v", err)
	}
	topics, err := m.selectTopics(ctx, &f)
	if err != nil {
		return nil, err
	}
	if len(topics) == 0 {
		return nil, inputErr(field, "%q matches no mirrored topic", sel.Pattern)
	}
	return topicNames(topics), nil
}
