//go:build unix

package funchost

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr puts the handler in its own process group, so a terminal's
// Ctrl+C reaches only the host, which then decides what the handler gets
// (the real host never forwards signals).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func interruptProcess(p *os.Process) error {
	return p.Signal(os.Interrupt)
}

// lockFile takes an exclusive advisory lock on f (flock), held until
// unlockFile: the read-modify-write of a lease file is atomic across
// processes.
func lockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
