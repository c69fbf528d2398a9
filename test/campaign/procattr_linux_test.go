package campaign

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd when the test process dies, so an
// interrupted campaign leaves no processes behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
