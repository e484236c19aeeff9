package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ehmirror/ehmirror/mirror"
)

// A misspelt setting is reported with the closest setting's name instead of
// being ignored silently (issue 47 item 2: the four names a user tried).
func TestUnknownSettingsNameTheClosestSetting(t *testing.T) {
	environ := []string{
		"MIRROR_MAX_DURATON=5m", "KAFKA_TOPIC_INCLUDE=orders", "KAFKA_GROUPS=g", "EHMIRROR_DEDUPLICATE=true",
		"kafka_brokers=b:9092", "MIRROR_SOMETHING_ELSE_ENTIRELY=1", "EVENTHUBS__credential=managedidentity",
		// Settings, other variables and the project's tool variables are not reported.
		"KAFKA_BROKERS=b:9092", "MIRROR_MAX_DURATION=4m", "CUTOVER_CONTAINER=c", "PATH=/bin", "HOME=/root",
		"EHMIRROR_SOAK=1", "FUNCTIONS_WORKER_RUNTIME=custom",
	}
	got := map[string]string{}
	for _, p := range UnknownSettings(environ) {
		got[p.Setting] = p.Message
		if !strings.Contains(p.Remedy, "`"+p.Setting+"`") || !strings.HasPrefix(p.Doc, mirror.DocsURL+"settings.md") {
			t.Errorf("%s: remedy %q doc %q", p.Setting, p.Remedy, p.Doc)
		}
		if strings.Contains(p.String()+p.Remedy, "managedidentity") || strings.Contains(p.String()+p.Remedy, "b:9092") {
			t.Errorf("%s: a value appears in %q", p.Setting, p.String())
		}
	}
	want := map[string]string{
		"MIRROR_MAX_DURATON":             "did you mean `MIRROR_MAX_DURATION`?",
		"KAFKA_TOPIC_INCLUDE":            "did you mean `KAFKA_TOPICS_INCLUDE`?",
		"KAFKA_GROUPS":                   "did you mean `KAFKA_GROUP`?",
		"EHMIRROR_DEDUPLICATE":           "did you mean `MIRROR_DEDUPLICATE`?",
		"kafka_brokers":                  "did you mean `KAFKA_BROKERS`?",
		"MIRROR_SOMETHING_ELSE_ENTIRELY": "is not a setting and is ignored",
		"EVENTHUBS__credential":          "is not a setting and is ignored",
	}
	for name, msg := range want {
		if !strings.HasSuffix(got[name], msg) {
			t.Errorf("%s: %q, want it to end with %q", name, got[name], msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("reported %v, want exactly %v", got, want)
	}
	if strings.Contains(got["MIRROR_SOMETHING_ELSE_ENTIRELY"], "did you mean") {
		t.Errorf("a far name got a suggestion: %q", got["MIRROR_SOMETHING_ELSE_ENTIRELY"])
	}
}

// Names is the settings of docs/settings.md and docs/cutover.md, row for
// row, and every Value of local.settings.json.example is one of them (or a
// host setting), so that UnknownSettings never reports a documented setting.
func TestNamesAreTheDocumentedSettings(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z_]+)` \\|")
	var documented []string
	for _, page := range []string{"settings.md", "cutover.md"} {
		text, err := os.ReadFile(filepath.Join("..", "docs", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range row.FindAllStringSubmatch(string(text), -1) {
			documented = append(documented, m[1])
		}
	}
	names := Names()
	for _, n := range names {
		if !slices.Contains(documented, n) {
			t.Errorf("setting %s is not in docs/settings.md or docs/cutover.md", n)
		}
	}
	for _, d := range documented {
		if !slices.Contains(names, d) {
			t.Errorf("docs name %s, which config.Names does not list", d)
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "local.settings.json.example"))
	if err != nil {
		t.Fatal(err)
	}
	var ls struct{ Values map[string]string }
	if err := json.Unmarshal(raw, &ls); err != nil {
		t.Fatal(err)
	}
	var environ []string
	for k := range ls.Values {
		environ = append(environ, k+"=x")
	}
	if u := UnknownSettings(environ); len(u) > 0 {
		t.Errorf("local.settings.json.example has names that are not settings: %v", u)
	}
}
