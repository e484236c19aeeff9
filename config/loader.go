package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// keyVaultPrefix starts an app setting the platform failed to resolve.
const keyVaultPrefix = "@Microsoft.KeyVault("

// loader reads settings and collects problems.
type loader struct {
	getenv   func(string) string
	problems Problems
}

func (l *loader) problem(setting, format string, args ...any) {
	l.problems = append(l.problems, NewProblem(setting, fmt.Sprintf(format, args...)))
}

func (l *loader) has(name string) bool { return l.getenv(name) != "" }

// raw returns a trimmed value, reporting unresolved Key Vault references.
func (l *loader) raw(name string) (string, bool) {
	v := strings.TrimSpace(l.getenv(name))
	if strings.HasPrefix(v, keyVaultPrefix) {
		l.problem(name, "is a Key Vault reference the platform could not resolve; grant the app's identity 'Key Vault Secrets User' on the vault and check the secret URI")
		return "", false
	}
	return v, v != ""
}

func (l *loader) text(name, def string) string {
	if v, ok := l.raw(name); ok {
		return v
	}
	return def
}

func (l *loader) secret(name string) string {
	v, _ := l.raw(name)
	return v
}

func (l *loader) choice(name, def string, allowed ...string) string {
	v, ok := l.raw(name)
	if !ok {
		return def
	}
	v = strings.ToLower(v)
	if !slices.Contains(allowed, v) {
		l.problem(name, "%q unknown; want one of %s", v, strings.Join(allowed, ", "))
		return def
	}
	return v
}

func (l *loader) boolean(name string, def bool) bool {
	v, ok := l.raw(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		l.problem(name, "%q is not a boolean; want true or false", v)
		return def
	}
	return b
}

// zone reads an IANA time zone name; unset is UTC.
func (l *loader) zone(name string) *time.Location {
	v, ok := l.raw(name)
	if !ok {
		return time.UTC
	}
	loc, err := time.LoadLocation(v)
	if err != nil {
		l.problem(name, "%q is not an IANA time zone name; want e.g. Europe/Berlin (the Linux host takes IANA names)", v)
		return time.UTC
	}
	return loc
}

func (l *loader) count(name string) int64 {
	v, ok := l.raw(name)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 64)
	if err != nil || n < 0 {
		l.problem(name, "%q is not a count; want a whole number >= 0 (0 means no bound)", v)
		return 0
	}
	return n
}

// size parses a byte count with an optional KiB/MiB/GiB (or KB/MB/GB) suffix.
func (l *loader) size(name string, def int64) int64 {
	v, ok := l.raw(name)
	if !ok {
		return def
	}
	n, err := ParseSize(v)
	if err != nil {
		l.problem(name, "%q is not a size; want bytes, optionally with KiB, MiB or GiB (0 means no bound)", v)
		return def
	}
	return n
}

func (l *loader) duration(name string, def time.Duration) time.Duration {
	v, ok := l.raw(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		l.problem(name, "%q is not a positive duration; want for example 4m or 90s", v)
		return def
	}
	return d
}

// durationOrZero is duration where "0" turns a check off.
func (l *loader) durationOrZero(name string, def time.Duration) time.Duration {
	if v, ok := l.raw(name); ok && strings.TrimSpace(v) == "0" {
		return 0
	}
	return l.duration(name, def)
}

func (l *loader) brokers(name string) []string {
	v, ok := l.raw(name)
	if !ok {
		l.problem(name, "missing; want a comma-separated list of host:port, e.g. 127.0.0.1:9092")
		return nil
	}
	var out []string
	for _, b := range strings.Split(v, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		host, port, err := net.SplitHostPort(b)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p <= 0 || p > 65535 {
			l.problem(name, "%q is not host:port; want a comma-separated list of host:port, e.g. 127.0.0.1:9092", b)
			return nil
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		l.problem(name, "empty; want a comma-separated list of host:port, e.g. 127.0.0.1:9092")
	}
	return out
}

// ParseSize parses a byte count such as "1048576", "64MiB" or "1GB" (the
// decimal-looking suffixes are read as powers of 1024, like Kafka does).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	upper := strings.ToUpper(s)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(upper, u.suffix) {
			mult = u.mult
			s = strings.TrimSpace(s[:len(s)-len(u.suffix)])
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want a whole number of bytes with an optional KiB, MiB or GiB suffix", s)
	}
	return n * mult, nil
}

// unwrapRegexp shortens regexp errors to their message.
func unwrapRegexp(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
