// Package config reads the mirror's settings from the environment (Azure
// Functions app settings, or the Values of local.settings.json) and checks
// each one. A bad setting never stops the process: [Load] returns every
// problem, one line each, naming the setting and what is expected.
package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/functions/ncrontab"
	"github.com/ehmirror/ehmirror/mirror"
)

// Setting names. Every one is listed, with its default and meaning, in the
// tables of docs/settings.md and in local.settings.json.example (Names lists
// them all).
const (
	KafkaBrokers        = "KAFKA_BROKERS"
	KafkaGroup          = "KAFKA_GROUP"
	KafkaTopicsInclude  = "KAFKA_TOPICS_INCLUDE"
	KafkaTopicsExclude  = "KAFKA_TOPICS_EXCLUDE"
	KafkaStartOffset    = "KAFKA_START_OFFSET"
	KafkaSASLMechanism  = "KAFKA_SASL_MECHANISM"
	KafkaSASLUsername   = "KAFKA_SASL_USERNAME"
	KafkaSASLPassword   = "KAFKA_SASL_PASSWORD"
	KafkaTLS            = "KAFKA_TLS"
	KafkaTLSCAPEM       = "KAFKA_TLS_CA_PEM"
	KafkaTLSSkipVerify  = "KAFKA_TLS_INSECURE_SKIP_VERIFY"
	KafkaTLSCertPEM     = "KAFKA_TLS_CERT_PEM"
	KafkaTLSKeyPEM      = "KAFKA_TLS_KEY_PEM"
	KafkaTLSKeyPassword = "KAFKA_TLS_KEY_PASSWORD"
	EventHubsConnection = "EVENTHUBS"
	EventHubsNamespace  = "EVENTHUBS__fullyQualifiedNamespace"
	EventHubsClientID   = "EVENTHUBS__clientId"
	MirrorSchedule      = "MIRROR_SCHEDULE"
	// WebsiteTimeZone is the platform setting the host evaluates
	// MIRROR_SCHEDULE in (IANA names on Linux).
	WebsiteTimeZone       = "WEBSITE_TIME_ZONE"
	MirrorMaxRecords      = "MIRROR_MAX_RECORDS"
	MirrorMaxBytes        = "MIRROR_MAX_BYTES"
	MirrorMaxDuration     = "MIRROR_MAX_DURATION"
	MirrorInFlightBytes   = "MIRROR_INFLIGHT_BYTES"
	MirrorPartitioning    = "MIRROR_PARTITIONING"
	MirrorRoutes          = "MIRROR_ROUTES"
	MirrorGapPolicy       = "MIRROR_GAP_POLICY"
	MirrorOversizePolicy  = "MIRROR_OVERSIZE_POLICY"
	MirrorCatchUpDuration = "MIRROR_CATCHUP_MAX_DURATION"
	MirrorDeduplicate     = "MIRROR_DEDUPLICATE"
	// MirrorFollow: a scheduled drain, once caught up, follows its
	// partitions until shortly before the next tick (issue 16).
	MirrorFollow = "MIRROR_FOLLOW"
)

// KafkaTLSCertWarnDays is how many days before the client certificate
// (KAFKA_TLS_CERT_PEM) expires the status reports it.
const KafkaTLSCertWarnDays = "KAFKA_TLS_CERT_WARN_DAYS"

// DefaultCertWarnDays is KAFKA_TLS_CERT_WARN_DAYS's default.
const DefaultCertWarnDays = 14

// MirrorMaxBacklogAge: when the oldest record not yet mirrored (of a
// topic that is not paused) is older, the status of every instance
// reports it.
const MirrorMaxBacklogAge = "MIRROR_MAX_BACKLOG_AGE"

// DefaultMaxBacklogAge is MIRROR_MAX_BACKLOG_AGE's default: two ticks of
// the default schedule.
const DefaultMaxBacklogAge = 2 * time.Minute

// MirrorMaxPauseAge: a topic paused for longer is a problem in the status
// and in the drain line (paused_age_ms), so a forgotten pause alerts; 0
// turns the check off.
const MirrorMaxPauseAge = "MIRROR_MAX_PAUSE_AGE"

// DefaultMaxPauseAge is MIRROR_MAX_PAUSE_AGE's default.
const DefaultMaxPauseAge = 24 * time.Hour

// MirrorHTTPDeadline caps the deadline of every HTTP route (status,
// metrics, offsets, pause, resume, cutover, catch-up start); unset, each route has
// its own default. The host never cancels a request to the handler and
// App Service cuts the caller at 230 s, so a deadline must be shorter:
// MaxHTTPDeadline.
const MirrorHTTPDeadline = "MIRROR_HTTP_DEADLINE"

