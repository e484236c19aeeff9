package main

import (
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/kafka"
)

// TestKafkaAuthLine: the page's Kafka authentication line names the
// mechanism, the principal, the token's expiry and the last error, and
// nothing else of the credential.
func TestKafkaAuthLine(t *testing.T) {
	got := kafkaAuthLine(kafka.AuthStatus{Mechanism: "OAUTHBEARER", Principal: "mirror-client",
		TokenExpiry: time.Date(2026, 12, 3, 7, 55, 0, 0, time.FixedZone("CET", 3600)), LastError: "token endpoint: connection refused"})
	want := "OAUTHBEARER as mirror-client, token valid until 2026-12-03 06:55:00Z; last error: token endpoint: connection refused"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := kafkaAuthLine(kafka.AuthStatus{Mechanism: "PLAIN", Principal: "alice"}); got != "PLAIN as alice" {
		t.Fatalf("PLAIN: %q", got)
	}
}
