//go:build !linux

package mmap

const mapPopulate = 0

func adviseSequential(fd int) error { return nil }
