// Port of llama.cpp tools/mtmd/clip.cpp (v0.5.0): the projector's device
// and buffer sizes.

package place

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/ggml"
)

// MmprojOptions are llama.cpp's options for a multimodal projector's
// device: --mmproj-offload / --no-mmproj-offload, -mmdev (--mmproj-device)
// and the model's own --device list, which the projector follows when no
// -mmdev names its device.
type MmprojOptions struct {
	// NoOffload is --no-mmproj-offload: the projector stays on the CPU.
	NoOffload bool
	// Device is -mmdev's value: "" when not given, "none" for the CPU,
	// else one device name.
	Device string
	// Devices is --device's list ("none" alone: no device).
	Devices []string
	// FlashAttn is the context's -fa (auto: clip tries it and falls
	// back): the warm-up's graphs depend on it.
	FlashAttn FlashAttn
	// ImageMinTokens and ImageMaxTokens are --image-min-tokens and
	// --image-max-tokens (0: the model's own): the dynamic-resolution
	// encoders' image sizes, the warm-up's among them.
	ImageMinTokens, ImageMaxTokens int
}

// MmprojDevice is the device the pin's clip runs a projector on, and so
// the device of its weight buffer (that device's default buffer type):
// -mmdev's device; else, with offloading on, --device's first; else the
// first GPU, else the first integrated GPU, else the CPU. A -mmdev that
// names no device, or the CPU, or more than one device is refused as
// llama.cpp refuses it.
func MmprojDevice(rt *ggml.Runtime, o MmprojOptions) (*ggml.Device, error) {
	useGPU := !o.NoOffload
	var dev *ggml.Device
	switch {
	case o.Device == "none":
		useGPU = false
	case o.Device != "":
		names := strings.Split(o.Device, ",")
		if len(names) > 1 {
			return nil, fmt.Errorf("place: -mmdev %s: only one device may be specified for mmproj", o.Device)
		}
		d, err := rt.DeviceByName(names[0])
		if err != nil || d.Type() == ggml.DeviceCPU {
			return nil, fmt.Errorf("place: -mmdev: invalid device: %s", names[0])
		}
		useGPU, dev = true, d
	case useGPU && len(o.Devices) > 0:
		if o.Devices[0] == "none" {
			useGPU = false
			break
		}
		d, err := rt.DeviceByName(o.Devices[0])
		if err != nil {
			return nil, fmt.Errorf("place: --device: invalid device: %s", o.Devices[0])
		}
		dev = d
	}
	if !useGPU {
		return cpuDevice(rt)
	}
	if dev != nil {
		return dev, nil
	}
	for _, typ := range []ggml.DeviceType{ggml.DeviceGPU, ggml.DeviceIGPU} {
		for _, d := range rt.Devices() {
			if d.Type() == typ {
				return d, nil
			}
		}
	}
	return cpuDevice(rt)
}

func cpuDevice(rt *ggml.Runtime) (*ggml.Device, error) {
	if d := rt.CPUDevice(); d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("place: no CPU device for the projector")
}

// MmprojTensor is one tensor of a projector's weight buffer.
type MmprojTensor struct {
	Name   string
	Type   ggml.Type
	Shape  ggml.Shape
	Bytes  int64 // the size of its data
	Offset int64 // absolute offset of its data in the file
}

// MmprojBufferSize is the size of the weight buffer clip allocates for
// tensors in buffer type bt (ggml_backend_alloc_ctx_tensors_from_buft:
// each tensor's allocation size padded to the type's alignment, plus what
// the backend adds to an allocation).
func MmprojBufferSize(rt *ggml.Runtime, bt ggml.BufferType, tensors []MmprojTensor) (uint64, error) {
	return ctxBufferSize(rt, bt, tensors, "projector")
}

// ctxBufferSize is the size of the buffer that
// ggml_backend_alloc_ctx_tensors_from_buft gives a context of these
// tensors (what names them in errors).
func ctxBufferSize(rt *ggml.Runtime, bt ggml.BufferType, tensors []MmprojTensor, what string) (uint64, error) {
	align := max(bt.Alignment(), 1)
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: len(tensors) + 1, NoAlloc: true})
	if err != nil {
		return 0, err
	}
	defer ctx.Free()
	var total uint64
	for _, t := range tensors {
		gt, err := ctx.NewTensor(t.Type, t.Shape[:]...)
		if err != nil {
			return 0, fmt.Errorf("place: %s tensor %s: %w", what, t.Name, err)
		}
		total += (bt.AllocSize(gt) + align - 1) / align * align
	}
	if total == 0 {
		return 0, nil
	}
	if max := bt.MaxSize(); max > 0 && total > max {
		return 0, fmt.Errorf("place: %s tensors of %d bytes exceed %s's largest buffer (%d bytes)", what, total, bt.Name(), max)
	}
	slack, err := bt.AllocSlack()
	if err != nil {
		return 0, fmt.Errorf("place: %s: %w", bt.Name(), err)
	}
	return total + slack, nil
}
