package docs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReadmeWalkthrough walks the README as a newcomer does (issue 47's
// "done when"), with the commands as the README shows them, run for real:
// make demo; make dev-env and make start on non-default ports with a data
// directory; the producer; a catch-up; the status in JSON and as the page;
// and the local cut-over dry run. The only changes to the README's lines
// are free ports instead of the example ones, and the settings file and
// data directory in a temporary directory (SETTINGS=, DEV_DATA_DIR=) so the
// test leaves the checkout as it found it. It runs in the repository root
// (a clone is that checkout).
func TestReadmeWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is needed to walk through the README")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := shellLines("README.md", string(readme))
	find := func(prefix string) string {
		t.Helper()
		for _, c := range lines {
			if strings.HasPrefix(c.line, prefix) {
				return c.line
			}
		}
		t.Fatalf("the README shows no command starting with %q", prefix)
		return ""
	}
	tmp := t.TempDir()
	settings := filepath.Join(tmp, "local.settings.json")
	kafkaPort, hubsPort, httpPort := freePort(t), freePort(t), freePort(t)

	// 1. make demo.
	t.Log("make demo")
	out, err := shell(ctx, find("make demo"))
	if err != nil || !strings.Contains(out, "demo passed") {
		t.Fatalf("make demo: %v\n%s", err, out)
	}

	// 2. make dev-env and make start on other ports, data kept.
	dev := find("make dev-env DEV_KAFKA_PORT=")
	dev = strings.NewReplacer("DEV_KAFKA_PORT=19092", "DEV_KAFKA_PORT="+kafkaPort, "DEV_EVENTHUBS_PORT=15672", "DEV_EVENTHUBS_PORT="+hubsPort,
		"DEV_DATA_DIR=.devenv", "DEV_DATA_DIR="+filepath.Join(tmp, "devenv")).Replace(dev) + " SETTINGS=" + settings
	if !strings.Contains(dev, kafkaPort) || !strings.Contains(dev, hubsPort) {
		t.Fatalf("the README's dev-env line changed; update the walkthrough: %s", dev)
	}
	t.Log(dev)
	devenv := background(t, dev)
	devenv.waitFor(t, regexp.MustCompile(`Press Ctrl-C`), time.Minute)
	start := strings.Replace(find("make start PORT="), "PORT=17071", "PORT="+httpPort, 1) + " SETTINGS=" + settings
	if !strings.Contains(start, httpPort) {
		t.Fatalf("the README's start line changed; update the walkthrough: %s", start)
	}
	t.Log(start)
	host := background(t, start)
	key := host.waitFor(t, regexp.MustCompile(`Function key \(\?code= or x-functions-key\): (\S+)`), 2*time.Minute)[1]
	local := func(line string) string {
		return strings.NewReplacer("localhost:7071", "localhost:"+httpPort, "127.0.0.1:9092", "127.0.0.1:"+kafkaPort, "<function key>", key).Replace(line)
	}
	// logLine logs a command without the function key.
	logLine := func(line string) { t.Helper(); t.Log(strings.ReplaceAll(line, key, "<function key>")) }

	// Records to mirror: the producer of docs/local-host.md.
	pageText, err := os.ReadFile(filepath.Join(root, "docs", "local-host.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range shellLines("local-host.md", string(pageText)) {
		if strings.HasPrefix(c.line, "go run ./scripts/produce ") {
			produce := local(strings.Replace(c.line, "-count 10000", "-count 2000", 1))
			logLine(produce)
			if out, err := shell(ctx, produce); err != nil {
				t.Fatalf("%s: %v\n%s", produce, err, out)
			}
		}
	}

	// 3. A catch-up, followed to the end through its status_url.
	catchUp := local(find(`curl -X POST "http://localhost:7071/api/catchup`))
	logLine(catchUp)
	code, answer := curl(t, ctx, catchUp)
	if code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("%s: %d %v", catchUp, code, answer)
	}
	statusURL := fmt.Sprint(answer["status_url"]) + "&code=" + key // as status_key says
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, st := curl(t, ctx, `curl "`+statusURL+`"`)
		if run, _ := st["run"].(map[string]any); code == http.StatusOK && run["state"] == "caught up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the catch-up did not catch up: %d %v", code, st)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// 4. The status, as JSON and as the page.
	status := local(find(`curl "http://localhost:7071/api/status`))
	logLine(status)
	code, st := curl(t, ctx, status)
	if code != http.StatusOK || st["ok"] != true {
		t.Fatalf("%s: %d %v", status, code, st)
	}
	page := pageOf(t, ctx, strings.Trim(strings.TrimPrefix(status, "curl "), `"`)+"&format=html")
	if !strings.Contains(page, "<html") || !strings.Contains(page, "prod.test1") {
		t.Fatalf("the status page: %.500s", page)
	}

	// 5. The local cut-over dry run.
	group := local(find("go run ./scripts/produce -brokers 127.0.0.1:9092 -count 0 -commit-group"))
	logLine(group)
	if out, err := shell(ctx, group); err != nil || !strings.Contains(out, "committed prod.test1/0 at") {
		t.Fatalf("%s: %v\n%s", group, err, out)
	}
	cut := local(find(`curl -X POST "http://localhost:7071/api/cutover`))
	logLine(cut)
	code, plan := curl(t, ctx, cut)
	if code != http.StatusOK || plan["dry_run"] != true {
		t.Fatalf("%s: %d %v", cut, code, plan)
	}
	t.Logf("cut-over dry run: %s", plan["message"])
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// shell runs a README line with bash in the repository root.
func shell(ctx context.Context, line string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// process is a README command left running (make dev-env, make start).
type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
}

// background starts a README line in its own process group; the test's
// cleanup interrupts the group as Ctrl-C would, then kills what is left.
func background(t *testing.T, line string) *process {
	t.Helper()
	p := &process{cmd: exec.Command("bash", "-c", line), done: make(chan struct{})}
	p.cmd.Dir = root
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() {
		_ = p.cmd.Wait()
		w.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			// The host prints its keys: keep them out of the test log.
			keys := regexp.MustCompile(`(?m)(key[^:\n]*: )\S+$`)
			t.Logf("output of %s:\n%s", line, keys.ReplaceAllString(p.output(), "${1}[REDACTED]"))
		}
	})
	return p
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the output matches re and returns the match.
func (p *process) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if m := re.FindStringSubmatch(p.output()); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before printing %s:\n%s", p.cmd.Args[2], re, p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %s within %s:\n%s", p.cmd.Args[2], re, within, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// curl sends what a README curl line sends (-X, -d and the URL) and
// returns the status and the JSON answer.
func curl(t *testing.T, ctx context.Context, line string) (int, map[string]any) {
	t.Helper()
	w := words(line)
	method, body, url := http.MethodGet, "", ""
	for i := 1; i < len(w); i++ {
		switch {
		case w[i] == "-X" && i+1 < len(w):
			method = w[i+1]
			i++
		case w[i] == "-d" && i+1 < len(w):
			body = w[i+1]
			if method == http.MethodGet {
				method = http.MethodPost
			}
			i++
		case strings.HasPrefix(w[i], "http"):
			url = w[i]
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %d, not JSON: %.300s", line, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

// pageOf returns the body at url.
func pageOf(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}
