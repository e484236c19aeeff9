package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/config"
)

// Scenario 8: bad input through the real binary. A handler started with a
// missing, empty or malformed setting keeps running and reports one line
// naming the setting, in every invocation (the Logs the host drops with the
// failed invocation), on stderr and in the status body. Malformed
// invocation payloads from the host and malformed catch-up bodies from
// clients get 400 with the reason, never a crash.

// unset marks a setting removed from the environment (as opposed to set to
// "").
const unset = "\x00unset"

// validSettings are settings that pass every check without contacting
// anything (the clients do no I/O before the first drain).
func validSettings() map[string]string {
	return map[string]string{
		"FUNCTIONS_WORKER_RUNTIME": "custom",
		config.KafkaBrokers:        "127.0.0.1:9",
		config.EventHubsConnection: "Endpoint=sb://127.0.0.1:9;SharedAccessKeyName=k;SharedAccessKey=c2V0dGluZ3MtdGVzdC1rZXk=;UseDevelopmentEmulator=true",
		config.MirrorSchedule:      "0 0 0 1 1 *",
	}
}

// settingCase is one bad configuration: the changes to validSettings and
// the setting the one-line problem must name.
type settingCase struct {
	name    string
	set     map[string]string // unset removes a setting
	setting string            // the problem line starts with "setting: "
	says    string            // and contains this
	// timerInError: the host cannot index MirrorTimer (its schedule does
	// not resolve to a valid NCRONTAB), as the real host.
	timerInError bool
}

