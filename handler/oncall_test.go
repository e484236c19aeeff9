package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/funchost"
)

// The on-call sequences: the status JSON, the page in headless chromium
// and /api/metrics through the real handler while Event Hubs or Kafka
// refuse connections and after they come back, with a wrong key from the
// start, with a paused topic holding a backlog, and with two instances of
// which only one drains.

// freeAddr returns a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newRestartableWorld is a world whose Kafka and Event Hubs can be stopped
// (connections refused) and started again on the same ports with their
// data.
func newRestartableWorld(t *testing.T) *world {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	p, _ := strconv.Atoi(port)
	return newWorldOn(t, freeAddr(t), t.TempDir(), kfake.Ports(p), kfake.DataDir(t.TempDir()))
}

// stopEventHubs closes the emulator: connections to it are refused.
func (w *world) stopEventHubs(t *testing.T) {
	t.Helper()
	w.emuConfig.Listen = w.emu.Addr()
	if err := w.emu.Close(); err != nil {
		t.Fatal(err)
	}
}

// startEventHubs starts the emulator again where it was, with its events.
func (w *world) startEventHubs(t *testing.T) {
	t.Helper()
	emu, err := emulator.Start(context.Background(), w.emuConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	w.emu = emu
}

// stopKafka closes the cluster: connections to it are refused.
func (w *world) stopKafka() { w.cluster.Close() }

// startKafka starts the cluster again on its port with its data.
func (w *world) startKafka(t *testing.T) {
	t.Helper()
	c, err := kfake.NewCluster(w.kafkaOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w.cluster = c
}

// waitFor polls the status at url until ok says so, failing with what
// after within.
func waitFor(t *testing.T, url string, within time.Duration, what string, ok func(map[string]any) bool) (map[string]any, string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, st, raw := call(t, "GET", url, "")
		if ok(st) {
			return st, raw
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// sinceOf is a cause's since.
func sinceOf(t *testing.T, c map[string]any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(c["since"]))
	if err != nil {
		t.Fatalf("since: %v", err)
	}
	return at
}

// causes returns the status's causes.
func causes(st map[string]any) []map[string]any {
	h, _ := st["health"].(map[string]any)
	cs, _ := h["causes"].([]any)
	out := make([]map[string]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.(map[string]any))
	}
	return out
}

// metricValues returns the samples of /api/metrics whose line starts with
// prefix (a name with its labels), by line.
func metricValues(t *testing.T, url, prefix string) map[string]float64 {
	t.Helper()
	code, _, raw := call(t, "GET", url, "")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d %s", code, raw)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(raw, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// metric returns the one sample named exactly series (with its labels).
func metric(t *testing.T, url, series string) float64 {
	t.Helper()
	v, ok := metricValues(t, url, series)[series]
	if !ok {
		t.Fatalf("no %s in /api/metrics", series)
	}
	return v
}

// problemsSection is the Problems list of a rendered page.
func problemsSection(dom string) string {
	i := strings.Index(dom, `<ul class="problems causes" id="problems">`)
	if i < 0 {
		return ""
	}
	j := strings.Index(dom[i:], "</ul>")
	return dom[i : i+j]
}

// screenshot writes the page at url to EHMIRROR_SCREENSHOT when set (the
// picture in docs/status-page.png: make status-page-png).
func screenshot(t *testing.T, bin, url string) {
	t.Helper()
	if shot := os.Getenv("EHMIRROR_SCREENSHOT"); shot != "" {
		headless(t, bin, url, "--screenshot="+shot, "--window-size=1280,1500")
		t.Logf("screenshot written to %s", shot)
	}
}

// startRestartable starts the handler under the local host, with no timer
// drain, in front of a restartable world holding records records, and
// checks that it is OK; it returns the browser, the world, the front end
// and the function key.
func startRestartable(t *testing.T, records int) (string, *world, *httptest.Server, string) {
	t.Helper()
	bin := browser(t)
	app := buildApp(t)
	w := newRestartableWorld(t)
	w.produce(t, records)
	settings := w.settings()
	settings["MIRROR_SCHEDULE"] = "0 0 0 1 1 *" // no timer drain in the test
	h, front := startHost(t, app, settings, &capture{})
	key := h.Keys().DefaultKey()
	if _, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, ""); st["ok"] != true {
		t.Fatalf("not OK before the outage: %s", raw)
	}
	return bin, w, front, key
}

// Event Hubs refuses connections while a catch-up has records to send, and
// comes back: one headline (Event Hubs unreachable, connection refused, on
// all 5 hubs) with its own remedy and each error text once, a "since" that
// stays put, no ETA but "not moving since", the page in chromium and the
// metrics saying the same; once the sends are acknowledged again the
// status is OK as soon as the lag is 0, and the last delivery is the
// acknowledgement's time.
func TestOnCallEventHubsRefusedThenBack(t *testing.T) {
	bin, w, front, key := startRestartable(t, 300)
	statusURL := front.URL + "/api/status?code=" + key
	metricsURL := front.URL + "/api/metrics?code=" + key

	w.stopEventHubs(t)
	down := time.Now()
	if code, _, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, `{"max_duration":"2m"}`); code != http.StatusAccepted {
		t.Fatalf("catch-up: %d %s", code, raw)
	}
	st, raw := waitStatus(t, statusURL, false, 30*time.Second, "the status stayed OK with Event Hubs refusing connections")
	t.Logf("red %s after Event Hubs went down", time.Since(down).Round(100*time.Millisecond))
	// Every hub's sends fail within LiveFailureAfter of one another; the
	// readiness check that found every hub ready before serves 5 s.
	st, raw = waitFor(t, statusURL, 20*time.Second, "the sends to every hub did not fail", func(st map[string]any) bool {
		cs := causes(st)
		ready, _ := st["readiness"].(map[string]any)
		return len(cs) > 0 && cs[0]["hubs"] == 5.0 && strings.Contains(fmt.Sprint(ready["summary"]), "0 of 5 hubs")
	})
	cs := causes(st)
	if len(cs) != 1 || cs[0]["kind"] != "eventhubs" || cs[0]["network"] != "connection refused" || len(cs[0]["details"].([]any)) != 1 {
		t.Fatalf("want one cause, eventhubs, connection refused, one error text: %s", raw)
	}
	reason := fmt.Sprint(st["reason"])
	if !regexp.MustCompile("^Event Hubs `127\\.0\\.0\\.1:\\d+` unreachable \\(connection refused\\) on all 5 hubs since \\d\\d:\\d\\d:\\d\\dZ — 300 records waiting, oldest \\d+ (s|ms)").MatchString(reason) {
		t.Errorf("reason %q: want the headline with the backlog: %s", reason, raw)
	}
	if remedy := fmt.Sprint(cs[0]["remedy"]); !strings.Contains(remedy, "refuses connections") {
		t.Errorf("remedy %q is not the one for a refused connection", remedy)
	}
	backlog, _ := st["backlog"].(map[string]any)
	if backlog["not_moving"] != true || backlog["eta_ns"] != nil || !strings.Contains(fmt.Sprint(backlog["summary"]), "not moving") {
		t.Errorf("backlog while nothing moves: %v", backlog)
	}
	if ready, _ := st["readiness"].(map[string]any); strings.Count(fmt.Sprint(ready["summary"]), "connection refused") != 1 {
		t.Errorf("readiness %q: want the 5 hubs refused with the error text once", ready["summary"])
	}
	since := cs[0]["since"]

	// The page: the headline, the remedy, the details folded, each error
	// text once.
	pageURL := front.URL + "/api/status?format=html&code=" + key
	dom := string(headless(t, bin, pageURL, "--dump-dom"))
	probs := problemsSection(dom)
	if !strings.Contains(dom, "NOT MIRRORING") || !strings.Contains(probs, `<span class="headline">Event Hubs `) || !strings.Contains(probs, `<details class="more">`) {
		t.Errorf("the page does not show the headline with folded details:\n%s", probs)
	}
	if n := strings.Count(probs, `<li class="cause"`); n != 1 {
		t.Errorf("%d causes on the page, want 1", n)
	}
	for _, d := range cs[0]["details"].([]any) {
		text := strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(fmt.Sprint(d), "&", "&amp;"), "<", "&lt;"), ">", "&gt;")
		if n := strings.Count(probs, text); n != 1 {
			t.Errorf("error text shown %d times in the problems, want once: %s", n, d)
		}
	}
	if !strings.Contains(dom, `class="backlog problem stuck"`) {
		t.Error("the backlog is not shown as stuck")
	}
	screenshot(t, bin, pageURL)

	// The metrics say the same, and keep the lag.
	if metric(t, metricsURL, "ehmirror_ok") != 0 || metric(t, metricsURL, "ehmirror_up") != 1 || metric(t, metricsURL, `ehmirror_problems{kind="eventhubs"}`) < 1 {
		t.Error("the metrics do not show the outage")
	}
	if n := len(metricValues(t, metricsURL, "ehmirror_lag{")); n != 20 {
		t.Errorf("%d lag series, want 20", n)
	}

	time.Sleep(2 * time.Second)
	st, raw = waitStatus(t, statusURL, false, time.Second, "the status turned OK while Event Hubs was down")
	// The same root cause keeps its since; it may only move earlier, to
	// the first failed send, once that send's outage counts.
	if cs := causes(st); len(cs) != 1 || sinceOf(t, cs[0]).After(sinceOf(t, map[string]any{"since": since})) {
		t.Errorf("the cause's since moved from %v: %s", since, raw)
	}

	w.startEventHubs(t)
	back := time.Now()
	var zeroAt time.Time
	for {
		_, st, raw = call(t, "GET", statusURL, "")
		lag, _ := st["lag"].(map[string]any)
		if lag != nil && lag["total"] == 0.0 && zeroAt.IsZero() {
			zeroAt = time.Now()
		}
		if st["ok"] == true && !zeroAt.IsZero() {
			break
		}
		if !zeroAt.IsZero() && time.Since(zeroAt) > 5*time.Second {
			t.Fatalf("still not OK %s after the lag reached 0: %s", time.Since(zeroAt).Round(time.Second), raw)
		}
		if time.Since(back) > 90*time.Second {
			t.Fatalf("not OK 90 s after Event Hubs came back: %s", raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("OK and caught up %s after Event Hubs came back, OK %s after the lag reached 0", time.Since(back).Round(100*time.Millisecond), time.Since(zeroAt).Round(100*time.Millisecond))
	tp, _ := st["throughput"].(map[string]any)
	delivered, err := time.Parse(time.RFC3339Nano, fmt.Sprint(tp["last_delivered"]))
	if err != nil || delivered.Before(back) || delivered.After(time.Now()) {
		t.Errorf("last delivered %v is not an acknowledgement after Event Hubs came back at %s", tp["last_delivered"], back.UTC().Format(time.RFC3339Nano))
	}
	if got := w.emu.Stats().EventsStored; got < 300 {
		t.Errorf("%d events stored after the outage, want 300", got)
	}
}

// Kafka refuses connections while a catch-up runs, and comes back: a Kafka
// headline (not the generic advice, no "group rebalanced"), the page keeps
// the last lag table with its time, the metrics keep the lag series with
// ehmirror_up 0 and the reading's age; green again once Kafka answers.
func TestOnCallKafkaRefusedThenBack(t *testing.T) {
	bin, w, front, key := startRestartable(t, 300)
	statusURL := front.URL + "/api/status?code=" + key
	metricsURL := front.URL + "/api/metrics?code=" + key
	if n := len(metricValues(t, metricsURL, "ehmirror_lag{")); n != 20 {
		t.Fatalf("%d lag series before the outage, want 20", n)
	}
	w.emu.Faults().DelayDispositions(300 * time.Millisecond) // a catch-up still running when Kafka goes
	if code, _, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, `{"max_duration":"2m"}`); code != http.StatusAccepted {
		t.Fatalf("catch-up: %d %s", code, raw)
	}
	time.Sleep(time.Second)
	w.stopKafka()
	down := time.Now()
	st, raw := waitStatus(t, statusURL, false, 30*time.Second, "the status stayed OK with Kafka refusing connections")
	t.Logf("red %s after Kafka went down", time.Since(down).Round(100*time.Millisecond))
	cs := causes(st)
	if len(cs) != 1 || cs[0]["kind"] != "kafka" || cs[0]["network"] != "connection refused" {
		t.Errorf("want one cause, kafka, connection refused: %s", raw)
	}
	if reason := fmt.Sprint(st["reason"]); !strings.HasPrefix(reason, "Kafka `") || !strings.Contains(reason, "unreachable (connection refused)") {
		t.Errorf("reason %q: want the Kafka headline", reason)
	}
	if ready, _ := st["readiness"].(map[string]any); !strings.HasPrefix(fmt.Sprint(ready["summary"]), "kafka: 0 of 1 broker answers") {
		t.Errorf("readiness %v: want 0 of the 1 broker configured", ready["summary"])
	}
	if strings.Contains(raw, "sends or fetches keep failing") {
		t.Error("a Kafka outage gets the generic advice")
	}
	if last, _ := st["last_lag"].(map[string]any); last == nil || len(last["partitions"].([]any)) != 20 {
		t.Errorf("no last lag while Kafka is down: %s", raw)
	}
	dom := string(headless(t, bin, front.URL+"/api/status?format=html&code="+key, "--dump-dom"))
	if !strings.Contains(dom, `<p id="lag-stale" class="stale">Kafka cannot be read now: the last lag known, as of `) || strings.Count(dom, `<tr class="part`) != 20 {
		t.Errorf("the page does not keep the last lag table with its time")
	}
	// A reading serves the gauges for up to 10 s.
	for deadline := time.Now().Add(15 * time.Second); metric(t, metricsURL, "ehmirror_up") != 0; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("ehmirror_up stayed 1 with Kafka down")
		}
	}
	if metric(t, metricsURL, "ehmirror_ok") != 0 || metric(t, metricsURL, `ehmirror_problems{kind="kafka"}`) < 1 {
		t.Error("the metrics do not show Kafka down")
	}
	if n := len(metricValues(t, metricsURL, "ehmirror_lag{")); n != 20 {
		t.Errorf("%d lag series with Kafka down, want the 20 last known", n)
	}
	if age := metric(t, metricsURL, "ehmirror_lag_age_seconds"); age <= 0 {
		t.Errorf("lag age %v with Kafka down", age)
	}

	w.startKafka(t)
	w.emu.Faults().Reset()
	waitStatus(t, statusURL, true, 90*time.Second, "the status stayed not OK after Kafka came back")
	_, st, raw = call(t, "GET", statusURL, "")
	for _, d := range st["last_drains"].([]any) {
		t.Logf("drain stopped: %v", d.(map[string]any)["stopped"])
		if stopped := d.(map[string]any)["stopped"]; stopped == "group rebalanced" {
			t.Errorf("a drain of the Kafka outage is labelled %q: %s", stopped, raw)
		}
	}
}

