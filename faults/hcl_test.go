package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// A small reader for the Terraform files of infra/ (HCL native syntax), so
// that scenario 9 can check what the module grants without the Terraform
// binary or an HCL dependency. It keeps the structure (blocks with labels,
// attributes) and each attribute's expression as source text; object
// literals can be read again as bodies. It understands comments (#, //,
// /* */), quoted strings with ${…} interpolation and escapes, heredocs, and
// nested brackets; that is all infra/*.tf uses.

// hclBody is a block body or an object literal.
type hclBody struct {
	// Attrs maps attribute names to their expression text, trimmed.
	Attrs  map[string]string
	Blocks []*hclBlock
}

// hclBlock is one block, e.g. resource "azurerm_role_assignment" "x" {…}.
type hclBlock struct {
	Type   string
	Labels []string
	Body   *hclBody
	File   string
}

// blocks returns the body's blocks of type typ whose labels start with
// labels.
func (b *hclBody) blocks(typ string, labels ...string) []*hclBlock {
	var out []*hclBlock
	for _, bl := range b.Blocks {
		if bl.Type != typ || len(bl.Labels) < len(labels) {
			continue
		}
		match := true
		for i, l := range labels {
			match = match && bl.Labels[i] == l
		}
		if match {
			out = append(out, bl)
		}
	}
	return out
}

// parseHCLDir parses every *.tf file of dir into one body.
func parseHCLDir(dir string) (*hclBody, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no .tf files in %s (%v)", dir, err)
	}
	sort.Strings(files)
	all := &hclBody{Attrs: map[string]string{}}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		body, err := parseHCL(string(src), false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, bl := range body.Blocks {
			bl.File = filepath.Base(f)
		}
		all.Blocks = append(all.Blocks, body.Blocks...)
	}
	return all, nil
}

// parseHCL parses a body; object is set for an object literal's contents
// (attributes may then be separated by commas, and keys may be quoted).
func parseHCL(src string, object bool) (*hclBody, error) {
	p := &hclParser{src: src}
	body, err := p.body(object)
	if err != nil {
		return nil, err
	}
	p.skipSpace(true)
	if p.pos < len(p.src) {
		return nil, p.errorf("unexpected %q", p.src[p.pos])
	}
	return body, nil
}

// parseObject parses an object literal expression ("{ … }").
func parseObject(expr string) (*hclBody, error) {
	expr = strings.TrimSpace(expr)
	if !strings.HasPrefix(expr, "{") || !strings.HasSuffix(expr, "}") {
		return nil, fmt.Errorf("not an object literal: %.60q", expr)
	}
	return parseHCL(expr[1:len(expr)-1], true)
}

// unquote returns the value of a plain quoted string literal (no
// interpolation), or false.
func unquote(expr string) (string, bool) {
	expr = strings.TrimSpace(expr)
	if len(expr) < 2 || expr[0] != '"' || expr[len(expr)-1] != '"' || strings.Contains(expr, "${") {
		return "", false
	}
	return strings.ReplaceAll(expr[1:len(expr)-1], `\"`, `"`), true
}

type hclParser struct {
	src string
	pos int
}

func (p *hclParser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:min(p.pos, len(p.src))], "\n")
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}

// skipSpace skips blanks and comments; newlines too when nl.
func (p *hclParser) skipSpace(nl bool) {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || (nl && c == '\n'):
			p.pos++
		case c == '#' || strings.HasPrefix(p.src[p.pos:], "//"):
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case strings.HasPrefix(p.src[p.pos:], "/*"):
			end := strings.Index(p.src[p.pos+2:], "*/")
			if end < 0 {
				p.pos = len(p.src)
				return
			}
			p.pos += end + 4
		default:
			return
		}
	}
}

