package ggml

import (
	"sync"

	"github.com/ggload/ggload/bindings"
)

// numaOnce guards the native NUMA set-up: it is the process's.
var numaOnce sync.Once

// NUMAStrategy is how the CPU backend spreads its work over NUMA nodes
// (ggml_numa_strategy; llama.cpp's --numa).
type NUMAStrategy int32

// NUMA strategies.
const (
	NUMADisabled   NUMAStrategy = 0
	NUMADistribute NUMAStrategy = 1 // spread execution evenly over all nodes
	NUMAIsolate    NUMAStrategy = 2 // only the node execution started on
	NUMANumactl    NUMAStrategy = 3 // the CPU map numactl gives
)

// InitNUMA tells the CPU backend the NUMA strategy, once per process, as
// llama.cpp's llama_numa_init does for --numa; IsNUMA then reports whether
// it found more than one node. It returns false when the CPU backend has
// no NUMA support. NUMADisabled does nothing.
func (rt *Runtime) InitNUMA(s NUMAStrategy) bool {
	if s == NUMADisabled {
		return true
	}
	cpu := rt.CPUDevice()
	if cpu == nil || s < NUMADistribute || s > NUMANumactl {
		return false
	}
	fn, ok := bindings.Proc[func(int32)](rt.lib, rt.lib.DevBackendReg(cpu.h), "ggml_backend_cpu_numa_init")
	if !ok {
		return false
	}
	numaOnce.Do(func() { fn(int32(s)) })
	return true
}