// MaxHTTPDeadline bounds MIRROR_HTTP_DEADLINE, well under App Service's
// 230 s front-end limit.
const MaxHTTPDeadline = 200 * time.Second

// Defaults of the settings that have one.
const (
	DefaultGroup         = "ehmirror"
	DefaultTopicsInclude = `prod\..*`
	// DefaultSchedule is the schedule the examples and Terraform set; the
	// setting itself is required.
	DefaultSchedule        = "0 */1 * * * *"
	DefaultMaxDuration     = 4 * time.Minute
	DefaultCatchUpDuration = 10 * time.Minute
	DefaultInFlightBytes   = 64 << 20
)

// secretSettings never appear in logs, responses or errors.
var secretSettings = []string{KafkaSASLPassword, EventHubsConnection, KafkaTLSKeyPEM, KafkaTLSKeyPassword, CutoverStorage, KafkaOAuthClientSecret, KafkaAWSSecretAccessKey, KafkaAWSSessionToken}

// Problem is one invalid setting.
type Problem struct {
	Setting string `json:"setting"`
	Message string `json:"message"`
	// Remedy says what to do ("set X to …"); Doc links to the docs/ page
	// section about the setting (see NewProblem).
	Remedy string `json:"remedy,omitempty"`
	Doc    string `json:"doc,omitempty"`
}

// String is the problem in one line: "SETTING: what is wrong; what is expected".
func (p Problem) String() string { return p.Setting + ": " + p.Message }

// Problems is a list of setting problems; as an error it reads as one line.
type Problems []Problem

// Error joins the problems with "; ".
func (ps Problems) Error() string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return "invalid settings: " + strings.Join(parts, "; ")
}

// SASL holds Kafka SASL settings.
type SASL struct {
	// Mechanism is "" (none), "plain", "scram-sha-256", "scram-sha-512",
	// "oauthbearer" or "aws-msk-iam".
	Mechanism string
	Username  string
	Password  string
	// OAuth is set for oauthbearer, AWS for aws-msk-iam (config/sasl.go).
	OAuth *OAuth
	AWS   *AWS
}

// Settings are the validated settings.
type Settings struct {
	KafkaBrokers       []string
	KafkaGroup         string
	TopicsInclude      string
	TopicsExclude      string
	Topics             mirror.TopicFilter
	StartOffset        mirror.StartOffset
	SASL               SASL
	KafkaTLS           bool
	KafkaTLSCAPEM      string
	KafkaTLSSkipVerify bool
	// KafkaClientCert, when set, is presented to brokers that ask for a
	// client certificate (mutual TLS).
	KafkaClientCert *ClientCert
	// KafkaSessionTimeout is KAFKA_SESSION_TIMEOUT.
	KafkaSessionTimeout time.Duration
	// CertWarnDays is how many days before the client certificate
	// expires the status reports it (KAFKA_TLS_CERT_WARN_DAYS, default
	// DefaultCertWarnDays; 0 only flags an expired certificate).
	CertWarnDays int64
	// MaxBacklogAge is MIRROR_MAX_BACKLOG_AGE.
	MaxBacklogAge time.Duration
	// MaxPauseAge is MIRROR_MAX_PAUSE_AGE; 0 turns the check off.
	MaxPauseAge time.Duration
	// HTTPDeadline is MIRROR_HTTP_DEADLINE; 0 leaves each route its own
	// default.
	HTTPDeadline time.Duration

	// EventHubsConnectionString is set for key-based access; otherwise
	// EventHubsNamespace (and optionally EventHubsClientID, a user-assigned
	// identity) select Microsoft Entra ID.
	EventHubsConnectionString string
	EventHubsNamespace        string
	EventHubsClientID         string

	Schedule string
	// ScheduleZone is WEBSITE_TIME_ZONE, where the host evaluates the
	// schedule; UTC when unset.
	ScheduleZone       *time.Location
	Limits             mirror.Limits
	InFlightBytes      int64
	Partitioning       mirror.Partitioning
	RoutesText         string
	Routes             []mirror.Route
	GapPolicy          mirror.GapPolicy
	OversizePolicy     mirror.OversizePolicy
	CatchUpMaxDuration time.Duration
	// Deduplicate turns on reconciliation after an unclean end
	// (MIRROR_DEDUPLICATE, default false: it needs the Listen right).
	Deduplicate bool
	// Follow: scheduled drains follow their partitions once caught up.
	Follow bool
}

