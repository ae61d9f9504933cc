//go:build unix

package testenv

import "syscall"

const sigStop = syscall.SIGSTOP

func signalPID(pid int, sig syscall.Signal) { syscall.Kill(pid, sig) }
