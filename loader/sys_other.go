//go:build unix && !linux

package loader

const (
	mapPopulate = 0
	oDirect     = 0 // no O_DIRECT: direct-io falls back to buffered reads
)

func adviseSequential(fd int) error { return nil }
