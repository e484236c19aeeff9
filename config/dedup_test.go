package config

import (
	"strings"
	"testing"
)

// TestDeduplicateSetting: MIRROR_DEDUPLICATE is off by default, parses as a
// boolean, and a bad value is one problem naming the setting.
func TestDeduplicateSetting(t *testing.T) {
	s, problems := Load(getenv(valid()))
	if len(problems) > 0 || s.Deduplicate {
		t.Fatalf("default: %v, problems %v", s.Deduplicate, problems)
	}
	env := valid()
	env[MirrorDeduplicate] = "true"
	if s, problems = Load(getenv(env)); len(problems) > 0 || !s.Deduplicate || s.Summary()[MirrorDeduplicate] != "true" {
		t.Fatalf("true: %v, problems %v", s.Deduplicate, problems)
	}
	env[MirrorDeduplicate] = "sometimes"
	if _, problems = Load(getenv(env)); len(problems) != 1 || !strings.Contains(problems[0].String(), MirrorDeduplicate) {
		t.Fatalf("bad value: problems %v", problems)
	}
}
