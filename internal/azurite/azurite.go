// Package azurite runs Azurite's blob service (the Azure Storage emulator,
// from npm) for tests: the checkpoint store of the Event Hubs processors.
// It installs the pinned version into the user cache once, like
// scripts/conformance. It is for tests only.
package azurite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// Version is the Azurite the tests install with npm, the one
// scripts/conformance pins.
const Version = "3.35.0"

// Key is Azurite's well-known development account key (public, the same
// in every Azurite installation), of the account devstoreaccount1.
const Key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// Start installs the pinned Azurite with npm into the user cache
// (once) and runs its blob service over HTTP on a free port, in memory. It
// returns the storage connection string. A machine without Node.js and
// npm fails the test: it is a required peer, never skipped.
func Start(t testing.TB) string {
	t.Helper()
	return start(t, false)
}

// StartLoose is Start in Azurite's loose mode (--loose), which ignores the
// headers and parameters it does not support instead of answering 500:
// the blob client that Debian's python3-azure bundles with the Event Hubs
// checkpoint store sends such a header.
func StartLoose(t testing.TB) string {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, loose bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("azurite: %v", err)
	}
	dir := filepath.Join(cache, "ehmirror", "azurite-"+Version)
	bin := filepath.Join(dir, "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(bin); err != nil {
		// Install beside it and rename, so that test processes installing
		// at the same time never see half an installation.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatalf("azurite: %v", err)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
		if err != nil {
			t.Fatalf("azurite: %v", err)
		}
		defer os.RemoveAll(tmp)
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", tmp, "azurite@"+Version)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install azurite@%s (Node.js 20+ with npm is needed): %v\n%s", Version, err, out)
		}
		if err := os.Rename(tmp, dir); err != nil {
			if _, statErr := os.Stat(bin); statErr != nil {
				t.Fatalf("azurite: %v", err)
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	args := []string{"--blobHost", "127.0.0.1", "--blobPort", port, "--skipApiVersionCheck",
		"--disableTelemetry", "--silent", "--inMemoryPersistence"}
	if loose {
		args = append(args, "--loose")
	}
	cmd := exec.Command(bin, args...)
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
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;BlobEndpoint=http://127.0.0.1:%s/devstoreaccount1;", Key, port)
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

// NewContainer creates a blob container on Azurite and returns its client.
func NewContainer(t testing.TB, conn, name string) *container.Client {
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
