package ggml

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/ggload/ggload/bindings"
)

// HostBackends are the backend modules (Options.Backends) of a process
// that puts weights on the CPU and RPC servers alone: the CPU's and
// RPC's. It is nil (every module) where the native set that Open would
// find with libDir and variant cannot say so, or holds a module that may
// register a GPU but no RPC module: llama.cpp prints its lines about
// offloading whenever an RPC or a GPU backend is registered
// (llama_supports_gpu_offload), so that RPC's module, cheap while it has
// no server, keeps them exact without the GPUs' modules.
func HostBackends(libDir, variant string) []string {
	loc, err := bindings.Find(bindings.FindOptions{Dir: libDir, Variant: variant})
	if err != nil {
		return nil // Open says why
	}
	if mods := loc.Modules(); !slices.Contains(mods, "rpc") && slices.ContainsFunc(mods, mayHoldGPUs) {
		return nil
	}
	return []string{"cpu", "rpc"}
}

// mayHoldGPUs reports whether a backend module may register a GPU: any
// but the CPU's, RPC's and the CPU's accelerators.
func mayHoldGPUs(module string) bool {
	return !slices.Contains([]string{"cpu", "rpc", "blas", "zendnn"}, module)
}

// MathThreads is the CPU thread count llama.cpp's tools default to
// (common_cpu_get_num_math): the physical cores, one per set of thread
// siblings the kernel lists (hyper-threads add nothing to linear
// algebra), at most the CPUs this process may run on, else every
// logical CPU. (On a hybrid x86 CPU llama.cpp also
// leaves the efficiency cores out; ggload counts them.) More threads
// than cores would spin at the CPU backend's barriers against each
// other: on two cores, four threads decode tens of times slower.
func MathThreads() int { return mathThreads() }

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
			return min(len(siblings), runtime.NumCPU())
		}
	}
	return runtime.NumCPU()
})
