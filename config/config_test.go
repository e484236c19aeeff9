package config

import (
	"strings"
	"testing"
	"time"
)

// valid is a complete, valid environment.
func valid() map[string]string {
	return map[string]string{
		KafkaBrokers:        "127.0.0.1:9092,broker-2:9093",
		MirrorSchedule:      "0 */1 * * * *",
		EventHubsConnection: "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true",
	}
}

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestLoadDefaults(t *testing.T) {
	s, problems := Load(getenv(valid()))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if s.KafkaGroup != DefaultGroup || s.Schedule != DefaultSchedule || s.Limits.MaxDuration != DefaultMaxDuration {
		t.Errorf("defaults not applied: %+v", s)
	}
	if !s.Topics.Match("prod.test1") || s.Topics.Match("dev.test1") || s.Topics.Match("__consumer_offsets") {
		t.Errorf("default topic filter wrong")
	}
	if s.KafkaSessionTimeout != DefaultKafkaSessionTimeout {
		t.Errorf("KafkaSessionTimeout %v, want %v", s.KafkaSessionTimeout, DefaultKafkaSessionTimeout)
	}
	if s.InFlightBytes != DefaultInFlightBytes || s.Partitioning != "hash" || s.GapPolicy != "fail" || s.OversizePolicy != "fail" {
		t.Errorf("policy defaults wrong: %+v", s)
	}
}

// TestEveryBadSettingIsReportedInOneLine sets each setting to a bad (or
// missing, or empty) value and expects exactly one problem that names it.
func TestEveryBadSettingIsReportedInOneLine(t *testing.T) {
	cases := []struct {
		setting, value string
		extra          map[string]string
	}{
		{KafkaBrokers, "", nil},
		{KafkaBrokers, " , ", nil},
		{KafkaBrokers, "localhost", nil},
		{KafkaBrokers, "host:99999", nil},
		{KafkaTopicsInclude, "prod.(", nil},
		{KafkaTopicsExclude, "[a-", nil},
		{KafkaStartOffset, "middle", nil},
		{KafkaSASLMechanism, "kerberos", nil},
		{KafkaSASLUsername, "", map[string]string{KafkaSASLMechanism: "plain", KafkaSASLPassword: "pw"}},
		{KafkaSASLPassword, "", map[string]string{KafkaSASLMechanism: "scram-sha-512", KafkaSASLUsername: "u"}},
		{KafkaSASLPassword, "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/p/)", map[string]string{KafkaSASLMechanism: "plain", KafkaSASLUsername: "u"}},
		{KafkaTLS, "yes please", nil},
		{KafkaTLSCAPEM, "not a pem", map[string]string{KafkaTLS: "true"}},
		{KafkaTLSCAPEM, "-----BEGIN CERTIFICATE-----", nil},
		{KafkaTLSSkipVerify, "maybe", nil},
		{KafkaTLSCertPEM, "not a pem", map[string]string{KafkaTLS: "true", KafkaTLSKeyPEM: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}},
		{KafkaTLSCertPEM, "-----BEGIN CERTIFICATE-----", map[string]string{KafkaTLSKeyPEM: "k"}},
		{KafkaTLSKeyPEM, "", map[string]string{KafkaTLS: "true", KafkaTLSCertPEM: "-----BEGIN CERTIFICATE-----"}},
		{KafkaTLSKeyPassword, "pw", map[string]string{KafkaTLS: "true"}},
		{EventHubsConnection, "Endpoint=https://x;Key=1", nil},
		{EventHubsConnection, "Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b;EntityPath=hub", nil},
		{EventHubsNamespace, "", map[string]string{EventHubsConnection: ""}},
		{EventHubsNamespace, "https://ns.servicebus.windows.net/", map[string]string{EventHubsConnection: ""}},
		{EventHubsConnection, "Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b", map[string]string{EventHubsNamespace: "ns.servicebus.windows.net"}},
		{MirrorSchedule, "every minute", nil},
		{MirrorSchedule, "", nil},
		{MirrorSchedule, "0 61 * * * *", nil},
		{WebsiteTimeZone, "Mars/Olympus_Mons", nil},
		{MirrorMaxRecords, "-5", nil},
		{MirrorMaxRecords, "lots", nil},
		{MirrorMaxBytes, "12 parsecs", nil},
		{MirrorMaxDuration, "0s", nil},
		{MirrorMaxDuration, "soon", nil},
		{MirrorInFlightBytes, "-1", nil},
		{MirrorPartitioning, "random", nil},
		{MirrorRoutes, "prod.*", nil},
		{MirrorRoutes, "(=>hub", nil},
		{MirrorGapPolicy, "ignore", nil},
		{MirrorOversizePolicy, "truncate", nil},
		{MirrorCatchUpDuration, "-1m", nil},
		{MirrorFollow, "sometimes", nil},
		{MirrorHTTPDeadline, "5m", nil},
		{MirrorHTTPDeadline, "soon", nil},
		{KafkaSessionTimeout, "5s", nil},
		{KafkaSessionTimeout, "31m", nil},
		{KafkaSessionTimeout, "long", nil},
	}
	for _, c := range cases {
		t.Run(c.setting+"="+c.value, func(t *testing.T) {
			env := valid()
			for k, v := range c.extra {
				env[k] = v
			}
			env[c.setting] = c.value
			_, problems := Load(getenv(env))
			if len(problems) != 1 {
				t.Fatalf("want exactly one problem, got %d: %v", len(problems), problems)
			}
			line := problems[0].String()
			if problems[0].Setting != c.setting || !strings.HasPrefix(line, c.setting+": ") {
				t.Errorf("problem does not name %s: %q", c.setting, line)
			}
			if strings.Contains(line, "\n") {
				t.Errorf("problem is not one line: %q", line)
			}
			if strings.Contains(line, "SAS_KEY_VALUE") || (c.setting == KafkaSASLPassword && c.value != "" && strings.Contains(line, c.value)) {
				t.Errorf("problem leaks a secret: %q", line)
			}
		})
	}
}