// A wrong Event Hubs key is a problem from the start: the readiness check
// finds every hub refusing the credentials before any drain runs.
func TestOnCallWrongKeyFromTheStart(t *testing.T) {
	bin := browser(t)
	app := buildApp(t)
	w := newWorld(t)
	w.produce(t, 100)
	settings := w.settings()
	settings["EVENTHUBS"] = strings.Replace(w.emu.ConnectionString(), eventHubsKey, "d3Jvbmcta2V5LXdyb25nLWtleQ==", 1)
	settings["MIRROR_SCHEDULE"] = "0 0 0 1 1 *"
	h, front := startHost(t, app, settings, &capture{})
	key := h.Keys().DefaultKey()
	_, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, "")
	cs := causes(st)
	if st["ok"] != false || len(cs) != 1 || cs[0]["kind"] != "unauthorized" || !strings.HasPrefix(fmt.Sprint(st["reason"]), "Event Hubs refuses the credentials on all 5 hubs since ") {
		t.Fatalf("want not OK before any drain, one cause: %s", raw)
	}
	dom := string(headless(t, bin, front.URL+"/api/status?format=html&code="+key, "--dump-dom"))
	if !strings.Contains(dom, "NOT MIRRORING") || !strings.Contains(dom, "What to do: check the key in <code>") && !strings.Contains(dom, "What to do: check the key in `EVENTHUBS`") {
		t.Errorf("the page does not show the wrong key with its remedy:\n%s", problemsSection(dom))
	}
	if metric(t, front.URL+"/api/metrics?code="+key, `ehmirror_problems{kind="unauthorized"}`) != 5 {
		t.Error("the metrics do not count the 5 hubs refusing the credentials")
	}
}