// settingCases is a representative set, at least one per setting family:
// Kafka connection, topics, start offset, SASL, TLS (client certificates
// too), Event Hubs (key and
// identity), schedule, drain bounds, mapping, policies, catch-up.
func settingCases() []settingCase {
	kv := "@Microsoft.KeyVault(SecretUri=https://kv-ehmirror.vault.azure.net/secrets/kafka-sasl-password)"
	clientKey := "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"
	sasl := func(extra map[string]string) map[string]string {
		m := map[string]string{config.KafkaSASLMechanism: "plain", config.KafkaSASLUsername: "mirror", config.KafkaSASLPassword: "pw"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	return []settingCase{
		{name: "brokers missing", set: map[string]string{config.KafkaBrokers: unset}, setting: config.KafkaBrokers, says: "missing"},
		{name: "brokers empty", set: map[string]string{config.KafkaBrokers: ""}, setting: config.KafkaBrokers, says: "missing"},
		{name: "brokers blank", set: map[string]string{config.KafkaBrokers: "   "}, setting: config.KafkaBrokers, says: "missing"},
		{name: "broker without port", set: map[string]string{config.KafkaBrokers: "kafka.example.com"}, setting: config.KafkaBrokers, says: "is not host:port"},
		{name: "broker port out of range", set: map[string]string{config.KafkaBrokers: "127.0.0.1:9092,127.0.0.1:99999"}, setting: config.KafkaBrokers, says: "is not host:port"},
		{name: "include not a regexp", set: map[string]string{config.KafkaTopicsInclude: "prod.("}, setting: config.KafkaTopicsInclude, says: "not a valid regular expression"},
		{name: "exclude not a regexp", set: map[string]string{config.KafkaTopicsExclude: "[z-a]"}, setting: config.KafkaTopicsExclude, says: "not a valid regular expression"},
		{name: "start offset unknown", set: map[string]string{config.KafkaStartOffset: "beginning"}, setting: config.KafkaStartOffset, says: "unknown"},
		{name: "SASL mechanism unknown", set: map[string]string{config.KafkaSASLMechanism: "gssapi"}, setting: config.KafkaSASLMechanism, says: "unknown"},
		{name: "SASL user missing", set: sasl(map[string]string{config.KafkaSASLUsername: unset}), setting: config.KafkaSASLUsername, says: "missing"},
		{name: "SASL password empty", set: sasl(map[string]string{config.KafkaSASLPassword: ""}), setting: config.KafkaSASLPassword, says: "missing"},
		{name: "SASL password unresolved Key Vault reference", set: sasl(map[string]string{config.KafkaSASLPassword: kv}), setting: config.KafkaSASLPassword, says: "Key Vault reference"},
		{name: "TLS not a boolean", set: map[string]string{config.KafkaTLS: "sometimes"}, setting: config.KafkaTLS, says: "not a boolean"},
		{name: "TLS CA not PEM", set: map[string]string{config.KafkaTLS: "true", config.KafkaTLSCAPEM: "not a certificate"}, setting: config.KafkaTLSCAPEM, says: "no PEM certificate"},
		{name: "TLS CA without TLS", set: map[string]string{config.KafkaTLSCAPEM: "-----BEGIN CERTIFICATE-----"}, setting: config.KafkaTLSCAPEM, says: "is not true"},
		{name: "client certificate without TLS", set: map[string]string{config.KafkaTLSCertPEM: "-----BEGIN CERTIFICATE-----", config.KafkaTLSKeyPEM: clientKey}, setting: config.KafkaTLSCertPEM, says: "is not true"},
		{name: "client certificate not PEM", set: map[string]string{config.KafkaTLS: "true", config.KafkaTLSCertPEM: "not a certificate", config.KafkaTLSKeyPEM: clientKey}, setting: config.KafkaTLSCertPEM, says: "no PEM certificate"},
		{name: "client key without certificate", set: map[string]string{config.KafkaTLS: "true", config.KafkaTLSKeyPEM: clientKey}, setting: config.KafkaTLSCertPEM, says: "missing"},
		{name: "TLS skip-verify not a boolean", set: map[string]string{config.KafkaTLSSkipVerify: "maybe"}, setting: config.KafkaTLSSkipVerify, says: "not a boolean"},
		{name: "Event Hubs missing", set: map[string]string{config.EventHubsConnection: unset}, setting: config.EventHubsNamespace, says: "missing"},
		{name: "Event Hubs empty", set: map[string]string{config.EventHubsConnection: ""}, setting: config.EventHubsNamespace, says: "missing"},
		{name: "Event Hubs not a connection string", set: map[string]string{config.EventHubsConnection: "Server=tcp:ns.example.net;Key=abc"}, setting: config.EventHubsConnection, says: "not an Event Hubs connection string"},
		{name: "Event Hubs connection string names a hub", set: map[string]string{config.EventHubsConnection: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a2V5;EntityPath=prod.f1"}, setting: config.EventHubsConnection, says: "EntityPath"},
		{name: "Event Hubs namespace a URL", set: map[string]string{config.EventHubsConnection: unset, config.EventHubsNamespace: "https://ns.servicebus.windows.net/"}, setting: config.EventHubsNamespace, says: "is not a host name"},
		{name: "Event Hubs key and identity both", set: map[string]string{config.EventHubsNamespace: "ns.servicebus.windows.net"}, setting: config.EventHubsConnection, says: "set together"},
		{name: "schedule missing", set: map[string]string{config.MirrorSchedule: unset}, setting: config.MirrorSchedule, says: "missing", timerInError: true},
		{name: "schedule empty", set: map[string]string{config.MirrorSchedule: ""}, setting: config.MirrorSchedule, says: "missing", timerInError: true},
		{name: "schedule not NCRONTAB", set: map[string]string{config.MirrorSchedule: "every minute"}, setting: config.MirrorSchedule, says: "NCRONTAB", timerInError: true},
		{name: "schedule out of range", set: map[string]string{config.MirrorSchedule: "0 61 * * * *"}, setting: config.MirrorSchedule, says: "NCRONTAB", timerInError: true},
		{name: "max records negative", set: map[string]string{config.MirrorMaxRecords: "-5"}, setting: config.MirrorMaxRecords, says: "not a count"},
		{name: "max bytes unknown unit", set: map[string]string{config.MirrorMaxBytes: "1TB"}, setting: config.MirrorMaxBytes, says: "not a size"},
		{name: "max duration not a duration", set: map[string]string{config.MirrorMaxDuration: "soon"}, setting: config.MirrorMaxDuration, says: "not a positive duration"},
		{name: "max duration beyond functionTimeout", set: map[string]string{config.MirrorMaxDuration: "9m"}, setting: config.MirrorMaxDuration, says: "functionTimeout"},
		{name: "in-flight bytes not a size", set: map[string]string{config.MirrorInFlightBytes: "lots"}, setting: config.MirrorInFlightBytes, says: "not a size"},
		{name: "partitioning unknown", set: map[string]string{config.MirrorPartitioning: "random"}, setting: config.MirrorPartitioning, says: "unknown"},
		{name: "route not a regexp", set: map[string]string{config.MirrorRoutes: `prod\.(=>hub`}, setting: config.MirrorRoutes, says: "REGEX=>HUB"},
		{name: "gap policy unknown", set: map[string]string{config.MirrorGapPolicy: "skip"}, setting: config.MirrorGapPolicy, says: "unknown"},
		{name: "oversize policy unknown", set: map[string]string{config.MirrorOversizePolicy: "truncate"}, setting: config.MirrorOversizePolicy, says: "unknown"},
		{name: "catch-up duration zero", set: map[string]string{config.MirrorCatchUpDuration: "0s"}, setting: config.MirrorCatchUpDuration, says: "not a positive duration"},
	}
}

// settings returns validSettings changed by set.
func (c settingCase) settings() map[string]string {
	s := validSettings()
	for k, v := range c.set {
		if v == unset {
			delete(s, k)
			continue
		}
		s[k] = v
	}
	return s
}

// TestBadSettings (8a) starts the real handler once per bad configuration
// and checks, end to end, that the process keeps running and that the
// one-line problem naming the setting is in the MirrorTimer invocation (the
// Logs of the failed invocation), on stderr, and in the status body (503),
// and that a catch-up is refused (503) rather than started.
func TestBadSettings(t *testing.T) {
	f := newFigures(t, "8a", "every setting family missing, empty or malformed, through the real binary")
	cases := settingCases()
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				checkBadSetting(t, c)
			})
		}
	})
	f.note("%d configurations, each one problem line naming the setting in the invocation, on stderr and in /api/status; no process exited", len(cases))
}

