//go:build unix

package ggml_test

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapReadOnly maps the first n bytes of f, shared and read-only.
func mapReadOnly(f *os.File, n int) ([]byte, func(), error) {
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return m, func() { unix.Munmap(m) }, nil
}
