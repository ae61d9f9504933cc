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
	if len(params.DeviceNames) == 1 && strings.EqualFold(params.DeviceNames[0], "none") {
		ld.Devices = []*ggml.Device{}
	} else {
		for _, n := range params.DeviceNames {
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

// ContextParamsFor is the llama_context_params llama.cpp's command line
// makes of ggload's context options (common_context_params_to_llama):
// the library's defaults, then every option the CLI sets.
func (l *Lib) ContextParamsFor(c place.ContextParams) (ContextParams, error) {
	p, err := l.ContextDefaultParams()
	if err != nil {
		return p, err
	}
	p.NCtx = uint32(c.NCtx)
	p.NSeqMax = uint32(max(c.NParallel, 1))
	p.NBatch, p.NUBatch = uint32(place.DefaultNBatch), uint32(place.DefaultNUBatch)
	if c.NBatch > 0 {
		p.NBatch = uint32(c.NBatch)
	}
	if c.NUBatch > 0 {
		p.NUBatch = uint32(c.NUBatch)
	}
	p.NOutputsMax = uint32(c.NOutputsMax)
	p.NOutputsMaxPerSeq = 1
	p.FlashAttnType = int32(c.FlashAttn.Llama())
	p.OffloadKQV = !c.NoKVOffload
	p.SWAFull = c.SWAFull
	p.KVUnified = c.KVUnified
	p.TypeK, p.TypeV = int32(c.TypeK.Type()), int32(c.TypeV.Type())
	p.Embeddings, p.PoolingType = c.Embeddings, int32(c.Pooling.Llama())
	p.NRSSeq = uint32(c.NRSSeq)
	return p, nil
}