// checkBadSetting runs one case.
func checkBadSetting(t *testing.T, c settingCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := startHandler(t, strings.ReplaceAll(c.name, " ", "-"), c.settings())
	pid := h.host.PID()
	prefix := "setting problem: " + c.setting + ": "
	oneLine := func(where, text string) {
		t.Helper()
		line := findLine(strings.Split(text, "\n"), prefix)
		if line == "" {
			t.Errorf("%s: no line %q...; got:\n%s", where, prefix, text)
			return
		}
		if !strings.Contains(line, c.says) {
			t.Errorf("%s: %q does not say %q", where, line, c.says)
		}
	}

	// Invocation.
	if errs := h.host.FunctionErrors(); c.timerInError {
		if errs[timerFunction] == nil {
			t.Errorf("the host indexed MirrorTimer with schedule %q", c.settings()[config.MirrorSchedule])
		}
	} else {
		res, err := h.invokeTimer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Succeeded() || res.Status != http.StatusInternalServerError {
			t.Errorf("timer: status %d, want a failed invocation (500)", res.Status)
		}
		oneLine("timer invocation", strings.Join(res.DroppedLogs, "\n"))
	}
	h.waitOutput(ctx, prefix, 5*time.Second)
	oneLine("stderr", h.out.Stderr())

	// Status: 503 with the problem, never a crash.
	code, raw, err := h.call(ctx, http.MethodGet, "/api/status", "", true)
	if err != nil {
		t.Fatal(err)
	}
	var st statusView
	if err := json.Unmarshal(raw, &st); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("status: %d %s (%v)", code, raw, err)
	}
	found := false
	for _, p := range st.Problems {
		if p.Setting == c.setting && strings.Contains(p.Message, c.says) && !strings.Contains(p.String(), "\n") {
			found = true
		}
	}
	if !found {
		t.Errorf("status problems %v do not name %s (%q)", st.Problems, c.setting, c.says)
	}

	// A catch-up is refused with the problems.
	code, raw, err = h.call(ctx, http.MethodPost, "/api/catchup", "", true)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(string(raw), c.setting) {
		t.Errorf("catch-up: %d %s, want 503 naming %s", code, raw, c.setting)
	}
	if !h.alive(pid) {
		t.Errorf("the handler process exited or was restarted: %v", h.host.Err())
	}
}

// badPayload is one malformed invocation body for a function.
type badPayload struct {
	function string
	body     string
	says     string // the 400's reason contains this
}

