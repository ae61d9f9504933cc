//go:build darwin || freebsd || netbsd || openbsd

package hashindex

import "syscall"

// statCtime is the change time of s, in ns.
func statCtime(s *syscall.Stat_t) int64 { return int64(s.Ctimespec.Sec)*1e9 + int64(s.Ctimespec.Nsec) }
