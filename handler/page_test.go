package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/funchost"
)

// browser returns Debian's chromium (or another Chrome) for headless runs.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no headless browser for the status page test: install Debian's chromium with `apt-get install -y chromium` (make test does so when CI=true)")
	return ""
}

// headless runs the browser headless on url with args and returns stdout.
func headless(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	return out
}

// createTopic creates a Kafka topic (kfake has no auto-creation here).
func (w *world) createTopic(t *testing.T, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), w.client)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating topic %s: %v %+v", name, err, resp)
	}
}

// TestStatusPageInBrowser renders GET /api/status?format=html, served by
// the real handler under the local host, in headless chromium: the page
// renders, shows the lag the JSON shows, marks problems, and holds no
// secret. With EHMIRROR_SCREENSHOT=path it also writes a screenshot there
// (docs/status-page.png is the outage test's: make status-page-png).
func TestStatusPageInBrowser(t *testing.T) {
	bin := browser(t)
	app := buildApp(t)
	w := newWorld(t)
	w.createTopic(t, "prod.orders", 2) // no event hub: a problem in red
	w.produce(t, 1000)
	if err := w.client.ProduceSync(context.Background(), &kgo.Record{Topic: "prod.orders", Value: []byte("order 1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	settings := w.settings()
	settings["MIRROR_MAX_RECORDS"] = "600"
	out := &capture{}
	h, front := startHost(t, app, settings, out)
	key := h.Keys().DefaultKey()
	ctx := context.Background()
	if _, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil {
		t.Fatal(err)
	}
	if code, _, raw := call(t, "POST", front.URL+"/api/pause?code="+key, `{"topic":"prod.test5","reason":"consumer migration"}`); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, raw)
	}

	_, st, rawJSON := call(t, "GET", front.URL+"/api/status?code="+key, "")
	if st["ok"] != false {
		t.Fatalf("want a problem (prod.orders has no hub): %s", rawJSON)
	}
	pageURL := front.URL + "/api/status?format=html&code=" + key

	// Accept: text/html selects the page too, served as HTML.
	req, _ := http.NewRequest("GET", front.URL+"/api/status?code="+key, nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rawHTML, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !bytes.HasPrefix(rawHTML, []byte("<!DOCTYPE html>")) {
		t.Fatalf("Accept: text/html got %s: %.200s", ct, rawHTML)
	}
	for _, external := range []string{"<script", "src=", "@import", "url(", "<link"} {
		if bytes.Contains(rawHTML, []byte(external)) {
			t.Errorf("the page is not self-contained: it has %q", external)
		}
	}

	dom := string(headless(t, bin, pageURL, "--dump-dom"))
	if !strings.Contains(dom, `id="ok" class="badge bad"`) || !strings.Contains(dom, "NOT MIRRORING") {
		t.Errorf("the page does not show the problem state:\n%s", dom)
	}
	if !regexp.MustCompile(`<ul class="problems causes" id="problems"><li class="cause" data-kind="hub missing"><span class="headline">hub missing on 1 event hub \(event hub "prod\.orders" does not exist`).MatchString(dom) {
		t.Errorf("the missing hub is not listed among the problems")
	}
	// Problems come with what to do and a link; the page reloads itself;
	// the backlog is said in records and time.
	for _, want := range []string{"What to do: create the event hub", `docs/settings.md#common">docs</a>`, `<meta http-equiv="refresh" content="15">`, `<p id="backlog" class="backlog problem`, `<div id="readiness" class="problem">readiness: kafka: 1 of 1 broker answers; event hubs: 5 of 6 hubs accept the credentials (prod.orders: hub missing: `, " records behind, the oldest from ", `<span id="behind-by">`, `, last record delivered <span id="last-delivered">`, `<td class="n delivered"><span title="`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// Every partition's lag as in the JSON, and the total.
	row := regexp.MustCompile(`(?s)<tr class="part[^"]*" data-tp="([^"]+)">.*?<td class="n committed">([^<]+)</td>.*?<td class="n end">(\d+)</td>\s*<td class="n lag">(\d+)</td>`)
	rows := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(dom, -1) {
		rows[m[1]] = m[2:]
	}
	lag := st["lag"].(map[string]any)
	parts := lag["partitions"].([]any)
	if len(parts) != 22 || len(rows) != len(parts) {
		t.Fatalf("%d partitions in the JSON, %d rows on the page", len(parts), len(rows))
	}
	for _, p := range parts {
		pm := p.(map[string]any)
		tp := fmt.Sprintf("%v/%v", pm["topic"], pm["partition"])
		want := []string{fmt.Sprint(pm["committed"]), fmt.Sprint(pm["log_end"]), fmt.Sprint(pm["lag"])}
		if want[0] == "-1" {
			want[0] = "none"
		}
		if got := rows[tp]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: page shows committed/end/lag %v, JSON %v", tp, got, want)
		}
	}
	if !strings.Contains(dom, fmt.Sprintf(`<span id="total-lag">%v</span>`, lag["total"])) || lag["total"].(float64) < 400 {
		t.Errorf("total lag %v not on the page", lag["total"])
	}
	if !strings.Contains(dom, "prod.test5 <span class=\"paused\">(paused)</span>") || !strings.Contains(dom, "consumer migration") {
		t.Error("the paused topic is not shown")
	}
	if !strings.Contains(dom, `<tr class="drain problem"><td>`) || !strings.Contains(dom, "KAFKA_SASL_PASSWORD") {
		t.Error("the page lacks the failed drain or the settings")
	}

	// A catch-up that runs (slowly) shows as active.
	w.emu.Faults().DelayDispositions(300 * time.Millisecond)
	if code, _, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, `{"max_duration":"30s"}`); code != http.StatusAccepted {
		t.Fatalf("catch-up: %d %s", code, raw)
	}
	time.Sleep(200 * time.Millisecond)
	dom = string(headless(t, bin, pageURL, "--dump-dom"))
	if !regexp.MustCompile(`<table id="catchup">.*\n<tr(?: class="problem")?><td><code>[0-9a-f]+</code></td><td>running</td>`).MatchString(dom) {
		t.Errorf("the running catch-up is not shown:\n%s", dom)
	}
	shot := os.Getenv("EHMIRROR_SCREENSHOT")
	if shot == "" {
		shot = t.TempDir() + "/status.png"
	}
	headless(t, bin, pageURL, "--screenshot="+shot, "--window-size=1280,1900")
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10000 {
		t.Fatalf("screenshot: %v, %d bytes", err, len(png))
	}

	// No secret anywhere: JSON, HTML, DOM, logs.
	for _, secret := range []string{kafkaPassword, eventHubsKey, w.emu.ConnectionString()} {
		if strings.Contains(rawJSON+string(rawHTML)+dom+out.String(), secret) {
			t.Error("a secret leaked into the status page, the JSON or the logs")
		}
	}
}