// Load reads and checks every setting through getenv. It returns the
// settings and every problem found; the settings are usable only when there
// are no problems.
func Load(getenv func(string) string) (Settings, Problems) {
	l := loader{getenv: getenv}
	var s Settings

	s.KafkaBrokers = l.brokers(KafkaBrokers)
	s.KafkaGroup = l.text(KafkaGroup, DefaultGroup)
	s.TopicsInclude = l.text(KafkaTopicsInclude, DefaultTopicsInclude)
	s.TopicsExclude = l.text(KafkaTopicsExclude, "")
	if f, err := mirror.CompileTopicFilter(s.TopicsInclude, ""); err != nil {
		l.problem(KafkaTopicsInclude, "not a valid regular expression: %v", unwrapRegexp(err))
	} else {
		s.Topics.Include = f.Include
	}
	if f, err := mirror.CompileTopicFilter("", s.TopicsExclude); err != nil {
		l.problem(KafkaTopicsExclude, "not a valid regular expression: %v", unwrapRegexp(err))
	} else {
		s.Topics.Exclude = f.Exclude
	}
	s.StartOffset = mirror.StartOffset(l.choice(KafkaStartOffset, "earliest", "earliest", "latest"))

	s.SASL.Mechanism = l.choice(KafkaSASLMechanism, "none", "none", "plain", "scram-sha-256", "scram-sha-512", MechanismOAuthBearer, MechanismAWSMSKIAM)
	if s.SASL.Mechanism == "none" {
		s.SASL.Mechanism = ""
	}
	s.SASL.Username = l.text(KafkaSASLUsername, "")
	s.SASL.Password = l.secret(KafkaSASLPassword)
	l.saslExtra(&s.SASL)
	if s.SASL.Mechanism != "" && s.SASL.OAuth == nil && s.SASL.AWS == nil {
		if s.SASL.Username == "" {
			l.problem(KafkaSASLUsername, "missing; %s=%s needs a user name", KafkaSASLMechanism, s.SASL.Mechanism)
		}
		if s.SASL.Password == "" && !l.has(KafkaSASLPassword) {
			l.problem(KafkaSASLPassword, "missing; %s=%s needs a password", KafkaSASLMechanism, s.SASL.Mechanism)
		}
	}
	s.KafkaSessionTimeout = l.kafkaSessionTimeout()
	s.KafkaTLS = l.boolean(KafkaTLS, false)
	s.KafkaTLSCAPEM = l.text(KafkaTLSCAPEM, "")
	s.KafkaTLSSkipVerify = l.boolean(KafkaTLSSkipVerify, false)
	if s.KafkaTLSCAPEM != "" {
		if !s.KafkaTLS {
			l.problem(KafkaTLSCAPEM, "set, but %s is not true", KafkaTLS)
		} else if !x509.NewCertPool().AppendCertsFromPEM([]byte(s.KafkaTLSCAPEM)) {
			l.problem(KafkaTLSCAPEM, "holds no PEM certificate")
		}
	}
	s.KafkaClientCert = l.clientCert(s.KafkaTLS)
	s.CertWarnDays = DefaultCertWarnDays
	if l.has(KafkaTLSCertWarnDays) {
		s.CertWarnDays = l.count(KafkaTLSCertWarnDays)
	}

	s.EventHubsConnectionString = l.secret(EventHubsConnection)
	s.EventHubsNamespace = l.text(EventHubsNamespace, "")
	s.EventHubsClientID = l.text(EventHubsClientID, "")
	switch {
	case s.EventHubsConnectionString != "" && s.EventHubsNamespace != "":
		l.problem(EventHubsConnection, "set together with %s; set one: a connection string, or the namespace for Microsoft Entra ID", EventHubsNamespace)
	case s.EventHubsConnectionString == "" && s.EventHubsNamespace == "" && !l.has(EventHubsConnection):
		l.problem(EventHubsNamespace, "missing; set it to the namespace host (NAME.servicebus.windows.net) for managed identity, or set %s to a connection string", EventHubsConnection)
	case s.EventHubsConnectionString != "":
		if !strings.HasPrefix(s.EventHubsConnectionString, "Endpoint=sb://") || !strings.Contains(s.EventHubsConnectionString, "SharedAccessKey") {
			l.problem(EventHubsConnection, "not an Event Hubs connection string; want Endpoint=sb://HOST/;SharedAccessKeyName=NAME;SharedAccessKey=KEY")
		} else if strings.Contains(s.EventHubsConnectionString, "EntityPath=") {
			l.problem(EventHubsConnection, "names one event hub (EntityPath); use a namespace-level connection string")
		}
	case s.EventHubsNamespace != "":
		if strings.Contains(s.EventHubsNamespace, "://") || strings.ContainsAny(s.EventHubsNamespace, "/; ") {
			l.problem(EventHubsNamespace, "%q is not a host name; want NAME.servicebus.windows.net", s.EventHubsNamespace)
		}
	}

	// The host, not the handler, reads the schedule (%MIRROR_SCHEDULE% in
	// MirrorTimer/function.json) and has no default: unset, the timer is
	// never scheduled and nothing is mirrored. So it is required here too.
	s.Schedule = l.text(MirrorSchedule, "")
	if s.Schedule == "" {
		l.problem(MirrorSchedule, "missing; the Functions host cannot schedule MirrorTimer without it; want an NCRONTAB expression such as %q", DefaultSchedule)
	} else if _, err := ncrontab.Parse(s.Schedule); err != nil {
		l.problem(MirrorSchedule, "%q: %v; want an NCRONTAB expression with 6 fields, e.g. %q", s.Schedule, err, DefaultSchedule)
	}
	s.ScheduleZone = l.zone(WebsiteTimeZone)
	s.Limits.MaxRecords = l.count(MirrorMaxRecords)
	s.Limits.MaxBytes = l.size(MirrorMaxBytes, 0)
	s.Limits.MaxDuration = l.duration(MirrorMaxDuration, DefaultMaxDuration)
	s.InFlightBytes = l.size(MirrorInFlightBytes, DefaultInFlightBytes)
	if s.InFlightBytes == 0 {
		s.InFlightBytes = DefaultInFlightBytes
	}
	p, err := mirror.ParsePartitioning(l.text(MirrorPartitioning, ""))
	if err != nil {
		l.problem(MirrorPartitioning, "%q unknown; want hash, kafka-murmur2, preserve or round-robin", l.getenv(MirrorPartitioning))
	}
	s.Partitioning = p
	s.RoutesText = l.text(MirrorRoutes, "")
	if s.Routes, err = mirror.ParseRoutes(s.RoutesText); err != nil {
		l.problem(MirrorRoutes, "%v; want rules REGEX=>HUB separated by ';'", unwrapRegexp(err))
	}
	s.GapPolicy = mirror.GapPolicy(l.choice(MirrorGapPolicy, "fail", "fail", "resume-earliest"))
	s.OversizePolicy = mirror.OversizePolicy(l.choice(MirrorOversizePolicy, "fail", "fail", "skip"))
	s.CatchUpMaxDuration = l.duration(MirrorCatchUpDuration, DefaultCatchUpDuration)
	s.MaxBacklogAge = l.duration(MirrorMaxBacklogAge, DefaultMaxBacklogAge)
	s.MaxPauseAge = l.durationOrZero(MirrorMaxPauseAge, DefaultMaxPauseAge)
	s.HTTPDeadline = l.durationOrZero(MirrorHTTPDeadline, 0)
	if s.HTTPDeadline > MaxHTTPDeadline {
		l.problem(MirrorHTTPDeadline, "%s exceeds %s: App Service cuts the caller at 230 s while the handler runs on", s.HTTPDeadline, MaxHTTPDeadline)
		s.HTTPDeadline = 0
	}
	s.Deduplicate = l.boolean(MirrorDeduplicate, false)
	s.Follow = l.boolean(MirrorFollow, true)
	return s, l.problems
}

