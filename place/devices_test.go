package place

import (
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
)

// fakeDev is a test double for device lists this machine cannot produce
// (two backends seeing one GPU, iGPUs from two backends, ACCEL devices).
type fakeDev struct {
	name, id, backend string
	typ               ggml.DeviceType
}

func (f fakeDev) Name() string          { return f.name }
func (f fakeDev) Type() ggml.DeviceType { return f.typ }
func (f fakeDev) IsRPC() bool           { return f.backend == "RPC" }
func (f fakeDev) DeviceID() string      { return f.id }
func (f fakeDev) Backend() string       { return f.backend }

func names(all []candidate, idx []int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, all[i].Name())
	}
	return out
}

func TestSelectDevicesRules(t *testing.T) {
	cpu := fakeDev{"CPU", "", "CPU", ggml.DeviceCPU}
	blas := fakeDev{"BLAS", "", "BLAS", ggml.DeviceAccel}
	cuda0 := fakeDev{"CUDA0", "0000:01:00.0", "CUDA", ggml.DeviceGPU}
	cuda1 := fakeDev{"CUDA1", "0000:02:00.0", "CUDA", ggml.DeviceGPU}
	vk0 := fakeDev{"Vulkan0", "0000:01:00.0", "Vulkan", ggml.DeviceGPU} // the same card as CUDA0
	vk1 := fakeDev{"Vulkan1", "", "Vulkan", ggml.DeviceGPU}             // no id: never a duplicate
	rpc0 := fakeDev{"RPC0", "", "RPC", ggml.DeviceGPU}
	rpc1 := fakeDev{"RPC1", "", "RPC", ggml.DeviceGPU}
	igpuVK := fakeDev{"Vulkan2", "", "Vulkan", ggml.DeviceIGPU}
	igpuVK2 := fakeDev{"Vulkan3", "", "Vulkan", ggml.DeviceIGPU}
	igpuSYCL := fakeDev{"SYCL0", "", "SYCL", ggml.DeviceIGPU}

	for _, c := range []struct {
		name string
		all  []candidate
		mode SplitMode
		mg   int
		want []string
		log  string
		err  string
	}{
		{"rpc first", []candidate{cpu, cuda0, rpc0, cuda1, rpc1}, SplitLayer, 0, []string{"RPC0", "RPC1", "CUDA0", "CUDA1"}, "", ""},
		{"duplicate id dropped", []candidate{cuda0, vk0, cuda1, vk1}, SplitLayer, 0, []string{"CUDA0", "CUDA1", "Vulkan1"}, "skipping device Vulkan0 with id 0000:01:00.0 - already using device CUDA0", ""},
		{"cpu and accel skipped", []candidate{blas, cpu}, SplitLayer, 0, nil, "", ""},
		{"igpu only without gpu", []candidate{igpuVK, cpu}, SplitLayer, 0, []string{"Vulkan2"}, "", ""},
		{"igpu dropped with a gpu", []candidate{igpuVK, cuda0}, SplitLayer, 0, []string{"CUDA0"}, "", ""},
		{"igpu kept with rpc", []candidate{rpc0, igpuVK}, SplitLayer, 0, []string{"RPC0", "Vulkan2"}, "", ""},
		{"igpus of one backend", []candidate{igpuVK, igpuSYCL, igpuVK2}, SplitLayer, 0, []string{"Vulkan2", "Vulkan3"}, "", ""},
		{"split none keeps main gpu", []candidate{rpc0, cuda0, cuda1}, SplitNone, 2, []string{"CUDA1"}, "", ""},
		{"split none negative main gpu", []candidate{cuda0, cuda1}, SplitNone, -1, nil, "", ""},
		{"split none main gpu out of range", []candidate{rpc0, cuda0}, SplitNone, 2, nil, "", "invalid main GPU 2: 2 devices (0=RPC0, 1=CUDA0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			idx, log, err := selectDevices(c.all, c.mode, c.mg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("want error %q, got %v", c.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(c.all, idx); !slices.Equal(got, c.want) {
				t.Fatalf("devices %v, want %v", got, c.want)
			}
			if c.log != "" && (len(log) == 0 || !strings.Contains(log[0], c.log)) {
				t.Fatalf("log %q", log)
			}
		})
	}
}
