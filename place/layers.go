// Port of llama.cpp src/llama-model.cpp (v0.5.0): load_tensors' split
// points and layer devices.

package place

// Split points and layer assignment, in float32 as llama.cpp computes them
// so that boundary layers land where they land there.

// splitPoints turns per-device shares (tensor split, or free memory) into
// cumulative normalised split points [s1, s1+s2, ..., 1]. All-zero shares
// give a uniform split, where the pinned llama.cpp divides by zero and
// fails the load.
func splitPoints(shares []float32) []float32 {
	out := make([]float32, len(shares))
	var sum float32
	for i, s := range shares {
		sum += s
		out[i] = sum
	}
	for i := range out {
		if sum != 0 {
			out[i] /= sum
		} else {
			out[i] = float32(i+1) / float32(len(out))
		}
	}
	return out
}

// gpuLayers returns i_gpu_start and act_gpu_layers for n_layer_all layers
// (plus the output layer) and ngl offloaded (negative: all).
func gpuLayers(nLayerAll, ngl, nDevices int) (start, act int) {
	if ngl < 0 {
		ngl = nLayerAll + 1
	}
	start = max(nLayerAll+1-ngl, 0)
	if nDevices == 0 {
		return start, 0
	}
	return start, min(ngl, nLayerAll+1)
}

// layerDevice returns the index of layer il's device, or -1 for the CPU
// (std::upper_bound over the split points).
func layerDevice(il, start, act int, splits []float32) int {
	if il < start || il-start >= act {
		return -1
	}
	x := float32(il-start) / float32(act)
	for i, s := range splits {
		if x < s {
			return i
		}
	}
	return len(splits) // past the end: llama.cpp's devices.at() throws
}
