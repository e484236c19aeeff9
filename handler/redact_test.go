package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/internal/testpki"
)

// TestRedactsClientKey: the TLS client key and its password are redacted
// from output whole, JSON-quoted (line breaks as \n) and line by line.
func TestRedactsClientKey(t *testing.T) {
	key := string(testpki.NewCA(t, "CA").Client(t, "mirror").KeyPEM)
	env := map[string]string{config.KafkaTLSKeyPEM: key, config.KafkaTLSKeyPassword: "key-pa55word"}
	r := newRedactor(config.Secrets(func(k string) string { return env[k] }))
	quoted, _ := json.Marshal(key)
	lines := strings.Split(strings.TrimSpace(key), "\n")
	for _, s := range []string{
		"key " + key + " leaked",
		`{"key":` + string(quoted) + `}`,
		"one line: " + lines[1] + " leaked",
		"password key-pa55word leaked",
	} {
		out := r.Redact(s)
		if !strings.Contains(out, "[REDACTED]") || strings.Contains(out, "key-pa55word") {
			t.Errorf("Redact(%.40q) = %.80q", s, out)
		}
		for _, l := range lines[1 : len(lines)-1] {
			if len(l) >= 16 && strings.Contains(out, l) {
				t.Errorf("Redact(%.40q) left a line of the key: %.80q", s, out)
			}
		}
	}
}
