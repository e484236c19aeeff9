// Command conformance runs the unmodified test suite of the azeventhubs v2.0.2
// SDK (from its module zip, fetched with `go mod download`, never copied into
// this repository) against the project's Event Hubs emulator, and prints how
// many tests passed, failed and were skipped.
//
// It starts on loopback: the emulator with amqps (TLS) and WebSocket
// listeners and a self-signed certificate the tests trust through
// SSL_CERT_FILE; shared access policies for the tests' Listen-only and
// Send-only connection strings; a managed-identity token endpoint
// (IDENTITY_ENDPOINT, App Service protocol) that issues unsigned Entra ID
// tokens, which the emulator trusts from loopback and gives the Data Owner
// role; and Azurite (npm, pinned) over HTTPS with OAuth for the checkpoint
// store tests. Node.js and npm must be installed.
//
// Usage: go run ./scripts/conformance [-run REGEXP] [-v]
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ehmirror/ehmirror/emulator"
)

const (
	sdkModule   = "github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	sdkVersion  = "v2.0.2"
	azuriteVer  = "3.35.0"
	hubName     = "conformance"
	linksHub    = "conformance-links"
	principalID = "00000000-0000-0000-0000-00000000c0de"
	namespace   = "127.0.0.2" // a loopback address (Linux routes 127.0.0.0/8 to lo)
	listenKey   = "bGlzdGVuLW9ubHk="
	sendKey     = "c2VuZC1vbmx5"
)

// outOfScope are the SDK tests that need what an emulator cannot offer; their
// failures are reported but do not fail the run.
var outOfScope = map[string]string{
	" TestConsumerClient_Detaches":       "disables the hub through Azure Resource Manager",
	" TestConsumerClient_GeoReplication": "needs a geo-replicated namespace (skips itself)",
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	runRE := fs.String("run", "", "only tests matching this `regexp` (go test -run)")
	verbose := fs.Bool("v", false, "print the go test output")
	workDir := fs.String("dir", ".cache/conformance", "work `directory` (module copy, certificates, Azurite)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, tool := range []string{"go", "node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %s is missing: install Node.js 20+ with npm (Azurite, the checkpoint store) and Go\n", tool)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := conformance(ctx, *workDir, *runRE, *verbose); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		return 1
	}
	return 0
}

