// Command package zips a function app folder for zip deployment to a Linux
// plan: host.json at the root of the archive, every entry marked as created
// on Unix with a fixed mode, whatever the build machine's file modes are:
// 0755 for the custom handler's executable (host.json's
// customHandler.description.defaultExecutablePath), 0644 for every other
// file. Linux Premium plans mount the zip and apply Unix modes only from
// Unix entries; a zip made on Windows would otherwise carry 0666 and the
// host could not start the handler.
package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

func main() {
	dir := flag.String("dir", "build/linux", "app folder to zip (holds host.json)")
	out := flag.String("out", "dist/ehmirror-functionapp.zip", "zip file to write")
	flag.Parse()
	if err := write(*dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", *out)
}

// Modes of the archive's entries.
const (
	executableMode fs.FileMode = 0o755
	fileMode       fs.FileMode = 0o644
)

// handlerPath returns the archive path of the custom handler's executable
// named by host.json (customHandler.description.defaultExecutablePath).
func handlerPath(hostJSON []byte) (string, error) {
	var host struct {
		CustomHandler struct {
			Description struct {
				DefaultExecutablePath string `json:"defaultExecutablePath"`
			} `json:"description"`
		} `json:"customHandler"`
	}
	if err := json.Unmarshal(hostJSON, &host); err != nil {
		return "", fmt.Errorf("host.json: %w", err)
	}
	p := host.CustomHandler.Description.DefaultExecutablePath
	if p == "" {
		return "", errors.New("host.json: customHandler.description.defaultExecutablePath is empty")
	}
	clean := path.Clean(filepath.ToSlash(p))
	if path.IsAbs(clean) || clean == ".." || len(clean) > 2 && clean[:3] == "../" {
		return "", fmt.Errorf("host.json: customHandler.description.defaultExecutablePath %q is not inside the app folder", p)
	}
	return clean, nil
}

func write(dir, out string) error {
	hostJSON, err := os.ReadFile(filepath.Join(dir, "host.json"))
	if err != nil {
		return fmt.Errorf("%s has no host.json: %w", dir, err)
	}
	handler, err := handlerPath(hostJSON)
	if err != nil {
		return err
	}
	if info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(handler))); err != nil || !info.Mode().IsRegular() {
		return fmt.Errorf("%s: the custom handler %q (host.json customHandler.description.defaultExecutablePath) is missing or not a file", dir, handler)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &zip.FileHeader{Name: filepath.ToSlash(rel), Method: zip.Deflate, Modified: info.ModTime()}
		// SetMode marks the entry as made on Unix, with these mode bits.
		if hdr.Name == handler {
			hdr.SetMode(executableMode)
		} else {
			hdr.SetMode(fileMode)
		}
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(w, src)
		return err
	})
	return errors.Join(err, zw.Close(), f.Close())
}
