package main

import "github.com/ggload/ggload/ggml"

// mathThreads is the CPU thread count llama.cpp's tools default to
// (common_cpu_get_num_math): ggml.MathThreads, the physical cores.
func mathThreads() int { return ggml.MathThreads() }
