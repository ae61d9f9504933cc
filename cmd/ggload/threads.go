package main

import "github.com/ggload/ggload/infer"

// mathThreads is the CPU thread count llama.cpp's tools default to
// (common_cpu_get_num_math): the physical cores (infer.PhysicalCores).
// More threads than cores would spin at the CPU backend's barriers
// against each other: on two cores, four threads decode tens of times
// slower.
func mathThreads() int { return infer.PhysicalCores() }
