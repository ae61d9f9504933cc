package main

import (
	"os"
	"runtime"
	"strconv"
	"sync"
)

// mathThreads is the CPU thread count llama.cpp's tools default to
// (common_cpu_get_num_math): the physical cores, one per set of thread
// siblings the kernel lists (hyper-threads add nothing to linear
// algebra), else every logical CPU. (On a hybrid x86 CPU llama.cpp also
// leaves the efficiency cores out; ggload counts them.) More threads
// than cores would spin at the CPU backend's barriers against each
// other: on two cores, four threads decode tens of times slower.
var mathThreads = sync.OnceValue(func() int {
	if runtime.GOOS == "linux" {
		siblings := map[string]bool{}
		for cpu := 0; ; cpu++ {
			b, err := os.ReadFile("/sys/devices/system/cpu/cpu" + strconv.Itoa(cpu) + "/topology/thread_siblings")
			if err != nil {
				break
			}
			siblings[string(b)] = true
		}
		if len(siblings) > 0 {
			return len(siblings)
		}
	}
	return runtime.NumCPU()
})
