package loader

import "io/fs"

func blockSize(fs.FileInfo) uint64 { return 1 }
