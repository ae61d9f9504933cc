//go:build unix

package sample

import (
	"syscall"
	"testing"
	"time"
)

// cpuPerOp reports the process's CPU time per iteration (cpu-ns/op) when
// the returned function runs: on a machine shared with other work the
// wall time per iteration says less.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
	}
}