// KafkaTLSConfig returns the TLS configuration for Kafka, or nil for
// plaintext. Certificates are verified against the system roots, or the
// given CA, unless KAFKA_TLS_INSECURE_SKIP_VERIFY is true. A client
// certificate, when set, is presented to brokers that ask for one.
func (s Settings) KafkaTLSConfig() (*tls.Config, error) {
	if !s.KafkaTLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.KafkaTLSSkipVerify}
	if s.KafkaTLSCAPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(s.KafkaTLSCAPEM)) {
			return nil, fmt.Errorf("%s holds no PEM certificate", KafkaTLSCAPEM)
		}
		cfg.RootCAs = pool
	}
	if s.KafkaClientCert != nil {
		s.KafkaClientCert.Apply(cfg)
	}
	return cfg, nil
}

// Summary is the configuration with every secret redacted, for the status
// endpoint and start-up logs.
func (s Settings) Summary() map[string]string {
	redact := func(v string) string {
		if v == "" {
			return ""
		}
		return "(set, redacted)"
	}
	clientCert, clientKey := "", ""
	if s.KafkaClientCert != nil {
		clientCert, clientKey = s.KafkaClientCert.String(), "set"
	}
	eventHubs := "managed identity"
	if s.EventHubsConnectionString != "" {
		eventHubs = "connection string " + redact(s.EventHubsConnectionString)
	}
	out := map[string]string{
		KafkaBrokers:          strings.Join(s.KafkaBrokers, ","),
		KafkaGroup:            s.KafkaGroup,
		KafkaTopicsInclude:    s.TopicsInclude,
		KafkaTopicsExclude:    s.TopicsExclude,
		KafkaStartOffset:      string(s.StartOffset),
		KafkaSASLMechanism:    orNone(s.SASL.Mechanism),
		KafkaSASLUsername:     s.SASL.Username,
		KafkaSASLPassword:     redact(s.SASL.Password),
		KafkaTLS:              strconv.FormatBool(s.KafkaTLS),
		KafkaTLSSkipVerify:    strconv.FormatBool(s.KafkaTLSSkipVerify),
		KafkaTLSCertPEM:       clientCert,
		KafkaTLSKeyPEM:        redact(clientKey),
		KafkaTLSCertWarnDays:  strconv.FormatInt(s.CertWarnDays, 10),
		KafkaSessionTimeout:   s.KafkaSessionTimeout.String(),
		"eventhubs.auth":      eventHubs,
		EventHubsNamespace:    s.EventHubsNamespace,
		EventHubsClientID:     s.EventHubsClientID,
		MirrorSchedule:        s.Schedule,
		WebsiteTimeZone:       s.ScheduleZone.String(),
		MirrorMaxRecords:      strconv.FormatInt(s.Limits.MaxRecords, 10),
		MirrorMaxBytes:        strconv.FormatInt(s.Limits.MaxBytes, 10),
		MirrorMaxDuration:     s.Limits.MaxDuration.String(),
		MirrorFollow:          strconv.FormatBool(s.Follow),
		MirrorInFlightBytes:   strconv.FormatInt(s.InFlightBytes, 10),
		MirrorPartitioning:    string(s.Partitioning),
		MirrorRoutes:          s.RoutesText,
		MirrorGapPolicy:       string(s.GapPolicy),
		MirrorOversizePolicy:  string(s.OversizePolicy),
		MirrorCatchUpDuration: s.CatchUpMaxDuration.String(),
		MirrorMaxBacklogAge:   s.MaxBacklogAge.String(),
		MirrorMaxPauseAge:     s.MaxPauseAge.String(),
		MirrorHTTPDeadline:    s.HTTPDeadline.String(),
		MirrorDeduplicate:     strconv.FormatBool(s.Deduplicate),
	}
	maps.Copy(out, s.SASL.saslSummary(redact))
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Secrets returns the secret values present in the environment, so callers
// can keep them out of output. For a PEM private key it also returns the
// key with its line breaks as \n (the form it takes in quoted text) and
// each line of its base64 body, so that no part of the key shows either.
func Secrets(getenv func(string) string) []string {
	var out []string
	for _, name := range secretSettings {
		v := getenv(name)
		if v == "" {
			continue
		}
		out = append(out, v)
		if name != KafkaTLSKeyPEM {
			continue
		}
		v = pemValue(strings.TrimSpace(v))
		out = append(out, v, strings.ReplaceAll(v, "\n", `\n`), strings.ReplaceAll(v, "\n", "\r\n"))
		for _, line := range strings.Split(v, "\n") {
			line = strings.TrimSpace(line)
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && !strings.Contains(line, ":") {
				out = append(out, line)
			}
		}
	}
	return out
}

// CheckBudget reports a drain duration that is not well inside the host's
// functionTimeout (at most 80% of it), since a timed-out invocation makes
// the host kill the whole handler. A zero functionTimeout means unbounded.
func (s Settings) CheckBudget(functionTimeout time.Duration) *Problem {
	if functionTimeout <= 0 {
		return nil
	}
	limit := functionTimeout * 8 / 10
	if s.Limits.MaxDuration > limit {
		p := NewProblem(MirrorMaxDuration, fmt.Sprintf("%s is not well inside functionTimeout %s from host.json; keep it at most %s", s.Limits.MaxDuration, functionTimeout, limit))
		return &p
	}
	return nil
}
