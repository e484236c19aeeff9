package main

import (
	"archive/zip"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// appDir lays out a function app as a build machine without executable bits
// (Windows, or a checkout on a FAT/NTFS mount) would: every file 0644.
func appDir(t *testing.T, exe string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"host.json":                  `{"version":"2.0","customHandler":{"description":{"defaultExecutablePath":"` + exe + `"}}}`,
		"MirrorTimer/function.json":  `{"bindings":[]}`,
		filepath.FromSlash(exe):      "\x7fELF...",
		"notes/run-me.sh":            "#!/bin/sh\n",
		filepath.Join("Status", "x"): "",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	// A file that happens to be executable on the build machine is not the
	// handler: its mode is normalised too.
	if err := os.Chmod(filepath.Join(dir, "notes", "run-me.sh"), 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// modes reads back each entry's Unix mode and whether it is marked as made
// on Unix (the creator in the upper byte of CreatorVersion is 3).
func modes(t *testing.T, zipPath string) map[string]fs.FileMode {
	t.Helper()
	r, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := map[string]fs.FileMode{}
	for _, f := range r.File {
		if f.CreatorVersion>>8 != 3 {
			t.Errorf("%s: creator %d, want 3 (Unix): the platform ignores the mode bits of other entries", f.Name, f.CreatorVersion>>8)
		}
		out[f.Name] = f.Mode().Perm()
	}
	return out
}

// TestHandlerIsExecutableWhateverTheBuildMachine (issue 14, defect 4): the
// handler entry is 0755 and every other entry 0644, even when the files on
// the build machine carry other modes.
func TestHandlerIsExecutableWhateverTheBuildMachine(t *testing.T) {
	for _, exe := range []string{"handler", "bin/ehmirror"} {
		t.Run(exe, func(t *testing.T) {
			dir := appDir(t, exe)
			out := filepath.Join(t.TempDir(), "app.zip")
			if err := write(dir, out); err != nil {
				t.Fatal(err)
			}
			got := modes(t, out)
			want := map[string]fs.FileMode{
				"host.json":                 0o644,
				"MirrorTimer/function.json": 0o644,
				exe:                         0o755,
				"notes/run-me.sh":           0o644,
				"Status/x":                  0o644,
			}
			if len(got) != len(want) {
				t.Errorf("entries %v, want %v", got, want)
			}
			for name, mode := range want {
				if got[name] != mode {
					t.Errorf("%s: mode %#o, want %#o", name, got[name], mode)
				}
			}
		})
	}
}

// TestPackageRefusesAMissingHandler: a package the host cannot start is not
// written; the error names the setting.
func TestPackageRefusesAMissingHandler(t *testing.T) {
	dir := appDir(t, "handler")
	if err := os.Remove(filepath.Join(dir, "handler")); err != nil {
		t.Fatal(err)
	}
	err := write(dir, filepath.Join(t.TempDir(), "app.zip"))
	if err == nil || !strings.Contains(err.Error(), "defaultExecutablePath") {
		t.Fatalf("err = %v, want one naming defaultExecutablePath", err)
	}
	for _, bad := range []string{`""`, `"../handler"`, `"/usr/bin/handler"`} {
		if _, err := handlerPath([]byte(`{"customHandler":{"description":{"defaultExecutablePath":` + bad + `}}}`)); err == nil {
			t.Errorf("defaultExecutablePath %s accepted", bad)
		}
	}
}
