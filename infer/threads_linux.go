package infer

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// procStat reads the load from /proc/stat, over the CPUs the process may
// run on, and the process's CPU time from getrusage.
type procStat struct {
	cpus map[string]bool // "cpu3"; nil: every CPU
}

// userHZ is the unit of /proc/stat's times (USER_HZ, 100 on Linux's
// architectures).
const userHZ = 100

func newLoadMeter() loadMeter {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return procStat{}
	}
	cpus := map[string]bool{}
	for i := range 1024 { // what a CPUSet holds
		if set.IsSet(i) {
			cpus["cpu"+strconv.Itoa(i)] = true
		}
	}
	return procStat{cpus: cpus}
}

func (m procStat) sample() (cpuSample, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, false
	}
	var busy float64
	found := false
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		// cpuN user nice system idle iowait irq softirq steal ...
		if len(f) < 9 || !bytes.HasPrefix(f[0], []byte("cpu")) {
			continue
		}
		name := string(f[0])
		if m.cpus == nil && name != "cpu" || m.cpus != nil && !m.cpus[name] {
			continue
		}
		for _, i := range []int{1, 2, 3, 6, 7, 8} {
			v, err := strconv.ParseUint(string(f[i]), 10, 64)
			if err != nil {
				return cpuSample{}, false
			}
			busy += float64(v)
		}
		found = true
	}
	if !found {
		return cpuSample{}, false
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuSample{}, false
	}
	own := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	return cpuSample{busy: busy / userHZ, own: own}, true
}

func (procStat) running() (int, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("procs_running ")); ok {
			n, err := strconv.Atoi(string(v))
			return n, err == nil
		}
	}
	return 0, false
}
