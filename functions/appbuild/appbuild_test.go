package appbuild

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ehmirror/ehmirror/functions"
)

func TestBuildLaysOutTheApp(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Build(context.Background(), root, dir); err != nil {
		t.Fatal(err)
	}
	app, err := functions.LoadApp(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(app.Functions) != 8 { // MirrorTimer, CatchUp, Status, Offsets, Pause, Resume, Cutover, Metrics
		t.Errorf("%d functions, want 8", len(app.Functions))
	}
	if info, err := os.Stat(filepath.Join(dir, "handler")); err != nil || info.Mode()&0o111 == 0 {
		t.Errorf("handler binary missing or not executable: %v", err)
	}
	if _, err := ModuleRoot(t.TempDir()); err == nil {
		t.Error("ModuleRoot found a module outside the repository")
	}
}
