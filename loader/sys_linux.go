//go:build linux

package loader

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const oDirect = unix.O_DIRECT

// openRandom opens the file f is open on again, a descriptor of its own
// (a new open file description, whatever became of f's path) advised
// random (POSIX_FADV_RANDOM): its reads bring in their own pages only,
// with no readahead around them.
func openRandom(f *os.File) (*os.File, error) {
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// directAlign is what direct reads of a file need, as statx reports it
// (STATX_DIOALIGN, and STATX_DIO_READ_ALIGN where reads may be finer than
// writes): align, the alignment of the file offsets and lengths read and
// of the buffers read into (the larger of statx's two, so that one
// aligned buffer serves any aligned read), and mem, the alignment of the
// memory a read may go straight into. Where the system does not say, both
// are blk, the file's block size. The file is path, or the open
// descriptor fd when path is empty.
func directAlign(fd int, path string, blk int64) (align, mem int64) {
	flags := unix.AT_EMPTY_PATH
	if path != "" {
		fd, flags = unix.AT_FDCWD, 0
	}
	var sx unix.Statx_t
	if unix.Statx(fd, path, flags, unix.STATX_DIOALIGN|unix.STATX_DIO_READ_ALIGN, &sx) != nil ||
		sx.Mask&unix.STATX_DIOALIGN == 0 || !powerOfTwo(sx.Dio_offset_align) || !powerOfTwo(sx.Dio_mem_align) {
		return blk, blk
	}
	off := int64(sx.Dio_offset_align)
	if sx.Mask&unix.STATX_DIO_READ_ALIGN != 0 && powerOfTwo(sx.Dio_read_offset_align) {
		off = min(off, int64(sx.Dio_read_offset_align))
	}
	mem = int64(sx.Dio_mem_align)
	return max(off, mem), mem
}

func powerOfTwo(n uint32) bool { return n > 0 && n&(n-1) == 0 }