// A paused topic with a backlog: "caught up except N records in 1 paused
// topic" with the resume call, on the JSON and the page.
func TestOnCallPausedTopicWithABacklog(t *testing.T) {
	bin := browser(t)
	app := buildApp(t)
	w := newWorld(t)
	settings := w.settings()
	settings["MIRROR_SCHEDULE"] = "0 0 0 1 1 *"
	settings["MIRROR_FOLLOW"] = "false"
	h, front := startHost(t, app, settings, &capture{})
	key := h.Keys().DefaultKey()
	if code, _, raw := call(t, "POST", front.URL+"/api/pause?code="+key, `{"topic":"prod.test5","reason":"consumer migration"}`); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, raw)
	}
	w.produce(t, 500) // 100 to each topic
	if _, err := h.InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{}); err != nil {
		t.Fatal(err)
	}
	_, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, "")
	backlog, _ := st["backlog"].(map[string]any)
	want := "caught up except 100 records in 1 paused topic; resume with `POST /api/resume` {\"topic\":\"prod.test5\"}"
	if backlog["summary"] != want {
		t.Fatalf("backlog %v, want %q: %s", backlog["summary"], want, raw)
	}
	dom := string(headless(t, bin, front.URL+"/api/status?format=html&code="+key, "--dump-dom"))
	if !strings.Contains(dom, "caught up except 100 records in 1 paused topic; resume with <code>") && !strings.Contains(dom, "caught up except 100 records in 1 paused topic; resume with `POST /api/resume`") {
		t.Errorf("the page does not show the paused backlog:\n%s", dom)
	}
}

