//go:build linux

package mmap

import "golang.org/x/sys/unix"

const mapPopulate = unix.MAP_POPULATE

// adviseSequential is posix_fadvise(POSIX_FADV_SEQUENTIAL).
func adviseSequential(fd int) error { return unix.Fadvise(fd, 0, 0, unix.FADV_SEQUENTIAL) }
