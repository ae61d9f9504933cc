//go:build darwin || freebsd || netbsd || openbsd

package loader

import "syscall"

func statCtime(s *syscall.Stat_t) int64 { return int64(s.Ctimespec.Sec)*1e9 + int64(s.Ctimespec.Nsec) }
