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
