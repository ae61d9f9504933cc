package loader

import "io/fs"

func blockSize(fs.FileInfo) uint64 { return 1 }

// addressSpace: Windows has no address-space limit to check.
func addressSpace() (limit, used uint64, ok bool) { return 0, 0, false }
