// Package docs_test checks that the README and the pages under docs/ can
// be followed as written: every command they show names a make target,
// make variable, script and flag that exists (TestDocCommandsExist), and a
// newcomer's walk through the README works end to end with the real
// commands (TestReadmeWalkthrough).
package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// docPages returns the README and every page under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, pages...)
}

// command is one command line found in a page.
type command struct {
	page string
	line string
}

func (c command) String() string { return filepath.Base(c.page) + ": " + c.line }

// shellLines returns the command lines of a page: the lines of its sh (or
// unlabelled) code blocks, with continuations joined and comments cut, and
// its inline code spans that start with make, go run, go test or a script.
func shellLines(page, text string) []command {
	var out []command
	inBlock, shell := false, false
	var pending string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			if !inBlock {
				lang := strings.TrimSpace(strings.TrimPrefix(line, "```"))
				inBlock, shell = true, lang == "" || lang == "sh" || lang == "bash"
			} else {
				inBlock = false
			}
			continue
		}
		if inBlock && shell {
			l := pending + strings.TrimSpace(cutComment(line))
			if cont, ok := strings.CutSuffix(l, `\`); ok {
				pending = strings.TrimSpace(cont) + " "
				continue
			}
			pending = ""
			if l != "" {
				out = append(out, command{page, l})
			}
			continue
		}
		for _, m := range inlineCommand.FindAllStringSubmatch(line, -1) {
			out = append(out, command{page, m[1]})
		}
	}
	return out
}

// inlineCommand matches an inline code span holding a command.
var inlineCommand = regexp.MustCompile("`((?:make |go run |go test |bash scripts/|\\./scripts/[\\w/-]+\\.sh|scripts/[\\w/-]+\\.sh)[^`]*)`")

// cutComment drops a shell comment (" #" outside quotes) from a line.
func cutComment(line string) string {
	quote := rune(0)
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' '):
			return line[:i]
		}
	}
	return line
}

// words splits a command line into words, honouring quotes, and drops
// leading VAR=value environment assignments.
func words(line string) []string {
	var out []string
	var cur strings.Builder
	quote, in := rune(0), false
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	for len(out) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(out[0]) {
		out = out[1:]
	}
	return out
}

// makefile is what the Makefile defines: its targets and variables.
type makefile struct {
	targets, variables []string
}

func readMakefile(t *testing.T) makefile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var mk makefile
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(raw), -1) {
		mk.targets = append(mk.targets, m[1])
	}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)\s*[?:]?=`).FindAllStringSubmatch(string(raw), -1) {
		mk.variables = append(mk.variables, m[1])
	}
	// Variables the Makefile's recipes read from the environment.
	for _, m := range regexp.MustCompile(`\$\(([A-Z_]+)\)|\$\$([A-Z_]+)`).FindAllStringSubmatch(string(raw), -1) {
		mk.variables = append(mk.variables, m[1]+m[2])
	}
	return mk
}

// scriptFlags returns the flags a command under scripts/ defines: the
// names given to a flag.FlagSet in its Go files and in the module
// packages those files import (such as verify/kafkaconn's connection
// flags).
func scriptFlags(t *testing.T, dir string) []string {
	t.Helper()
	define := regexp.MustCompile(`\.(?:String|Int|Int64|Bool|Duration|Float64|Uint64|Uint|Func|Text)(?:Var)?\(\s*(?:&?[\w.\[\]]+,\s*)?"([\w.-]+)"`)
	imports := regexp.MustCompile(`"github.com/ehmirror/ehmirror/([\w/]+)"`)
	var flags []string
	seen := map[string]bool{}
	var scan func(dir string, depth int)
	scan = func(dir string, depth int) {
		if seen[dir] {
			return
		}
		seen[dir] = true
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range define.FindAllStringSubmatch(string(raw), -1) {
				flags = append(flags, m[1])
			}
			if depth > 0 {
				for _, m := range imports.FindAllStringSubmatch(string(raw), -1) {
					scan(filepath.Join(root, m[1]), depth-1)
				}
			}
		}
	}
	scan(dir, 1)
	return append(flags, "h", "help")
}

// routes returns the HTTP routes of the functions (function.json).
func routes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`"route":\s*"([^"]+)"`).FindSubmatch(raw); m != nil {
			out = append(out, string(m[1]))
		}
	}
	return out
}

