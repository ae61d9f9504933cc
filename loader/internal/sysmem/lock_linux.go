package sysmem

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// canLockAnything reports whether the process has CAP_IPC_LOCK, which
// lifts RLIMIT_MEMLOCK.
func canLockAnything() bool {
	v, ok := statusField("CapEff:")
	if !ok {
		return false
	}
	caps, err := strconv.ParseUint(v, 16, 64)
	const capIPCLock = 14
	return err == nil && caps&(1<<capIPCLock) != 0
}

// lockedNow is the process's locked memory (VmLck), in bytes.
func lockedNow() (uintptr, bool) {
	v, ok := statusField("VmLck:")
	if !ok {
		return 0, false
	}
	kb, err := strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		return 0, false
	}
	return uintptr(kb << 10), true
}

// statusField is the value of a line of /proc/self/status.
func statusField(key string) (string, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
