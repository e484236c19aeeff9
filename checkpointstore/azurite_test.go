package checkpointstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// azuriteVersion is the Azurite the tests install with npm, the one
// scripts/conformance pins.
const azuriteVersion = "3.35.0"

// azuriteKey is Azurite's well-known development account key (public, the
// same in every Azurite installation).
const azuriteKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// installMu serialises the npm install of the tests of this package.
var installMu sync.Mutex

// startAzurite installs the pinned Azurite with npm into the user cache
// (once) and runs its blob service over HTTP on a free port, in memory. It
// returns the storage connection string. A machine without Node.js and
// npm fails the test: it is a required peer, never skipped.
func startAzurite(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("azurite: %v", err)
	}
	dir := filepath.Join(cache, "ehmirror", "azurite-"+azuriteVersion)
	bin := filepath.Join(dir, "node_modules", ".bin", "azurite-blob")
	installMu.Lock()
	if _, err := os.Stat(bin); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			installMu.Unlock()
			t.Fatalf("azurite: %v", err)
		}
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "azurite@"+azuriteVersion)
		if out, err := cmd.CombinedOutput(); err != nil {
			installMu.Unlock()
			t.Fatalf("npm install azurite@%s (Node.js 20+ with npm is needed): %v\n%s", azuriteVersion, err, out)
		}
	}
	installMu.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", port, "--skipApiVersionCheck",
		"--disableTelemetry", "--silent", "--inMemoryPersistence")
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start azurite: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	if err := waitListening(ctx, exited, "127.0.0.1:"+port, 60*time.Second); err != nil {
		t.Fatalf("azurite: %v", err)
	}
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;BlobEndpoint=http://127.0.0.1:%s/devstoreaccount1;", azuriteKey, port)
}

// waitListening waits until addr accepts connections, the process ends
// (exited closed) or limit passes.
func waitListening(ctx context.Context, exited <-chan struct{}, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("did not listen on " + addr + " within " + limit.String())
		}
		select {
		case <-exited:
			return errors.New("exited before listening (its error is above)")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// newContainer creates a blob container on Azurite and returns its client.
func newContainer(t *testing.T, conn, name string) *container.Client {
	t.Helper()
	cc, err := container.NewClientFromConnectionString(conn, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cc.Create(ctx, nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	return cc
}
