package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/functions"
	"github.com/ehmirror/ehmirror/functions/appbuild"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
)

// These tests are the host contract of issue 4: they build the function app
// folder the way `make build` does, start the real handler binary under a
// host that reads host.json and every function.json from that folder and
// speaks the Functions host's exact protocol, with a real Kafka (kfake, SASL
// on) and the Event Hubs emulator behind it.

const (
	kafkaUser     = "mirror"
	kafkaPassword = "kafka-password-7f3a9c"
	eventHubsKey  = "ZXZlbnRodWJzLWtleS1zZWNyZXQ="
)

var seedTopics = []string{"prod.test1", "prod.test2", "prod.test3", "prod.test4", "prod.test5"}

// buildApp lays out the app folder as `make build` does.
func buildApp(t *testing.T) string {
	t.Helper()
	app := t.TempDir()
	if err := appbuild.Build(context.Background(), "..", app); err != nil {
		t.Fatal(err)
	}
	return app
}

// world is Kafka and Event Hubs behind the handler.
type world struct {
	cluster *kfake.Cluster
	emu     *emulator.Server
	client  *kgo.Client

	// kafkaOpts and emuConfig start Kafka and Event Hubs again (see
	// outage_test.go), on the same ports with their data.
	kafkaOpts []kfake.Opt
	emuConfig emulator.Config
}

func newWorld(t *testing.T, extra ...kfake.Opt) *world {
	t.Helper()
	return newWorldOn(t, "127.0.0.1:0", "", extra...)
}

