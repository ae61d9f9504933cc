package hashindex

import "syscall"

// statCtime is the change time of s, in ns.
func statCtime(s *syscall.Stat_t) int64 { return s.Ctim.Sec*1e9 + s.Ctim.Nsec }
