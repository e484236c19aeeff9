package main

import (
	"io"
	"strings"
)

// redactor replaces secret values (passwords, keys, connection strings and
// the keys inside them) with "[REDACTED]" in text bound for logs and
// responses.
type redactor struct {
	r *strings.Replacer
}

// newRedactor redacts each secret, and the SharedAccessKey inside a
// connection string on its own.
func newRedactor(secrets []string) *redactor {
	var pairs []string
	for _, s := range secrets {
		pairs = append(pairs, s, "[REDACTED]")
		for _, part := range strings.Split(s, ";") {
			if k, v, ok := strings.Cut(part, "="); ok && strings.EqualFold(k, "SharedAccessKey") && len(v) >= 4 {
				pairs = append(pairs, v, "[REDACTED]")
			}
		}
	}
	return &redactor{r: strings.NewReplacer(pairs...)}
}

// Redact returns s without secrets.
func (r *redactor) Redact(s string) string { return r.r.Replace(s) }

// Writer returns a writer that redacts what it writes to w. Each Write must
// hold whole lines, as log handlers write them.
func (r *redactor) Writer(w io.Writer) io.Writer { return redactingWriter{r: r, w: w} }

type redactingWriter struct {
	r *redactor
	w io.Writer
}

func (rw redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(rw.w, rw.r.Redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