// TestDocCommandsExist: every command the README and docs/ show names
// something that exists: a make target and make variables, a command under
// scripts/ and its flags, a Go package for go test, a script file, and for
// curl an /api route of the function app (issue 47: "every command keeps
// working as written").
func TestDocCommandsExist(t *testing.T) {
	mk := readMakefile(t)
	apiRoutes := routes(t)
	flagsOf := map[string][]string{}
	checked := 0
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range shellLines(page, string(raw)) {
			for _, part := range strings.Split(c.line, "&&") {
				if err := checkCommand(t, words(part), mk, apiRoutes, flagsOf); err != nil {
					t.Errorf("%s: %v", c, err)
				}
				checked++
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d commands found in the README and docs/: the extraction broke", checked)
	}
}

// checkCommand checks one command's words.
func checkCommand(t *testing.T, w []string, mk makefile, apiRoutes []string, flagsOf map[string][]string) error {
	if len(w) == 0 {
		return nil
	}
	switch {
	case w[0] == "make":
		for _, arg := range w[1:] {
			if name, _, ok := strings.Cut(arg, "="); ok {
				if !slices.Contains(mk.variables, name) {
					return fmt.Errorf("make variable %s is not in the Makefile", name)
				}
				continue
			}
			if !slices.Contains(mk.targets, arg) {
				return fmt.Errorf("make target %q is not in the Makefile", arg)
			}
		}
	case len(w) >= 3 && w[0] == "go" && w[1] == "run":
		pkg := w[2]
		if !strings.HasPrefix(pkg, "./scripts/") && !strings.HasPrefix(pkg, "./faults/") {
			return nil
		}
		dir := filepath.Join(root, pkg)
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("%s does not exist", pkg)
		}
		if _, ok := flagsOf[dir]; !ok {
			flagsOf[dir] = scriptFlags(t, dir)
		}
		for _, arg := range w[3:] {
			name, ok := strings.CutPrefix(arg, "-")
			if !ok || name == "" || strings.HasPrefix(name, "1") || regexp.MustCompile(`^\d`).MatchString(name) {
				continue // a value (such as -1 of "-idle -1"), not a flag
			}
			name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
			if !slices.Contains(flagsOf[dir], name) {
				return fmt.Errorf("%s has no flag -%s", pkg, name)
			}
		}
	case len(w) >= 2 && w[0] == "go" && w[1] == "test":
		for _, arg := range w[2:] {
			if strings.HasPrefix(arg, "./") {
				if _, err := os.Stat(filepath.Join(root, strings.TrimSuffix(strings.TrimSuffix(arg, "..."), "/"))); err != nil {
					return fmt.Errorf("package %s does not exist", arg)
				}
			}
		}
	case w[0] == "bash" && len(w) > 1, strings.HasPrefix(w[0], "scripts/"), strings.HasPrefix(w[0], "./scripts/"):
		file := w[0]
		if w[0] == "bash" {
			file = w[1]
		}
		if _, err := os.Stat(filepath.Join(root, file)); err != nil {
			return fmt.Errorf("%s does not exist", file)
		}
	case w[0] == "curl":
		for _, arg := range w[1:] {
			if i := strings.Index(arg, "/api/"); i >= 0 && strings.Contains(arg, "://") {
				route := arg[i+len("/api/"):]
				route, _, _ = strings.Cut(route, "?")
				if !slices.Contains(apiRoutes, route) {
					return fmt.Errorf("no function answers /api/%s", route)
				}
			}
		}
	}
	return nil
}
