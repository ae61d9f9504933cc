//go:build unix

package bench

import "golang.org/x/sys/unix"

// freshPages maps n bytes of anonymous memory no one has touched, with
// transparent huge pages advised where the system has them (as the loader
// advises its CPU buffers).
func freshPages(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	adviseHugePages(b)
	return b, nil
}

func releasePages(b []byte) { unix.Munmap(b) }