func isIdent(c byte) bool {
	return c == '_' || c == '-' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func (p *hclParser) ident() string {
	start := p.pos
	for p.pos < len(p.src) && isIdent(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// body parses attributes and blocks up to a closing brace or the end.
func (p *hclParser) body(object bool) (*hclBody, error) {
	b := &hclBody{Attrs: map[string]string{}}
	for {
		p.skipSpace(true)
		if object {
			for p.pos < len(p.src) && p.src[p.pos] == ',' {
				p.pos++
				p.skipSpace(true)
			}
		}
		if p.pos >= len(p.src) || p.src[p.pos] == '}' {
			return b, nil
		}
		var name string
		if p.src[p.pos] == '"' {
			s, err := p.str()
			if err != nil {
				return nil, err
			}
			name, _ = unquote(s)
		} else {
			name = p.ident()
		}
		if name == "" {
			return nil, p.errorf("want a name, got %q", p.src[p.pos])
		}
		p.skipSpace(false)
		if p.pos < len(p.src) && (p.src[p.pos] == '=' || (object && p.src[p.pos] == ':')) && !strings.HasPrefix(p.src[p.pos:], "==") {
			p.pos++
			expr, err := p.expr(object)
			if err != nil {
				return nil, fmt.Errorf("attribute %s: %w", name, err)
			}
			b.Attrs[name] = strings.TrimSpace(expr)
			continue
		}
		bl := &hclBlock{Type: name}
		for {
			p.skipSpace(false)
			if p.pos >= len(p.src) {
				return nil, p.errorf("block %s: unexpected end", name)
			}
			if p.src[p.pos] == '{' {
				break
			}
			if p.src[p.pos] == '"' {
				s, err := p.str()
				if err != nil {
					return nil, err
				}
				l, _ := unquote(s)
				bl.Labels = append(bl.Labels, l)
				continue
			}
			l := p.ident()
			if l == "" {
				return nil, p.errorf("block %s: unexpected %q", name, p.src[p.pos])
			}
			bl.Labels = append(bl.Labels, l)
		}
		p.pos++ // {
		inner, err := p.body(false)
		if err != nil {
			return nil, fmt.Errorf("block %s %v: %w", name, bl.Labels, err)
		}
		if p.pos >= len(p.src) || p.src[p.pos] != '}' {
			return nil, p.errorf("block %s %v: no closing brace", name, bl.Labels)
		}
		p.pos++
		bl.Body = inner
		b.Blocks = append(b.Blocks, bl)
	}
}

// str reads a quoted string (with nested interpolations) and returns its
// source text.
func (p *hclParser) str() (string, error) {
	start := p.pos
	p.pos++ // opening quote
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == '\\':
			p.pos += 2
		case c == '"':
			p.pos++
			return p.src[start:p.pos], nil
		case strings.HasPrefix(p.src[p.pos:], "${") || strings.HasPrefix(p.src[p.pos:], "%{"):
			p.pos += 2
			if _, err := p.until('}'); err != nil {
				return "", err
			}
			p.pos++
		case c == '\n':
			return "", p.errorf("newline in a string")
		default:
			p.pos++
		}
	}
	return "", p.errorf("unterminated string")
}

// until reads an expression up to close at nesting depth 0.
func (p *hclParser) until(close byte) (string, error) {
	start := p.pos
	depth := 0
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '"':
			if _, err := p.str(); err != nil {
				return "", err
			}
			continue
		case c == '#' || strings.HasPrefix(p.src[p.pos:], "//") || strings.HasPrefix(p.src[p.pos:], "/*"):
			p.skipSpace(false)
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			if depth == 0 && c == close {
				return p.src[start:p.pos], nil
			}
			depth--
		}
		p.pos++
	}
	return "", p.errorf("no closing %q", close)
}

// expr reads an attribute's expression: up to the end of the line (or a
// comma in an object literal, or the enclosing closing brace) at nesting
// depth 0; heredocs run to their marker.
func (p *hclParser) expr(object bool) (string, error) {
	p.skipSpace(false)
	start := p.pos
	depth := 0
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '"':
			if _, err := p.str(); err != nil {
				return "", err
			}
			continue
		case strings.HasPrefix(p.src[p.pos:], "<<"):
			if err := p.heredoc(); err != nil {
				return "", err
			}
			continue
		case c == '#' || strings.HasPrefix(p.src[p.pos:], "//") || strings.HasPrefix(p.src[p.pos:], "/*"):
			if depth == 0 {
				expr := p.src[start:p.pos]
				p.skipSpace(false)
				return expr, nil
			}
			p.skipSpace(false)
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			if depth == 0 {
				return p.src[start:p.pos], nil
			}
			depth--
		case depth == 0 && (c == '\n' || (object && c == ',')):
			return p.src[start:p.pos], nil
		}
		p.pos++
	}
	return p.src[start:p.pos], nil
}

// heredoc skips a <<MARKER or <<-MARKER heredoc.
func (p *hclParser) heredoc() error {
	p.pos += 2
	if p.pos < len(p.src) && p.src[p.pos] == '-' {
		p.pos++
	}
	marker := p.ident()
	if marker == "" {
		return p.errorf("heredoc without a marker")
	}
	for {
		nl := strings.IndexByte(p.src[p.pos:], '\n')
		if nl < 0 {
			return p.errorf("unterminated heredoc %s", marker)
		}
		p.pos += nl + 1
		end := strings.IndexByte(p.src[p.pos:], '\n')
		if end < 0 {
			end = len(p.src) - p.pos
		}
		if strings.TrimSpace(p.src[p.pos:p.pos+end]) == marker {
			p.pos += end
			return nil
		}
	}
}
