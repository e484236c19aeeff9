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

// Every link a problem carries (settings and problem kinds) names a page
// under docs/ and, when it has one, a heading of that page.
func TestProblemLinksResolve(t *testing.T) {
	var links []string
	for _, n := range append(Names(), "OTEL_EXPORTER_OTLP_*", "(clients)") {
		links = append(links, NewProblem(n, "x").Doc)
	}
	for _, kind := range []string{mirror.KindUnauthorized, mirror.KindHubMissing, mirror.KindThrottled, mirror.KindOversized, mirror.KindGap,
		mirror.KindRecreated, mirror.KindStalled, mirror.KindKafka, mirror.KindCertificate, mirror.KindBehind, mirror.KindPausedLong, mirror.KindError} {
		_, doc := mirror.Remedy(kind)
		links = append(links, doc)
	}
	links = append(links, UnknownSettings([]string{"MIRROR_X=1"})[0].Doc)
	for _, l := range links {
		rel, ok := strings.CutPrefix(l, mirror.DocsURL)
		if !ok {
			t.Errorf("link %q is not under %s", l, mirror.DocsURL)
			continue
		}
		page, anchor, _ := strings.Cut(rel, "#")
		text, err := os.ReadFile(filepath.Join("..", "docs", page))
		if err != nil {
			t.Errorf("link %q: %v", l, err)
			continue
		}
		if anchor != "" && !slices.Contains(headingAnchors(string(text)), anchor) {
			t.Errorf("link %q: no such heading in docs/%s", l, page)
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown page (lower case, punctuation but - and _ dropped, spaces as -).
func headingAnchors(text string) []string {
	var out []string
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
