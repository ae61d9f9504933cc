package llamaserver

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the server when the test process
// dies, so that no llama-server outlives a crashed test.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
