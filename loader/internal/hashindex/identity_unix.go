//go:build unix

package loader

import (
	"io/fs"
	"syscall"
)

// statIdentity is a file's identity but for its samples.
func statIdentity(st fs.FileInfo) (fileIdentity, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileIdentity{}, false
	}
	return fileIdentity{Dev: uint64(s.Dev), Ino: uint64(s.Ino), Size: st.Size(), Mtime: st.ModTime().UnixNano(), Ctime: statCtime(s)}, true
}