func TestSizesAndDurations(t *testing.T) {
	env := valid()
	env[MirrorMaxBytes] = "64MiB"
	env[MirrorMaxRecords] = "1_000_000"
	env[MirrorMaxDuration] = "90s"
	env[MirrorInFlightBytes] = "1GB"
	env[KafkaSessionTimeout] = "45s"
	s, problems := Load(getenv(env))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if s.KafkaSessionTimeout != 45*time.Second {
		t.Errorf("KafkaSessionTimeout parsed as %v, want 45s", s.KafkaSessionTimeout)
	}
	if s.Limits.MaxBytes != 64<<20 || s.Limits.MaxRecords != 1_000_000 || s.Limits.MaxDuration != 90*time.Second || s.InFlightBytes != 1<<30 {
		t.Errorf("parsed wrong: %+v", s.Limits)
	}
}

func TestSummaryRedactsSecrets(t *testing.T) {
	env := valid()
	env[KafkaSASLMechanism] = "plain"
	env[KafkaSASLUsername] = "mirror"
	env[KafkaSASLPassword] = "hunter2-very-secret"
	s, problems := Load(getenv(env))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	for k, v := range s.Summary() {
		for _, secret := range Secrets(getenv(env)) {
			if strings.Contains(v, secret) || strings.Contains(v, "SAS_KEY_VALUE") {
				t.Errorf("summary %s leaks a secret: %q", k, v)
			}
		}
	}
	if s.Summary()[KafkaSASLPassword] != "(set, redacted)" {
		t.Errorf("password not shown as set")
	}
}

func TestManagedIdentity(t *testing.T) {
	env := map[string]string{KafkaBrokers: "k:9092", MirrorSchedule: DefaultSchedule, EventHubsNamespace: "ns.servicebus.windows.net", EventHubsClientID: "00000000-0000-0000-0000-000000000001"}
	s, problems := Load(getenv(env))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if s.EventHubsNamespace != "ns.servicebus.windows.net" || s.EventHubsClientID == "" || s.EventHubsConnectionString != "" {
		t.Errorf("identity settings wrong: %+v", s)
	}
}

// FuzzLoad feeds arbitrary values to every setting: Load must never panic
// and every problem must be one line naming a setting.
func FuzzLoad(f *testing.F) {
	f.Add("127.0.0.1:9092", "prod\\..*", "4m", "64MiB", "hash", "a=>b")
	f.Add("", "(", "-1s", "x", "?", "=>")
	f.Add("h:1,h:2", "", "1h", "0", "preserve", "^prod\\.(.*)$=>m-$1;x=>y")
	f.Fuzz(func(t *testing.T, brokers, include, duration, size, partitioning, routes string) {
		env := valid()
		env[KafkaBrokers] = brokers
		env[KafkaTopicsInclude] = include
		env[MirrorMaxDuration] = duration
		env[MirrorMaxBytes] = size
		env[MirrorPartitioning] = partitioning
		env[MirrorRoutes] = routes
		_, problems := Load(getenv(env))
		for _, p := range problems {
			if p.Setting == "" || strings.Contains(p.String(), "SAS_KEY_VALUE") {
				t.Fatalf("bad problem %q", p)
			}
		}
	})
}

func TestCheckBudget(t *testing.T) {
	env := valid()
	env[MirrorMaxDuration] = "9m"
	s, _ := Load(getenv(env))
	if p := s.CheckBudget(10 * time.Minute); p == nil || p.Setting != MirrorMaxDuration || !strings.Contains(p.String(), "functionTimeout 10m0s") {
		t.Errorf("9m inside a 10m functionTimeout: %v", p)
	}
	if p := s.CheckBudget(30 * time.Minute); p != nil {
		t.Errorf("9m inside 30m: %v", p)
	}
	if p := s.CheckBudget(0); p != nil {
		t.Errorf("unbounded functionTimeout: %v", p)
	}
}

// Follow mode is on unless MIRROR_FOLLOW turns it off.
func TestFollowDefault(t *testing.T) {
	env := valid()
	s, problems := Load(func(k string) string { return env[k] })
	if len(problems) > 0 || !s.Follow {
		t.Fatalf("default: follow %t, problems %v; want true, none", s.Follow, problems)
	}
	env[MirrorFollow] = "false"
	if s, _ = Load(func(k string) string { return env[k] }); s.Follow {
		t.Fatal("MIRROR_FOLLOW=false left follow mode on")
	}
}