// newWorldOn is newWorld with Event Hubs listening on listen and keeping
// its events in dataDir ("" for memory), and more kfake options.
func newWorldOn(t *testing.T, listen, dataDir string, extra ...kfake.Opt) *world {
	t.Helper()
	kopts := append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(4, seedTopics...),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", kafkaUser, kafkaPassword)}, extra...)
	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var hubs []emulator.HubConfig
	for _, name := range seedTopics {
		hubs = append(hubs, emulator.HubConfig{Name: name, PartitionCount: 4})
	}
	cfg := emulator.Config{Listen: listen, Key: eventHubsKey, Hubs: hubs, DataDir: dataDir}
	emu, err := emulator.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	client, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(0),
		kgo.SASL(plainAuth()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &world{cluster: cluster, emu: emu, client: client, kafkaOpts: kopts, emuConfig: cfg}
}

func (w *world) produce(t *testing.T, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: seedTopics[i%len(seedTopics)], Value: []byte(fmt.Sprintf("This is message number %d", i))}
		if i%2 == 0 {
			recs[i].Key = []byte(fmt.Sprintf("key-%d", i%7))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// settings are the app settings of a working handler.
func (w *world) settings() map[string]string {
	return map[string]string{
		"FUNCTIONS_WORKER_RUNTIME": "custom",
		"KAFKA_BROKERS":            strings.Join(w.cluster.ListenAddrs(), ","),
		"KAFKA_GROUP":              "ehmirror",
		"KAFKA_SASL_MECHANISM":     "plain",
		"KAFKA_SASL_USERNAME":      kafkaUser,
		"KAFKA_SASL_PASSWORD":      kafkaPassword,
		"EVENTHUBS":                w.emu.ConnectionString(),
		"MIRROR_MAX_DURATION":      "20s",
		"MIRROR_SCHEDULE":          "0 */1 * * * *",
	}
}

// capture collects every line the handler writes.
type capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// startHost runs the handler in app under a local Functions host.
func startHost(t *testing.T, app string, settings map[string]string, out *capture) (*funchost.Host, *httptest.Server) {
	t.Helper()
	h, err := funchost.New(app, funchost.Options{
		Settings: settings,
		Environ:  []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
		Stdout:   out, Stderr: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs := h.FunctionErrors(); len(errs) > 0 {
		t.Fatalf("the host could not index functions: %v", errs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("handler took %s to answer the readiness probe", d)
	}
	t.Cleanup(func() { _ = h.Stop() })
	front := httptest.NewServer(h.Handler())
	t.Cleanup(front.Close)
	return h, front
}

// call sends a request to the host's HTTP front end.
func call(t *testing.T, method, url, body string) (int, map[string]any, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, string(raw)
}

func totalLag(t *testing.T, status map[string]any) float64 {
	t.Helper()
	lag, ok := status["lag"].(map[string]any)
	if !ok {
		t.Fatalf("status has no lag: %v", status)
	}
	return lag["total"].(float64)
}

// TestHostContract builds the app folder once and runs the contract
// scenarios against it.
func TestHostContract(t *testing.T) {
	app := buildApp(t)
	t.Run("timer, catch-up and status", func(t *testing.T) { testMirrorFunctions(t, app) })
	t.Run("invalid settings are reported, not crashed on", func(t *testing.T) { testInvalidSettings(t, app) })
	t.Run("response shapes match the bindings", func(t *testing.T) { testResponseShapes(t, app) })
	t.Run("SIGINT mid-drain commits what was acknowledged and exits", func(t *testing.T) { testGracefulStop(t, app) })
}

// testGracefulStop interrupts the handler in the middle of a slow drain: it
// must exit within a few seconds, and every committed offset must have all
// records below it in Event Hubs.
func testGracefulStop(t *testing.T, app string) {
	w := newWorld(t)
	w.produce(t, 5000)
	settings := w.settings()
	settings["MIRROR_INFLIGHT_BYTES"] = "16KiB" // small batches, each acknowledged late
	out := &capture{}
	h, _ := startHost(t, app, settings, out)
	w.emu.Faults().DelayDispositions(50 * time.Millisecond)

	done := make(chan *funchost.Result, 1)
	go func() {
		res, _ := h.InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{})
		done <- res
	}()
	for w.emu.Stats().EventsStored == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.Interrupt(ctx); err != nil {
		t.Fatalf("interrupt: %v\n%s", err, out)
	}
	if took := time.Since(start); took > 12*time.Second {
		t.Errorf("the handler took %s to stop", took)
	}
	<-done
	stored := w.emu.Stats().EventsStored
	if stored == 0 || stored >= 5000 {
		t.Fatalf("expected an interrupted drain, Event Hubs holds %d events", stored)
	}
	src, err := kafka.NewSource(kafka.Options{Brokers: w.cluster.ListenAddrs(), Group: "ehmirror", SASL: kafka.SASL{Mechanism: "plain", Username: kafkaUser, Password: kafkaPassword}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	inHubs := map[string]bool{}
	var tps []mirror.TopicPartition
	for _, topic := range seedTopics {
		for p := range 4 {
			tps = append(tps, mirror.TopicPartition{Topic: topic, Partition: int32(p)})
			for _, ev := range w.emu.Events(topic, p) {
				r, err := mirror.RecordFromEvent(ev.Body, ev.Properties)
				if err != nil {
					t.Fatal(err)
				}
				inHubs[mirror.MessageID(r.Topic, r.Partition, r.Offset)] = true
			}
		}
	}
	committed, err := src.Committed(context.Background(), tps)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for tp, c := range committed {
		for o := int64(0); o < c; o++ {
			if !inHubs[mirror.MessageID(tp.Topic, tp.Partition, o)] {
				t.Fatalf("%s: offset %d committed past %d, which is not in Event Hubs", tp, c, o)
			}
		}
		sum += max(c, 0)
	}
	if sum == 0 {
		t.Errorf("nothing committed although %d events were acknowledged", stored)
	}
	t.Logf("interrupted after %d events stored; %d records committed", stored, sum)
}

func testMirrorFunctions(t *testing.T, app string) {
	w := newWorld(t)
	out := &capture{}
	h, front := startHost(t, app, w.settings(), out)
	key := h.Keys().DefaultKey()
	var bodies []string
	ctx := context.Background()

	// The HTTP functions need a function key.
	if code, _, _ := call(t, "GET", front.URL+"/api/status", ""); code != http.StatusUnauthorized {
		t.Errorf("status without a key: %d, want 401", code)
	}

	w.produce(t, 1000)
	code, status, raw := call(t, "GET", front.URL+"/api/status?code="+key, "")
	bodies = append(bodies, raw)
	if code != http.StatusOK || totalLag(t, status) != 1000 {
		t.Fatalf("status before: %d %s", code, raw)
	}

	// A timer invocation mirrors records and returns the report in Logs.
	res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{})
	if err != nil || !res.Succeeded() {
		t.Fatalf("timer: %v %v\n%s", err, res.Err, out)
	}
	bodies = append(bodies, string(res.Body))
	if len(res.Logs) != 1 || !strings.Contains(res.Logs[0], "timer drain: 1000 records") {
		t.Fatalf("timer logs: %q", res.Logs)
	}
	// No line logged twice: what the handler wrote on stdout (out) is not
	// also returned as Logs (the host logs those too).
	for _, logged := range res.Logs {
		if strings.Contains(out.String(), logged) {
			t.Errorf("logged twice, on stdout and as Logs: %q", logged)
		}
	}
	if len(res.Outputs) != 0 {
		t.Errorf("timer outputs %v: MirrorTimer has no output binding", res.Outputs)
	}
	if got := w.emu.Stats().EventsStored; got != 1000 {
		t.Fatalf("Event Hubs holds %d events, want 1000", got)
	}
	// The metrics, as Prometheus text, with the function key.
	if code, _, _ := call(t, "GET", front.URL+"/api/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("metrics without a key: %d", code)
	}
	mresp, err := http.Get(front.URL + "/api/metrics?code=" + key)
	if err != nil {
		t.Fatal(err)
	}
	mtext, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if mresp.StatusCode != http.StatusOK || !strings.HasPrefix(mresp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("metrics: %d %s", mresp.StatusCode, mresp.Header.Get("Content-Type"))
	}
	for _, want := range []string{"ehmirror_records_total 1000", `ehmirror_latency_seconds_count{trigger="timer"} 1000`, `ehmirror_lag{hub="prod.test1",partition="0",paused="false",topic="prod.test1"} 0`} {
		if !strings.Contains(string(mtext), want) {
			t.Errorf("metrics lack %q:\n%s", want, mtext)
		}
	}

	// A catch-up answers 202 at once; its run reaches lag 0.
	w.produce(t, 500)
	code, started, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, `{"max_duration":"30s"}`)
	bodies = append(bodies, raw)
	if code != http.StatusAccepted || started["id"] == "" || !strings.Contains(fmt.Sprint(started["status_url"]), "/api/status?") {
		t.Fatalf("catch-up: %d %s", code, raw)
	}
	statusURL := withKey(t, started, key)
	deadline := time.Now().Add(30 * time.Second)
	var run map[string]any
	for {
		_, st, raw := call(t, "GET", statusURL, "")
		bodies = append(bodies, raw)
		run, _ = st["run"].(map[string]any)
		if run != nil && run["state"] == "caught up" {
			if totalLag(t, st) != 0 {
				t.Fatalf("caught up but status shows lag: %s", raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("catch-up did not finish: %s", raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := w.emu.Stats().EventsStored; got != 1500 {
		t.Fatalf("Event Hubs holds %d events, want 1500", got)
	}

	// Malformed catch-up bodies get 400 with the reason.
	for _, body := range []string{`{"max_duration":"soon"}`, `{"topics":"("}`, `not json`, `{"unknown":1}`} {
		code, m, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, body)
		bodies = append(bodies, raw)
		if code != http.StatusBadRequest || m["error"] == nil {
			t.Errorf("catch-up body %q: %d %s", body, code, raw)
		}
	}

	// A malformed invocation from the host gets 400, never a crash.
	bad, err := h.Invoke(ctx, "MirrorTimer", []byte(`{"Data":{"timer":"not an object"}}`))
	if err != nil || bad.Status != http.StatusBadRequest {
		t.Errorf("malformed invocation: %v %+v", err, bad)
	}
	if code, _, _ := call(t, "GET", front.URL+"/api/status?code="+key, ""); code != http.StatusOK {
		t.Errorf("handler unhealthy after bad input: %d", code)
	}

	// No secret from the environment appears in any response or log line.
	all := strings.Join(bodies, "\n") + out.String()
	for _, secret := range []string{kafkaPassword, eventHubsKey, w.emu.ConnectionString()} {
		if strings.Contains(all, secret) {
			t.Errorf("a secret leaked into responses or logs")
		}
	}
	if !strings.Contains(all, `"KAFKA_SASL_PASSWORD":"(set, redacted)"`) {
		t.Errorf("status does not show the redacted configuration")
	}
}

// testInvalidSettings: a handler with bad settings answers the readiness
// probe and reports every problem, one line each.
func testInvalidSettings(t *testing.T, app string) {
	out := &capture{}
	settings := map[string]string{
		"KAFKA_BROKERS":       "no-port",
		"EVENTHUBS":           "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=" + eventHubsKey,
		"MIRROR_MAX_DURATION": "soon",
		"MIRROR_PARTITIONING": "random",
		"MIRROR_SCHEDULE":     "0 */1 * * * *",
		// Misspelt: reported with the closest setting, never ignored
		// silently (issue 47 item 2).
		"MIRROR_MAX_DURATON": "5m",
		"KAFKA_GROUPS":       "orders",
	}
	h, front := startHost(t, app, settings, out)
	res, err := h.InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded() || res.Status != http.StatusInternalServerError || len(res.DroppedLogs) != 3 {
		t.Fatalf("timer with bad settings: status %d logs %q", res.Status, res.DroppedLogs)
	}
	for _, want := range []string{"KAFKA_BROKERS: ", "MIRROR_MAX_DURATION: ", "MIRROR_PARTITIONING: "} {
		if !strings.Contains(strings.Join(res.DroppedLogs, "\n"), want) || !strings.Contains(out.String(), want) {
			t.Errorf("problem %q not reported in the invocation and on stderr", want)
		}
	}
	code, status, raw := call(t, "GET", front.URL+"/api/status?code="+h.Keys().DefaultKey(), "")
	if code != http.StatusServiceUnavailable || len(status["problems"].([]any)) != 3 {
		t.Fatalf("status: %d %s", code, raw)
	}
	// Each setting problem says what to do and links to the docs, in
	// the JSON, on the page and in the startup log line.
	for _, p := range status["problems"].([]any) {
		pm, _ := p.(map[string]any)
		if !strings.HasPrefix(fmt.Sprint(pm["remedy"]), "set `"+fmt.Sprint(pm["setting"])+"`") || !strings.Contains(fmt.Sprint(pm["doc"]), "docs/settings.md") {
			t.Errorf("setting problem without its remedy and docs link: %v", pm)
		}
	}
	_, _, page := call(t, "GET", front.URL+"/api/status?format=html&code="+h.Keys().DefaultKey(), "")
	if !strings.Contains(page, "What to do: set `MIRROR_PARTITIONING` to hash, kafka-murmur2, preserve or round-robin;") || !strings.Contains(page, `docs/settings.md">docs</a>`) {
		t.Errorf("the page does not say what to do about the settings: %s", page)
	}
	if !strings.Contains(out.String(), "remedy=\"set `MIRROR_PARTITIONING` to hash") {
		t.Errorf("the startup line of a setting problem has no remedy: %s", out)
	}
	for _, want := range []string{"MIRROR_MAX_DURATON: is not a setting and is ignored; did you mean `MIRROR_MAX_DURATION`?", "KAFKA_GROUPS: is not a setting and is ignored; did you mean `KAFKA_GROUP`?"} {
		if !strings.Contains(out.String(), "level=WARN msg=\"setting problem: "+want) {
			t.Errorf("no startup line %q: %s", want, out)
		}
		name, msg, _ := strings.Cut(want, ": ")
		before, _, _ := strings.Cut(want, "`")
		if !strings.Contains(raw, `{"setting":"`+name+`","message":"`+msg+`"`) || !strings.Contains(page, before) {
			t.Errorf("the status does not report %q: %s", want, raw)
		}
	}
	if !strings.Contains(out.String(), "settings_ok=false unknown_settings=2") {
		t.Errorf("the ready line does not count the unknown settings: %s", out)
	}
	if strings.Contains(raw+page+out.String(), eventHubsKey) {
		t.Error("a secret leaked")
	}
	select {
	case <-h.Done():
		t.Fatal("the handler process exited")
	default:
	}
}

// testResponseShapes: the binding names the handler answers with are the
// ones in the function.json files (funchost also fails any invocation whose
// Outputs keys are not output binding names).
func testResponseShapes(t *testing.T, app string) {
	a, err := functions.LoadApp(app)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*functions.Function{}
	for _, fn := range a.Functions {
		byName[fn.Name] = fn
	}
	for _, name := range []string{"MirrorTimer", "CatchUp", "Status"} {
		if byName[name] == nil {
			t.Fatalf("function %s missing from the app folder", name)
		}
	}
	if byName["MirrorTimer"].Trigger().Name != timerBinding {
		t.Errorf("timer binding is not named %q", timerBinding)
	}
	for _, name := range []string{"CatchUp", "Status"} {
		trig := byName[name].Trigger()
		out, _ := byName[name].HTTPOutput()
		if trig.Name != reqBinding || out.Name != resBinding {
			t.Errorf("%s bindings are not named %q/%q", name, reqBinding, resBinding)
		}
	}
}

func plainAuth() sasl.Mechanism {
	return plain.Auth{User: kafkaUser, Pass: kafkaPassword}.AsMechanism()
}
