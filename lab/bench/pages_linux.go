package bench

import "golang.org/x/sys/unix"

func adviseHugePages(b []byte) { unix.Madvise(b, unix.MADV_HUGEPAGE) }
