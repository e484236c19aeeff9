package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/mirror"
)

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown page (lower case, punctuation but - and _ dropped, spaces as -,
// a repeated heading suffixed -1, -2, …).
func headingAnchors(text string) []string {
	var out []string
	seen := map[string]int{}
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			a += "-" + fmt.Sprint(n+1)
		} else {
			seen[a] = 0
		}
		out = append(out, a)
	}
	return out
}

// resolves reports whether a link (a path relative to the repository root,
// with an optional #anchor) names an existing file and, for Markdown, one
// of its headings.
func resolves(t *testing.T, rel string) bool {
	t.Helper()
	path, anchor, _ := strings.Cut(rel, "#")
	text, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return false
	}
	return anchor == "" || slices.Contains(headingAnchors(string(text)), anchor)
}

// TestDocLinksResolve: every relative link of the README and docs/ names a
// file that exists and, with an anchor, a heading of it (the split of the
// README moved sections between pages; issue 47).
func TestDocLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	n := 0
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			rel := target
			if !strings.HasPrefix(target, "#") {
				dir, _ := filepath.Rel(root, filepath.Dir(page))
				rel = filepath.ToSlash(filepath.Join(dir, target))
			} else {
				base, _ := filepath.Rel(root, page)
				rel = base + target
			}
			n++
			if !resolves(t, rel) {
				t.Errorf("%s: link %s does not resolve", filepath.Base(page), target)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d links found", n)
	}
}

// TestProblemLinksResolve: the link every problem carries (setting
// problems, unknown settings and each problem kind's remedy) names a page
// under docs/ and, with an anchor, one of its headings.
func TestProblemLinksResolve(t *testing.T) {
	var links []string
	for _, n := range append(config.Names(), "OTEL_EXPORTER_OTLP_*", "(clients)") {
		links = append(links, config.NewProblem(n, "x").Doc)
	}
	for _, kind := range []string{mirror.KindUnauthorized, mirror.KindHubMissing, mirror.KindThrottled, mirror.KindOversized, mirror.KindGap,
		mirror.KindRecreated, mirror.KindStalled, mirror.KindKafka, mirror.KindCertificate, mirror.KindBehind, mirror.KindPausedLong, mirror.KindError} {
		_, doc := mirror.Remedy(kind)
		links = append(links, doc)
	}
	links = append(links, config.UnknownSettings([]string{"MIRROR_X=1"})[0].Doc)
	for _, l := range links {
		rel, ok := strings.CutPrefix(l, mirror.DocsURL)
		if !ok {
			t.Errorf("link %q is not under %s", l, mirror.DocsURL)
			continue
		}
		if !resolves(t, "docs/"+rel) {
			t.Errorf("link %q does not resolve under docs/", l)
		}
	}
}
