package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/funchost"
)

// startInstances runs n instances of the app (each its own host and handler
// process, with the same keys, as instances of one function app) behind one
// front end that hands requests to them in turn, as the platform's load
// balancer may (function apps have no instance affinity by default).
func startInstances(t *testing.T, app string, settings map[string]string, n int) ([]*funchost.Host, *httptest.Server) {
	t.Helper()
	keys, err := funchost.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	hosts := make([]*funchost.Host, n)
	fronts := make([]http.Handler, n)
	for i := range hosts {
		h, err := funchost.New(app, funchost.Options{
			Settings: settings, Keys: keys,
			Environ: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
			Stdout:  &capture{}, Stderr: &capture{},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = h.Start(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Stop() })
		hosts[i], fronts[i] = h, h.Handler()
	}
	var next atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fronts[int(next.Add(1)-1)%n].ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return hosts, front
}

// TestCatchUpStatusAcrossInstances (issue 49, item 5): a catch-up started
// through one instance is answered by status?run= on every instance, with
// the instance that runs it; an unknown run is 404 on every instance.
func TestCatchUpStatusAcrossInstances(t *testing.T) {
	app := buildApp(t)
	w := newWorld(t)
	w.produce(t, 500)
	settings := w.settings()
	settings["MIRROR_SCHEDULE"] = "0 0 0 1 1 *" // no timer drain in the test
	hosts, front := startInstances(t, app, settings, 2)
	key := hosts[0].Keys().DefaultKey()

	code, started, raw := call(t, "POST", front.URL+"/api/catchup?code="+key, `{"max_duration":"30s"}`)
	if code != http.StatusAccepted {
		t.Fatalf("catch-up: %d %s", code, raw)
	}
	statusURL := withKey(t, started, key)
	seen := map[string]bool{}
	var runInstances []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, st, raw := call(t, "GET", statusURL, "")
		if code != http.StatusOK {
			t.Fatalf("status_url through the shared front: %d %s", code, raw)
		}
		answered, _ := st["instance"].(string)
		seen[answered] = true
		ri, _ := st["run_instance"].(string)
		runInstances = append(runInstances, ri)
		run, _ := st["run"].(map[string]any)
		if run == nil {
			t.Fatalf("no run in %s", raw)
		}
		if run["state"] == "caught up" && len(seen) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end caught up, answered by both instances, within 60 s: seen %v, last %s", seen, raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, ri := range runInstances {
		if ri != runInstances[0] || ri == "" {
			t.Errorf("run_instance differs between answers: %q", runInstances)
			break
		}
	}
	if got := w.emu.Stats().EventsStored; got != 500 {
		t.Errorf("Event Hubs holds %d events, want 500", got)
	}
	for range 2 {
		code, _, raw := call(t, "GET", front.URL+"/api/status?run=0123456789ab&code="+key, "")
		if code != http.StatusNotFound || !strings.Contains(raw, "in any instance") {
			t.Errorf("unknown run: %d %s", code, raw)
		}
	}
}

// TestDrainsOfAnotherInstance (issue 49, item 5): the drains an instance
// ran are readable from the status of every other instance (each publishes
// its running and last drains through Kafka every 10 s).
func TestDrainsOfAnotherInstance(t *testing.T) {
	app := buildApp(t)
	w := newWorld(t)
	w.produce(t, 300)
	settings := w.settings()
	settings["MIRROR_SCHEDULE"] = "0 0 0 1 1 *" // the test fires the timer
	hosts, _ := startInstances(t, app, settings, 2)
	key := hosts[0].Keys().DefaultKey()
	if res, err := hosts[0].InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{}); err != nil || !res.Succeeded() {
		t.Fatalf("timer on the first instance: %v %+v", err, res)
	}
	other := httptest.NewServer(hosts[1].Handler())
	defer other.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, st, raw := call(t, "GET", other.URL+"/api/status?code="+key, "")
		drains, _ := st["last_drains"].([]any)
		instances, _ := st["instances"].([]any)
		if len(drains) != 0 {
			t.Fatalf("the second instance reports a drain of its own: %s", raw)
		}
		for _, in := range instances {
			last, _ := in.(map[string]any)["last_drains"].([]any)
			if len(last) > 0 && last[0].(map[string]any)["records"] == float64(300) {
				t.Logf("the second instance reads the first's drain: %v", last[0])
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second instance's status did not show the first instance's drain within 60 s: %s", raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
