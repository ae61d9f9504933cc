//go:build unix

package ggml

import "golang.org/x/sys/unix"

// anonPage maps one page of anonymous memory (native code may keep
// pointers to it, which Go memory must not be given).
func anonPage() ([]byte, error) {
	return unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

func freePage(b []byte) { _ = unix.Munmap(b) }
