//go:build !unix

package funchost

import (
	"os"
	"os/exec"
)

func setProcAttr(cmd *exec.Cmd) {}

// interruptProcess kills: os.Interrupt cannot be sent on this platform.
func interruptProcess(p *os.Process) error {
	return p.Kill()
}

// lockFile does nothing here: lease files are atomic only between the
// hosts of one process on this platform (Storage's mutex).
func lockFile(f *os.File) error { return nil }

func unlockFile(f *os.File) error { return nil }
