//go:build unix

package ggml

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// rpcDescriptors is how many descriptors registering an RPC endpoint needs
// free: the native client may connect twice (registering, then reading the
// devices), each connection taking a descriptor here and two in the guard
// (its end and its connection to the server) until the guard sees the
// first closed.
const rpcDescriptors = 2 * rpcConnDescriptors

// descriptorHeadroom makes sure the process can open n more descriptors,
// by opening them.
func descriptorHeadroom(n int) error {
	fds := make([]int, 0, n)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for range n {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			var lim unix.Rlimit
			limit := "unknown"
			if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
				limit = fmt.Sprint(lim.Cur)
			}
			return fmt.Errorf("too few file descriptors left: %d of the %d an endpoint needs could be opened (%w; RLIMIT_NOFILE is %s: raise it with 'ulimit -n')", len(fds), n, err, limit)
		}
		fds = append(fds, fd)
	}
	return nil
}