// badPayloads are invocation bodies the host would never send, and some it
// might send after a bug: not JSON, wrong shapes, wrong member types, too
// large, too deep, invalid UTF-8.
func badPayloads() []badPayload {
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	huge := `{"Data":{"timer":{"x":"` + strings.Repeat("x", 2<<20) + `"}}}`
	return []badPayload{
		{timerFunction, ``, "empty"},
		{timerFunction, `not json`, "not valid JSON"},
		{timerFunction, `{"Data":`, "not valid JSON"},
		{timerFunction, `[1,2,3]`, "want JSON object"},
		{timerFunction, `null`, "want JSON object"},
		{timerFunction, `"Data"`, "want JSON object"},
		{timerFunction, `{"Data":[]}`, "Data"},
		{timerFunction, `{"Data":{}}`, "timer"},
		{timerFunction, `{"Data":{"timer":"not an object"}}`, "Data.timer"},
		{timerFunction, `{"Data":{"timer":{"IsPastDue":"yes"}}}`, "IsPastDue"},
		{timerFunction, `{"Data":{"timer":{"ScheduleStatus":{"Last":"yesterday"}}}}`, "Last"},
		{timerFunction, `{"Data":{"timer":{"Schedule":{"AdjustForDST":7}}}}`, "AdjustForDST"},
		{timerFunction, "{\"Data\":{\"timer\":{\"IsPastDue\":\"\xff\xfe\"}}}", "IsPastDue"},
		{timerFunction, deep, "invocation body"},
		{timerFunction, huge, "larger than"},
		{catchUpFunction, `{"Data":{"req":"x"}}`, "Data.req"},
		{catchUpFunction, `{"Data":{"req":{"Headers":"x"}}}`, "Headers"},
		{catchUpFunction, `{"Data":{"req":{"Query":[1]}}}`, "Query"},
		{catchUpFunction, `{"Data":{"req":{"Body":5}}}`, "Body"},
		{catchUpFunction, `{"Data":{"req":{"Identities":{}}}}`, "Identities"},
		{statusFunction, `{"Data":{"req":{"Params":[]}}}`, "Params"},
		{statusFunction, `{"Metadata":{}}`, "Data"},
	}
}

// badCatchUpBodies are catch-up request bodies a client may send.
func badCatchUpBodies() []struct{ body, says string } {
	return []struct{ body, says string }{
		{`not json`, "body: malformed JSON"},
		{`[]`, "want a JSON object"},
		{`"prod"`, "want a JSON object"},
		{`{"topics":5}`, "topics: want a list of topic names"},
		{`{"topics":"prod.("}`, "topics"},
		{`{"max_duration":"soon"}`, "max_duration"},
		{`{"max_duration":"-1m"}`, "max_duration"},
		{`{"max_duration":"100h"}`, "exceeds MIRROR_CATCHUP_MAX_DURATION"},
		{`{"topic":"prod.f1"}`, "topic: unknown field"},
		{`{"topics":"prod.f1"} {"topics":"prod.f2"}`, "single JSON object"},
		{`{"topics":`, "body: malformed JSON"},
	}
}

// TestBadPayloads (8b) sends malformed invocation payloads straight to the
// handler (as a host would) and malformed catch-up bodies through the host's
// front end, to a handler mirroring a live world while records are produced
// and timer drains run between the bad requests. Each bad request gets 400
// with a one-line reason; the process never exits or restarts; no catch-up
// starts; and every record is mirrored.
func TestBadPayloads(t *testing.T) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, "8b", "malformed invocation payloads and catch-up bodies to a live handler (400, never a crash)")
	ctx := context.Background()
	h := e.startHandler("a", nil)
	pid := h.host.PID()
	p := e.startProducer(producerConfig{})

	payloads := badPayloads()
	for i, bp := range payloads {
		res, err := h.host.Invoke(ctx, bp.function, []byte(bp.body))
		if err != nil {
			t.Fatal(err)
		}
		reason := strings.Join(res.DroppedLogs, "\n")
		if res.Status != http.StatusBadRequest || !strings.Contains(reason, bp.says) || strings.Contains(reason, "\n") {
			t.Errorf("%s payload %.60q: status %d, reason %q; want 400 with one line containing %q", bp.function, bp.body, res.Status, reason, bp.says)
		}
		if i%5 == 4 {
			if res, err := h.timer(ctx, false); err != nil || !res.Succeeded() {
				t.Errorf("timer between bad payloads: %v %v", err, errOf(res))
			}
		}
	}
	bodies := badCatchUpBodies()
	for _, b := range bodies {
		code, cu, err := h.startCatchUp(ctx, b.body)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusBadRequest || !strings.Contains(cu.Error, b.says) || strings.Contains(cu.Error, "\n") {
			t.Errorf("catch-up body %q: %d %q; want 400 with one line containing %q", b.body, code, cu.Error, b.says)
		}
	}
	code, st, err := h.status(ctx, "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("status after the bad input: %d %v", code, err)
	}
	if len(st.CatchUps) != 0 {
		t.Errorf("a bad catch-up body started a run: %+v", st.CatchUps)
	}
	if !h.alive(pid) {
		t.Fatalf("the handler process exited or was restarted: %v\nstderr: %s", h.host.Err(), h.out.Stderr())
	}

	p.stop()
	h.settle(ctx)
	recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := e.verify(expectation{Records: recs})
	e.assert(f, v)
	f.note("%d malformed invocation payloads (not JSON, wrong shapes and types, 2 MiB, 100k-deep nesting, invalid UTF-8) and %d malformed catch-up bodies: each 400 with its reason; one process throughout", len(payloads), len(bodies))
}
