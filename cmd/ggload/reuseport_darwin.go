package main

import "syscall"

// reusePort sets SO_REUSEPORT on a listening socket (--reuse-port).
func reusePort(fd uintptr) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEPORT, 1)
}
