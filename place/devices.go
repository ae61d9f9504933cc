// Port of llama.cpp src/llama.cpp (v0.5.0): llama_prepare_model_devices,
// the model's device list.

package place

import (
	"fmt"
	"strings"
	"sync"

	"github.com/ggload/ggload/ggml"
)

// candidate is what device selection needs to know of a device. The real
// devices of a runtime implement it through devView; tests of lists a
// machine cannot produce (two GPUs with one PCI id, iGPUs) use doubles.
type candidate interface {
	Name() string
	Type() ggml.DeviceType
	IsRPC() bool
	DeviceID() string
	Backend() string // the backend (registry) the device belongs to
}

type devView struct{ d *ggml.Device }

func (v devView) Name() string          { return v.d.Name() }
func (v devView) Type() ggml.DeviceType { return v.d.Type() }
func (v devView) IsRPC() bool           { return v.d.IsRPC() }
func (v devView) DeviceID() string      { return v.d.DeviceID() }
func (v devView) Backend() string       { return v.d.BackendName() }

// selectDevices is llama_prepare_model_devices' default selection: RPC
// devices first, then GPUs without repeating a PCI device id, then iGPUs
// only when there is no GPU; CPU and ACCEL devices are handled separately.
// Split mode none keeps main_gpu alone (none when it is negative). It
// returns indexes into all and the log lines llama.cpp prints.
func selectDevices(all []candidate, mode SplitMode, mainGPU int) ([]int, []string, error) {
	var rpc, gpus, igpus []int
	var log []string
	for i, d := range all {
		switch d.Type() {
		case ggml.DeviceCPU, ggml.DeviceAccel:
		case ggml.DeviceGPU:
			if d.IsRPC() {
				rpc = append(rpc, i)
				continue
			}
			dup := -1
			if id := d.DeviceID(); id != "" {
				for _, g := range gpus {
					if all[g].DeviceID() == id {
						dup = g
						break
					}
				}
			}
			if dup >= 0 {
				log = append(log, fmt.Sprintf("skipping device %s with id %s - already using device %s with the same id", d.Name(), d.DeviceID(), all[dup].Name()))
				continue
			}
			gpus = append(gpus, i)
		case ggml.DeviceIGPU:
			if len(igpus) == 0 || all[igpus[len(igpus)-1]].Backend() == d.Backend() {
				igpus = append(igpus, i)
			}
		case ggml.DeviceMeta:
			return nil, nil, fmt.Errorf("place: device %s is a meta device; it cannot be enumerated", d.Name())
		}
	}
	devs := append(append([]int{}, rpc...), gpus...)
	if len(gpus) == 0 {
		devs = append(devs, igpus...)
	}
	return applyMainGPU(all, devs, mode, mainGPU, log)
}

func applyMainGPU(all []candidate, devs []int, mode SplitMode, mainGPU int, log []string) ([]int, []string, error) {
	if mode != SplitNone || len(devs) == 0 {
		return devs, log, nil
	}
	if mainGPU < 0 {
		return nil, log, nil
	}
	if mainGPU >= len(devs) {
		names := make([]string, len(devs))
		for i, d := range devs {
			names[i] = fmt.Sprintf("%d=%s", i, all[d].Name())
		}
		return nil, log, fmt.Errorf("place: invalid main GPU %d: %d devices (%s)", mainGPU, len(devs), strings.Join(names, ", "))
	}
	return []int{devs[mainGPU]}, log, nil
}

// resolveDevices turns the device list of Params into devices: explicit
// names in their order (["none"] for no offload), or the default selection.
func resolveDevices(rt *ggml.Runtime, p Params) ([]*ggml.Device, []string, error) {
	all := rt.Devices()
	if len(p.DeviceNames) > 0 {
		if len(p.DeviceNames) == 1 && strings.EqualFold(p.DeviceNames[0], "none") {
			return nil, nil, nil
		}
		var devs []*ggml.Device
		for _, name := range p.DeviceNames {
			d, err := rt.DeviceByName(name)
			if err != nil {
				return nil, nil, fmt.Errorf("place: --device: %w", err)
			}
			if d.Type() == ggml.DeviceCPU {
				// llama.cpp's parse_device_list: the CPU is where what is
				// not offloaded stays, not a device to offload to
				return nil, nil, fmt.Errorf("place: --device: invalid device: %s (the CPU holds what is not offloaded; it is no device to offload to)", d.Name())
			}
			devs = append(devs, d)
		}
		cands := make([]candidate, len(devs))
		idx := make([]int, len(devs))
		for i, d := range devs {
			cands[i], idx[i] = devView{d}, i
		}
		sel, log, err := applyMainGPU(cands, idx, p.SplitMode, p.MainGPU, nil)
		if err != nil {
			return nil, nil, err
		}
		out := make([]*ggml.Device, len(sel))
		for i, j := range sel {
			out[i] = devs[j]
		}
		return out, log, nil
	}
	if p.SplitMode == SplitTensor {
		// every device but those that use the CPU's buffer type, in
		// registry order
		var out []*ggml.Device
		var log []string
		cpuBuf := rt.CPUBufferType()
		for _, d := range all {
			if d.BufferType() == cpuBuf {
				log = append(log, fmt.Sprintf("llama_prepare_model_devices: skipping %s (%s) for tensor parallelism", d.Name(), d.Description()))
				continue
			}
			out = append(out, d)
		}
		return out, log, nil
	}
	cands := make([]candidate, len(all))
	for i, d := range all {
		cands[i] = devView{d}
	}
	sel, log, err := selectDevices(cands, p.SplitMode, p.MainGPU)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*ggml.Device, len(sel))
	for i, j := range sel {
		out[i] = all[j]
	}
	return out, log, nil
}

// Devices is the model's device list a plan of params uses (as
// llama.cpp's llama_model_load chooses it), without planning: what Fit
// measures, in the order its FitOptions.Targets follow.
func Devices(rt *ggml.Runtime, params Params) ([]*ggml.Device, error) {
	devs, _, err := resolveDevices(rt, params)
	return devs, err
}

// KeepConnected keeps ggml's RPC client connected to the RPC servers
// among the devices of each of params until release is called
// (ggml.Device.KeepConnected): planning, and a load after it, then make
// one connection to each server, not one per call that asks it. NewContext
// and FitContext hold them while they plan; a caller that plans and then
// loads holds them across both. (A server whose buffer type only -ot
// names is asked little while planning: it is not held.) Params that name
// no device rt has hold nothing: planning reports it. Calling release
// again does nothing.
func KeepConnected(rt *ggml.Runtime, params ...Params) (release func()) {
	var held []func()
	seen := map[*ggml.Device]bool{}
	for _, p := range params {
		devs, _, _ := resolveDevices(rt, p)
		for _, d := range devs {
			if seen[d] || !d.IsRPC() {
				continue
			}
			seen[d] = true
			if r, err := d.KeepConnected(); err == nil {
				held = append(held, r)
			}
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, r := range held {
				r()
			}
		})
	}
}
