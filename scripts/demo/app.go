package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is this repository's Go module.
const modulePath = "github.com/ehmirror/ehmirror"

// findModuleRoot returns the directory holding this module's go.mod, from
// dir upwards.
func findModuleRoot(dir string) (string, error) {
	for d := dir; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+modulePath+"\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of %s in %s or above; run the demo from the repository", modulePath, dir)
		}
		d = parent
	}
}

// buildApp lays out the function app in dir as `make build` does: host.json,
// one folder per function with its function.json, and the handler binary.
func buildApp(ctx context.Context, root, dir string) error {
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
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build the handler: %w", err)
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", filepath.Join(dir, "handler"), "./handler")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build ./handler: %w\n%s", err, strings.TrimSpace(string(out)))
	}
	return nil
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

// loadSettings reads the "Values" of a local.settings.json file.
func loadSettings(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading settings: %w", err)
	}
	var f struct {
		Values map[string]string
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Values) == 0 {
		return nil, errors.New(path + ": no Values")
	}
	return f.Values, nil
}