func conformance(ctx context.Context, workDir, runRE string, verbose bool) error {
	workDir, err := filepath.Abs(workDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	modDir, err := copyModule(ctx, workDir)
	if err != nil {
		return err
	}
	cert, certPEM, keyPEM, err := emulator.SelfSignedCertificate("localhost", "127.0.0.1", namespace)
	if err != nil {
		return err
	}
	certFile, keyFile := filepath.Join(workDir, "cert.pem"), filepath.Join(workDir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	tokenURL, closeTokens, err := startTokenEndpoint()
	if err != nil {
		return err
	}
	defer closeTokens()

	// WebSocket tests dial wss://NAMESPACE/$servicebus/websocket (port 443,
	// which needs privileges); without it they fail and are reported.
	wsListen := namespace + ":443"
	if ln, err := net.Listen("tcp", wsListen); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: cannot listen on %s (%v): the WebSocket tests will fail\n", wsListen, err)
		wsListen = "127.0.0.1:0"
	} else {
		ln.Close()
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	srv, err := emulator.Start(ctx, emulator.Config{
		Listen: "127.0.0.1:0",
		// go-amqp verifies the certificate against the namespace including
		// any port, so the namespace has no port: the service's 5671 (and
		// 443) on 127.0.0.2, which leaves 127.0.0.1:5671 closed for the
		// custom-endpoint test.
		TLSListen:       namespace + ":5671",
		WebSocketListen: wsListen,
		TLSCertificate:  &cert,
		Hubs: []emulator.HubConfig{
			{Name: hubName, PartitionCount: 4},
			{Name: linksHub, PartitionCount: 1},
		},
		Policies: []emulator.Policy{
			{Name: "ListenOnly", Key: listenKey, Rights: []string{emulator.RightListen}},
			{Name: "SendOnly", Key: sendKey, Rights: []string{emulator.RightSend}},
		},
		EntraID: emulator.EntraID{
			TrustUnsignedFromLoopback: true,
			RoleAssignments:           []emulator.RoleAssignment{{Principal: principalID, Role: emulator.RoleDataOwner}},
		},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	defer srv.Close()

	blobEndpoint, stopAzurite, err := startAzurite(ctx, workDir, certFile, keyFile)
	if err != nil {
		return err
	}
	defer stopAzurite()

	cs := func(name, key string) string {
		return fmt.Sprintf("Endpoint=sb://%s/;SharedAccessKeyName=%s;SharedAccessKey=%s", namespace, name, key)
	}
	var env []string
	for _, kv := range os.Environ() {
		// The tests' credential must be the loopback managed identity.
		if !strings.HasPrefix(kv, "AZURE_") && !strings.HasPrefix(kv, "IDENTITY_") && !strings.HasPrefix(kv, "MSI_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"SSL_CERT_FILE="+certFile,
		"EVENTHUB_NAMESPACE="+namespace,
		"EVENTHUB_NAME="+hubName,
		"EVENTHUB_LINKSONLY_NAME="+linksHub,
		"CHECKPOINTSTORE_STORAGE_ENDPOINT="+blobEndpoint,
		"AZURE_SUBSCRIPTION_ID=00000000-0000-0000-0000-000000000000",
		"RESOURCE_GROUP=emulator",
		"EVENTHUB_CONNECTION_STRING="+cs(emulator.DefaultKeyName, emulator.DefaultKey),
		"EVENTHUB_CONNECTION_STRING_LISTEN_ONLY="+cs("ListenOnly", listenKey),
		"EVENTHUB_CONNECTION_STRING_SEND_ONLY="+cs("SendOnly", sendKey),
		"IDENTITY_ENDPOINT="+tokenURL,
		"IDENTITY_HEADER=conformance",
		"AZURE_RECORD_MODE=live",
	)
	args := []string{"test", "-json", "-count=1", "-timeout=30m", "-p=1"}
	if runRE != "" {
		args = append(args, "-run", runRE)
	}
	args = append(args, "./...")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = modDir, env
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	res := summarize(out, verbose)
	waitErr := cmd.Wait()
	fmt.Printf("azeventhubs %s test suite against the emulator: %d passed, %d failed, %d skipped\n", sdkVersion, len(res.passed), len(res.failed), len(res.skipped))
	unexpected := 0
	for _, name := range res.failed {
		if why, ok := outOfScope[name]; ok {
			fmt.Printf("  FAIL %s (out of scope: %s)\n", name, why)
			continue
		}
		unexpected++
		fmt.Printf("  FAIL %s\n", name)
	}
	for _, name := range res.skipped {
		fmt.Printf("  SKIP %s\n", name)
	}
	if unexpected > 0 {
		return fmt.Errorf("%d tests failed that the emulator must pass", unexpected)
	}
	if waitErr != nil && len(res.passed) == 0 {
		return fmt.Errorf("go test: %w", waitErr)
	}
	return nil
}

// copyModule downloads the SDK module and copies it to a writable directory.
func copyModule(ctx context.Context, workDir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", sdkModule+"@"+sdkVersion)
	cmd.Dir = workDir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", sdkModule, sdkVersion, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s %v", sdkModule, sdkVersion, info.Error, err)
	}
	dst := filepath.Join(workDir, "azeventhubs@"+sdkVersion)
	if err := os.RemoveAll(dst); err != nil {
		return "", err
	}
	err = filepath.WalkDir(info.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(info.Dir, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copy the module: %w", err)
	}
	return dst, nil
}

// startTokenEndpoint serves the App Service managed-identity protocol:
// unsigned JWTs for the requested resource, naming principalID in oid.
func startTokenEndpoint() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		resource := r.URL.Query().Get("resource")
		if resource == "" {
			resource = strings.TrimSuffix(r.URL.Query().Get("scope"), "/.default")
		}
		exp := time.Now().Add(time.Hour).Unix()
		enc := func(v any) string {
			b, _ := json.Marshal(v)
			return base64.RawURLEncoding.EncodeToString(b)
		}
		token := enc(map[string]string{"alg": "none", "typ": "JWT"}) + "." + enc(map[string]any{
			"aud": resource, "oid": principalID, "sub": principalID, "appid": principalID,
			"iss": "https://sts.windows.net/00000000-0000-0000-0000-000000000001/", "tid": "00000000-0000-0000-0000-000000000001",
			"iat": time.Now().Unix(), "nbf": time.Now().Add(-time.Minute).Unix(), "exp": exp,
		}) + "."
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"access_token": token, "expires_on": fmt.Sprint(exp), "resource": resource, "token_type": "Bearer",
		})
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String() + "/token", func() { hs.Close() }, nil
}

// startAzurite installs the pinned Azurite with npm into the work directory
// and runs its blob service over HTTPS with OAuth on a free port.
func startAzurite(ctx context.Context, workDir, certFile, keyFile string) (string, func(), error) {
	dir := filepath.Join(workDir, "azurite-"+azuriteVer)
	bin := filepath.Join(dir, "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(bin); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "azurite@"+azuriteVer)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", nil, fmt.Errorf("npm install azurite@%s: %w\n%s", azuriteVer, err, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	cmd := exec.CommandContext(ctx, bin, "--blobHost", "127.0.0.1", "--blobPort", port,
		"--cert", certFile, "--key", keyFile, "--oauth", "basic", "--skipApiVersionCheck", "--disableTelemetry", "--silent", "--inMemoryPersistence")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start azurite: %w", err)
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("azurite did not start within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "https://127.0.0.1:" + port + "/devstoreaccount1", stop, nil
}

// results are the test names by outcome.
type results struct{ passed, failed, skipped []string }

// summarize reads go test -json output.
func summarize(r io.Reader, verbose bool) results {
	var res results
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct{ Action, Package, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if verbose && ev.Action == "output" {
			fmt.Print(ev.Output)
		}
		if ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		name := strings.TrimPrefix(ev.Package, sdkModule) + " " + ev.Test
		switch ev.Action {
		case "pass":
			res.passed = append(res.passed, name)
		case "fail":
			res.failed = append(res.failed, name)
		case "skip":
			res.skipped = append(res.skipped, name)
		}
	}
	sort.Strings(res.failed)
	sort.Strings(res.skipped)
	return res
}
