package pool

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
)

// hostAvailable is the host memory the pool may fill by default: what
// the kernel says is available to a new allocation without swapping
// (MemAvailable), which ggml's CPU device does not tell (it reports the
// total as free); the total where /proc/meminfo cannot be read.
func hostAvailable(cpu *ggml.Device) uint64 {
	if f, err := os.Open("/proc/meminfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 2 && fs[0] == "MemAvailable:" {
				if kb, err := strconv.ParseUint(fs[1], 10, 54); err == nil {
					return kb << 10
				}
			}
		}
	}
	return hostTotal(cpu)
}

func hostTotal(cpu *ggml.Device) uint64 {
	if cpu == nil {
		return 0
	}
	_, total := cpu.Memory()
	return total
}
