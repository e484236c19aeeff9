package config

import "testing"

// TestGC: the memory limit follows the in-flight bound, is capped by the
// memory available, and neither is set when the user set it.
func TestGC(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	const mib = 1 << 20
	for _, c := range []struct {
		name                string
		env                 map[string]string
		inFlight, available int64
		limit               int64
		percent             int
	}{
		{"default bound", nil, 64 * mib, 0, 352 * mib, GCPercent},
		{"larger bound", nil, 256 * mib, 0, 1120 * mib, GCPercent},
		{"small plan", nil, 256 * mib, 1024 * mib, 768 * mib, GCPercent},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 64 * mib, 0, -1, GCPercent},
		{"GOGC set", map[string]string{"GOGC": "100"}, 64 * mib, 0, 352 * mib, -1},
		{"both set", map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, 64 * mib, 0, -1, -1},
	} {
		limit, percent := GC(env(c.env), c.inFlight, c.available)
		if limit != c.limit || percent != c.percent {
			t.Errorf("%s: limit %d MiB, percent %d; want %d MiB, %d", c.name, limit/mib, percent, c.limit/mib, c.percent)
		}
	}
}
