// Command package zips a function app folder for zip deployment to a Linux
// plan: host.json at the root of the archive, every entry marked as created
// on Unix so that the handler's executable bit survives (Linux Premium plans
// mount the zip and apply Unix modes only from Unix entries).
package main

import (
	"archive/zip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
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

func write(dir, out string) error {
	if _, err := os.Stat(filepath.Join(dir, "host.json")); err != nil {
		return fmt.Errorf("%s has no host.json: %w", dir, err)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := zip.FileInfoHeader(info) // sets CreatorVersion to Unix and the mode bits
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.Method = zip.Deflate
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(w, src)
		return err
	})
	return errors.Join(err, zw.Close(), f.Close())
}
