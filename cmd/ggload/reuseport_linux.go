package main

import "syscall"

// soReusePort is Linux's SO_REUSEPORT (asm-generic/socket.h), which
// package syscall does not name.
const soReusePort = 0xf

// reusePort sets SO_REUSEPORT on a listening socket (--reuse-port).
func reusePort(fd uintptr) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort, 1)
}
