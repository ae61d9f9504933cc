package llama

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/place"
)

// LoadFor is the llama.cpp load of the model at path that ggload's
// placement parameters describe: every field llama_model_params has for
// them (split mode and main GPU included: Load's zero values are not
// llama.cpp's defaults), the devices by name (["none"]: none, the CPU
// alone), and -cmoe and -ncmoe as the tensor overrides llama.cpp's
// common code makes of them.
func LoadFor(rt *ggml.Runtime, path string, params place.Params) (Load, error) {
	ld := Load{Path: path, NGPULayers: params.NGPULayers.Llama(), SplitMode: params.SplitMode.Llama(),
		MainGPU: params.MainGPU, LoadMode: params.LoadMode.Llama(), LazyMode: params.Lazy.Llama(), TensorSplit: params.TensorSplit,
		NoHost: params.NoHost, NoExtra: params.NoExtraBufts, LoadMTP: params.LoadMTP, KVOverrides: params.KVOverrides}
	if len(params.Devices) == 1 && strings.EqualFold(params.Devices[0], "none") {
		ld.Devices = []*ggml.Device{}
	} else {
		for _, n := range params.Devices {
			d, err := rt.DeviceByName(n)
			if err != nil {
				return ld, err
			}
			ld.Devices = append(ld.Devices, d)
		}
	}
	if params.CPUMoE {
		ld.Overrides = append(ld.Overrides, [2]string{place.ExpertsPattern, "CPU"})
	}
	for i := 0; i < params.NCPUMoE; i++ {
		ld.Overrides = append(ld.Overrides, [2]string{fmt.Sprintf(`blk\.%d%s`, i, place.ExpertsPattern), "CPU"})
	}
	for _, o := range params.Overrides {
		ld.Overrides = append(ld.Overrides, [2]string{o.Pattern, o.BufferType})
	}
	return ld, nil
}
