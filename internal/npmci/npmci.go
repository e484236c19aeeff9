// Package npmci installs a pinned npm project (a folder with package.json,
// package-lock.json and its scripts) for tests that run Microsoft's
// JavaScript SDKs: into the user cache, once per lock file content, with
// `npm ci`. Node.js and npm are required peers of those tests, never
// skipped.
package npmci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// installTimeout bounds one `npm ci` (the registry is reached once per lock
// file; later runs find node_modules in the cache).
const installTimeout = 5 * time.Minute

// Install copies the regular files of src into a cache directory named
// name-<lock file digest> and runs `npm ci` there unless the file probe
// (a path relative to the directory, e.g.
// node_modules/@azure/event-hubs/package.json) already exists. It returns
// the directory, where the scripts sit beside their node_modules.
func Install(ctx context.Context, src, name, probe string) (string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("npmci: Node.js 20+ and npm are needed on PATH: %w", err)
		}
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", fmt.Errorf("npmci: %w", err)
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "ehmirror", name+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("npmci: %w", err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", fmt.Errorf("npmci: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", fmt.Errorf("npmci: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return "", fmt.Errorf("npmci: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, probe)); err == nil {
		return dir, nil
	}
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npmci: npm ci in %s: %w\n%s", dir, err, out)
	}
	return dir, nil
}
