package mirror

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrHeaderProperties is returned (wrapped) by [RecordFromEvent] when an
// event's kafka.header.* properties cannot be read back into headers: the
// event was altered, or was not written by this mirror.
var ErrHeaderProperties = errors.New("malformed header properties")

// Header property mapping (see docs/delivery.md, "What arrives in Event Hubs").
//
// A header name is escaped: '%', '#' and every byte that is not part of
// valid UTF-8 become %XX (two upper-case hex digits); every other character
// is kept. The first header of a name is kafka.header.ESC; the (N+1)th
// header of the same name is kafka.header.ESC#N (N >= 1, decimal). An
// escaped name has no '#', so the suffix is unambiguous.
//
// When the headers carry two or more different names, PropHeaderOrder
// records their order: the escaped name of every header, in order, joined
// by '#'. With a single name (or none) the #N suffixes give the order and
// the property is left out, so unique plain names read as they are.

// escapeHeaderName escapes a header name for a property name.
func escapeHeaderName(name string) string {
	clean := true
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		if name[i] == '%' || name[i] == '#' || (r == utf8.RuneError && n <= 1) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		if name[i] == '%' || name[i] == '#' || (r == utf8.RuneError && n <= 1) {
			fmt.Fprintf(&b, "%%%02X", name[i])
			i++
			continue
		}
		b.WriteString(name[i : i+n])
		i += n
	}
	return b.String()
}

// unescapeHeaderName reverses escapeHeaderName.
func unescapeHeaderName(esc string) (string, error) {
	if !strings.ContainsAny(esc, "%#") {
		return esc, nil
	}
	var b strings.Builder
	for i := 0; i < len(esc); i++ {
		switch esc[i] {
		case '#':
			return "", fmt.Errorf("%w: unescaped '#' in %q", ErrHeaderProperties, esc)
		case '%':
			if i+3 > len(esc) {
				return "", fmt.Errorf("%w: truncated escape in %q", ErrHeaderProperties, esc)
			}
			v, err := strconv.ParseUint(esc[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("%w: bad escape in %q", ErrHeaderProperties, esc)
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(esc[i])
		}
	}
	return b.String(), nil
}

// headerProperties adds the properties of headers hs to props.
func headerProperties(hs []Header, props map[string]any) {
	names, order := headerPropertyNames(hs)
	for i, h := range hs {
		props[names[i]] = h.Value
	}
	if order != "" {
		props[PropHeaderOrder] = order
	}
}

// headerPropertyNames returns the property name of each of hs and the
// value of PropHeaderOrder: "" when hs carry fewer than two names and the
// property is left out.
func headerPropertyNames(hs []Header) (names []string, order string) {
	seen := make(map[string]int, len(hs))
	escaped := make([]string, len(hs))
	names = make([]string, len(hs))
	for i, h := range hs {
		esc := escapeHeaderName(h.Key)
		escaped[i] = esc
		n := seen[h.Key]
		seen[h.Key] = n + 1
		names[i] = headerPropertyName(esc, n)
	}
	if len(seen) > 1 {
		order = strings.Join(escaped, "#")
	}
	return names, order
}

func headerPropertyName(esc string, n int) string {
	if n == 0 {
		return PropHeaderPrefix + esc
	}
	return PropHeaderPrefix + esc + "#" + strconv.Itoa(n)
}

// headersFromProperties reverses headerProperties.
func headersFromProperties(props map[string]any) ([]Header, error) {
	type indexed struct {
		esc string
		n   int
		val []byte
	}
	byProp := make(map[string][]byte)
	var hs []indexed
	for name, v := range props {
		rest, ok := strings.CutPrefix(name, PropHeaderPrefix)
		if !ok {
			continue
		}
		val, ok := v.([]byte)
		if !ok && v != nil {
			return nil, fmt.Errorf("%w: %s is a %T, want binary", ErrHeaderProperties, name, v)
		}
		byProp[name] = val
		esc, n := rest, 0
		if i := strings.LastIndexByte(rest, '#'); i >= 0 {
			k, err := strconv.Atoi(rest[i+1:])
			if err != nil || k < 1 || strconv.Itoa(k) != rest[i+1:] {
				return nil, fmt.Errorf("%w: bad repetition suffix in %q", ErrHeaderProperties, name)
			}
			esc, n = rest[:i], k
		}
		hs = append(hs, indexed{esc, n, val})
	}
	if order, ok := props[PropHeaderOrder]; ok {
		s, ok := order.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %s is a %T, want string", ErrHeaderProperties, PropHeaderOrder, order)
		}
		names := strings.Split(s, "#")
		if len(names) != len(byProp) {
			return nil, fmt.Errorf("%w: %s lists %d headers, the event has %d", ErrHeaderProperties, PropHeaderOrder, len(names), len(byProp))
		}
		out := make([]Header, 0, len(names))
		count := make(map[string]int, len(names))
		for _, esc := range names {
			n := count[esc]
			count[esc] = n + 1
			prop := headerPropertyName(esc, n)
			val, ok := byProp[prop]
			if !ok {
				return nil, fmt.Errorf("%w: %s names %s, which the event lacks", ErrHeaderProperties, PropHeaderOrder, prop)
			}
			key, err := unescapeHeaderName(esc)
			if err != nil {
				return nil, err
			}
			out = append(out, Header{Key: key, Value: val})
		}
		return out, nil
	}
	// One name (or none): the suffixes give the order. Events written
	// before the order property existed sort by name, then repetition.
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].esc != hs[j].esc {
			return hs[i].esc < hs[j].esc
		}
		return hs[i].n < hs[j].n
	})
	out := make([]Header, 0, len(hs))
	for _, h := range hs {
		key, err := unescapeHeaderName(h.esc)
		if err != nil {
			return nil, err
		}
		out = append(out, Header{Key: key, Value: h.val})
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
