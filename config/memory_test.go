package config

import "testing"

// TestMemoryLimit: the limit follows the in-flight bound, is capped by the
// memory available, and is not set when the user set GOMEMLIMIT.
func TestMemoryLimit(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	const mib = 1 << 20
	for _, c := range []struct {
		name                string
		env                 map[string]string
		inFlight, available int64
		limit               int64
		ok                  bool
	}{
		{"default bound", nil, 64 * mib, 0, 640 * mib, true},
		{"larger bound", nil, 256 * mib, 0, 2176 * mib, true},
		{"small plan", nil, 256 * mib, 1024 * mib, 768 * mib, true},
		{"GOGC set", map[string]string{"GOGC": "200"}, 64 * mib, 0, 640 * mib, true},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 64 * mib, 0, 0, false},
	} {
		limit, ok := MemoryLimit(env(c.env), c.inFlight, c.available)
		if limit != c.limit || ok != c.ok {
			t.Errorf("%s: limit %d MiB, %v; want %d MiB, %v", c.name, limit/mib, ok, c.limit/mib, c.ok)
		}
	}
}
