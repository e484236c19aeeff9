package config

import (
	"strings"
	"testing"
)

// Every setting problem says what to do ("set X to …") and links to the
// documentation section about the setting, like the other problem kinds.
func TestSettingProblemsHaveRemedies(t *testing.T) {
	env := map[string]string{
		KafkaBrokers: "no-port", EventHubsConnection: "junk", MirrorMaxDuration: "soon", MirrorPartitioning: "random",
		MirrorSchedule: "x", KafkaSASLMechanism: "plain", KafkaTLSCAPEM: "x", MirrorFollow: "maybe",
		KafkaTopicsInclude: "(", MirrorMaxRecords: "-1", KafkaTLSCertPEM: "x", KafkaSASLPassword: "@Microsoft.KeyVault(x)",
	}
	_, ps := Load(func(k string) string { return env[k] })
	if len(ps) < 10 {
		t.Fatalf("%d problems: %v", len(ps), ps)
	}
	for _, p := range ps {
		if !strings.Contains(p.Remedy, "`"+p.Setting+"`") || !strings.Contains(p.Remedy, "restart the app") {
			t.Errorf("%s: remedy %q does not name the setting and what to do", p, p.Remedy)
		}
		if !strings.HasPrefix(p.Doc, "https://github.com/ehmirror/ehmirror/blob/main/docs/") {
			t.Errorf("%s: doc %q", p, p.Doc)
		}
	}
	if p := NewProblem("OTEL_EXPORTER_OTLP_*", "bad endpoint"); !strings.HasSuffix(p.Doc, "/operating.md#metrics") || !strings.HasPrefix(p.Remedy, "correct `OTEL_EXPORTER_OTLP_*`") {
		t.Errorf("metrics setting problem: %+v", p)
	}
	want := map[string]string{
		MirrorPartitioning: "set `MIRROR_PARTITIONING` to hash, kafka-murmur2, preserve or round-robin;",
		MirrorMaxDuration:  "set `MIRROR_MAX_DURATION` to a value such as 4m or 90s;",
		KafkaSASLUsername:  "set `KAFKA_SASL_USERNAME` (KAFKA_SASL_MECHANISM=plain needs a user name);",
		KafkaTLSCertPEM:    "remove `KAFKA_TLS_CERT_PEM`, or make it apply (KAFKA_TLS is not true",
	}
	docs := map[string]string{MirrorPartitioning: "/settings.md", KafkaTLSCertPEM: "/managed-kafka.md#client-certificates-mutual-tls", MirrorFollow: "/delivery.md#follow-mode-mirror_follow"}
	for _, p := range ps {
		if w, ok := want[p.Setting]; ok && !strings.HasPrefix(p.Remedy, w) {
			t.Errorf("%s: remedy %q, want it to start with %q", p.Setting, p.Remedy, w)
		}
		if d, ok := docs[p.Setting]; ok && !strings.HasSuffix(p.Doc, d) {
			t.Errorf("%s: doc %q, want %q", p.Setting, p.Doc, d)
		}
	}
}
