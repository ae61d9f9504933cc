//go:build !linux

package pool

import "github.com/ggload/ggload/ggml"

// hostAvailable is the host memory the pool may fill by default: the
// free memory ggml's CPU device reports.
func hostAvailable(cpu *ggml.Device) uint64 {
	if cpu == nil {
		return 0
	}
	free, _ := cpu.Memory()
	return free
}
