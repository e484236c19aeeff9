// Package appbuild lays out this repository's function app folder the way
// `make build` does: host.json, one folder per function with its
// function.json, and the handler binary built from ./handler. The demo, the
// benchmark and the tests that run the real handler use it.
package appbuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModulePath is this repository's Go module.
const ModulePath = "github.com/ehmirror/ehmirror"

// ModuleRoot returns the directory holding this module's go.mod, searching
// from dir upwards.
func ModuleRoot(dir string) (string, error) {
	for d := dir; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+ModulePath+"\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of %s in %s or above; run from the repository", ModulePath, dir)
		}
		d = parent
	}
}

// BuildHandler builds ./handler of the module at root into out: static
// (CGO_ENABLED=0) with trimmed paths, as `make build` does.
func BuildHandler(ctx context.Context, root, out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build the handler: %w", err)
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-o", out, "./handler")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if data, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./handler: %w: %s", err, strings.TrimSpace(string(data)))
	}
	return nil
}

// Build lays out the function app of the module at root in dir: host.json,
// every functions/*/function.json in a folder of its own, and the handler.
func Build(ctx context.Context, root, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := copyFile(filepath.Join(root, "host.json"), filepath.Join(dir, "host.json")); err != nil {
		return err
	}
	defs, err := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	if err != nil || len(defs) == 0 {
		return fmt.Errorf("no functions/*/function.json under %s", root)
	}
	for _, def := range defs {
		fn := filepath.Base(filepath.Dir(def))
		if err := os.MkdirAll(filepath.Join(dir, fn), 0o755); err != nil {
			return fmt.Errorf("creating the %s folder: %w", fn, err)
		}
		if err := copyFile(def, filepath.Join(dir, fn, "function.json")); err != nil {
			return err
		}
	}
	return BuildHandler(ctx, root, filepath.Join(dir, "handler"))
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}
