package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// commandPath is the emulator command built by TestMain.
var commandPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "emulator-command")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	commandPath = filepath.Join(dir, "emulator")
	if out, err := exec.Command("go", "build", "-o", commandPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestBadConfigExitsWithStatus2(t *testing.T) {
	bin := commandPath
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	entity := func(name, count string) string {
		return `{"Name":"` + name + `","PartitionCount":"` + count + `","ConsumerGroups":[]}`
	}
	doc := func(entities ...string) string {
		return `{"UserConfig":{"NamespaceConfig":[{"Type":"EventHub","Name":"ns","Entities":[` + strings.Join(entities, ",") + `]}]}}`
	}
	cases := []struct {
		name, path, field string
	}{
		{"unreadable", filepath.Join(dir, "does-not-exist.json"), "cannot read config"},
		{"bad JSON", write("bad.json", `{"UserConfig": [`), "invalid JSON"},
		{"partition count out of range", write("range.json", doc(entity("a", "64"))), "Entities[0].PartitionCount"},
		{"duplicate hub", write("dup.json", doc(entity("a", "1"), entity("a", "2"))), "Entities[1].Name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "-config", tc.path, "-listen", "127.0.0.1:0")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2 (stderr %q)", err, stderr.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, tc.path) || !strings.Contains(msg, tc.field) {
				t.Fatalf("stderr %q: want one line starting with %s and naming %s", msg, tc.path, tc.field)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout %q", stdout.String())
			}
		})
	}
}

var connStringRE = regexp.MustCompile(`^Endpoint=sb://127\.0\.0\.1:\d+;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true$`)

func TestServesUntilSignalled(t *testing.T) {
	bin := commandPath
	for _, tc := range []struct {
		name    string
		args    []string
		hub     string
		wantIDs []string
	}{
		{"default hubs", nil, "prod.test5", []string{"0", "1", "2", "3"}},
		{"config file", []string{"-config", "../../emulator/testdata/Config.json"}, "eh1", []string{"0", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"-listen", "127.0.0.1:0"}, tc.args...)...)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("first line: %v (stderr %s)", err, stderr.String())
			}
			cs := strings.TrimSuffix(line, "\n")
			if !connStringRE.MatchString(cs) {
				t.Fatalf("first line %q is not a connection string", cs)
			}
			p, err := azeventhubs.NewProducerClientFromConnectionString(cs, tc.hub, nil)
			if err != nil {
				t.Fatal(err)
			}
			props, err := p.GetEventHubProperties(ctx, nil)
			p.Close(ctx)
			if err != nil || !reflect.DeepEqual(props.PartitionIDs, tc.wantIDs) {
				t.Fatalf("GetEventHubProperties: %+v, %v", props, err)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
			}
		})
	}
}

// startCommand runs the emulator command and returns the connection string
// it prints and a function that sends SIGTERM and waits for a clean exit.
func startCommand(t *testing.T, ctx context.Context, args ...string) (string, func()) {
	t.Helper()
	cmd := exec.CommandContext(ctx, commandPath, append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (stderr %s)", err, stderr.String())
	}
	return strings.TrimSuffix(line, "\n"), func() {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	}
}

// TestDataDirSurvivesSIGTERM: events sent before a SIGTERM are read back,
// with their sequence numbers, after a restart with the same -data-dir.
func TestDataDirSurvivesSIGTERM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	cs, stop := startCommand(t, ctx, "-data-dir", dir)
	p, err := azeventhubs.NewProducerClientFromConnectionString(cs, "prod.test2", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: to("3")})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"kept-1", "kept-2"} {
		if err := b.AddEventData(&azeventhubs.EventData{Body: []byte(body)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.SendEventDataBatch(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	stop()

	cs, stop = startCommand(t, ctx, "-data-dir", dir)
	defer stop()
	c, err := azeventhubs.NewConsumerClientFromConnectionString(cs, "prod.test2", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	pc, err := c.NewPartitionClient("3", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: to(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	var got []string
	for len(got) < 2 {
		evs, err := pc.ReceiveEvents(ctx, 2-len(got), nil)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		for _, e := range evs {
			got = append(got, fmt.Sprintf("%s@%d", e.Body, e.SequenceNumber))
		}
	}
	if !reflect.DeepEqual(got, []string{"kept-1@0", "kept-2@1"}) {
		t.Fatalf("after restart: %v", got)
	}
}

func to[T any](v T) *T { return &v }

// TestTLSFlagsCreateACertificate: -tls-listen with -tls-cert/-tls-key that do
// not exist creates a self-signed certificate the SDK can trust.
func TestTLSFlagsCreateACertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	port := freePort(t)
	_, stop := startCommand(t, ctx, "-tls-listen", "127.0.0.1:"+port, "-tls-cert", certPath, "-tls-key", keyPath)
	defer stop()
	pemBytes, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	cs := "Endpoint=sb://localhost:" + port + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE"
	p, err := azeventhubs.NewProducerClientFromConnectionString(cs, "prod.test1", &azeventhubs.ProducerClientOptions{TLSConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.GetEventHubProperties(ctx, nil); err != nil {
		t.Fatalf("GetEventHubProperties over amqps: %v", err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
