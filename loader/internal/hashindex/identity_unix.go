//go:build unix

package hashindex

import (
	"io/fs"
	"syscall"
)

// statIdentity is a file's identity but for its samples.
func statIdentity(st fs.FileInfo) (Identity, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return Identity{}, false
	}
	return Identity{Dev: uint64(s.Dev), Ino: uint64(s.Ino), Size: st.Size(), Mtime: st.ModTime().UnixNano(), Ctime: statCtime(s)}, true
}