// Two instances on one group, one drains: the other shows the same last
// delivery (stored with the commits), not nothing.
func TestOnCallTwoInstancesOneDrains(t *testing.T) {
	bin := browser(t)
	app := buildApp(t)
	w := newWorld(t)
	w.produce(t, 200)
	settings := w.settings()
	settings["MIRROR_SCHEDULE"] = "0 0 0 1 1 *"
	settings["MIRROR_FOLLOW"] = "false"
	drainer, front1 := startHost(t, app, settings, &capture{})
	other, front2 := startHost(t, app, settings, &capture{})
	if _, err := drainer.InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{}); err != nil {
		t.Fatal(err)
	}
	lastDelivered := func(url string) (string, map[string]any) {
		_, st, raw := call(t, "GET", url, "")
		lag, _ := st["lag"].(map[string]any)
		if lag == nil || lag["total"] != 0.0 {
			t.Fatalf("not caught up: %s", raw)
		}
		return fmt.Sprint(lag["last_delivered"]), lag
	}
	d1, lag1 := lastDelivered(front1.URL + "/api/status?code=" + drainer.Keys().DefaultKey())
	d2, lag2 := lastDelivered(front2.URL + "/api/status?code=" + other.Keys().DefaultKey())
	t1, err := time.Parse(time.RFC3339Nano, d1)
	if err != nil || time.Since(t1) > time.Minute {
		t.Fatalf("last delivered %q on the instance that drained", d1)
	}
	// Commit metadata keeps milliseconds.
	t2, err := time.Parse(time.RFC3339Nano, d2)
	if err != nil || t1.Sub(t2) > time.Millisecond || t2.Sub(t1) > time.Millisecond {
		t.Errorf("last delivered %q on the instance that drained, %q on the other", d1, d2)
	}
	for i, p := range lag2["partitions"].([]any) {
		mine := lag1["partitions"].([]any)[i].(map[string]any)["last_delivered"]
		if theirs := p.(map[string]any)["last_delivered"]; mine != nil && theirs == nil {
			t.Errorf("no last delivery of %v on the other instance (the drainer: %v)", p, mine)
		}
	}
	dom := string(headless(t, bin, front2.URL+"/api/status?format=html&code="+other.Keys().DefaultKey(), "--dump-dom"))
	if !strings.Contains(dom, `, last record delivered <span id="last-delivered">`+t2.UTC().Format("2006-01-02 15:04:05Z")) {
		t.Errorf("the other instance's page does not show the last delivery %s", t2)
	}
}
