//go:build unix

package loader

import "golang.org/x/sys/unix"

// anonMap maps n bytes of anonymous memory (page-aligned, zeroed), outside
// Go's heap: anonUnmap gives it back to the system at once.
func anonMap(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

func anonUnmap(b []byte) { _ = unix.Munmap(b) }
