package testenv

import (
	"os"
	"syscall"
)

// sigStop has no Windows counterpart; NetHosts (its only user) needs Linux
// network namespaces and never starts a host here.
const sigStop = syscall.Signal(0x13)

// signalPID: Windows can only terminate a process.
func signalPID(pid int, sig syscall.Signal) {
	if sig != syscall.SIGKILL {
		return
	}
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
