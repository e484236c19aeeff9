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
