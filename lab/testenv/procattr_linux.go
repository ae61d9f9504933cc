package testenv

import "syscall"

// childAttr makes a helper process die with the test binary that started it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
