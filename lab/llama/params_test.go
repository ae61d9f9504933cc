package llama_test

import (
	"testing"

	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}

// The zero placement parameters are llama.cpp's defaults, not the zero
// llama_model_params a Load built field by field would give (split mode
// none puts every layer on one device); "none" is an empty device list.
func TestLoadFor(t *testing.T) {
	rt := testenv.Runtime(t)
	ld, err := llama.LoadFor(rt, "m.gguf", place.Params{})
	if err != nil {
		t.Fatal(err)
	}
	if ld.SplitMode != 1 || ld.NGPULayers != -1 || ld.LoadMode != -1 || ld.MainGPU != 0 || ld.Devices != nil || ld.NoExtra {
		t.Errorf("the zero parameters: %+v", ld)
	}
	ld, err = llama.LoadFor(rt, "m.gguf", place.Params{DeviceNames: []string{"none"}, SplitMode: place.SplitNone, MainGPU: 1, CPUMoE: true, NCPUMoE: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ld.Devices == nil || len(ld.Devices) != 0 || ld.SplitMode != 0 || ld.MainGPU != 1 || len(ld.Overrides) != 3 {
		t.Errorf("no devices, split none, -mg 1, -cmoe, -ncmoe 2: %+v", ld)
	}
	if _, err := llama.LoadFor(rt, "m.gguf", place.Params{DeviceNames: []string{"NoSuchDevice0"}}); err == nil {
		t.Error("an unknown device was accepted")
	}
}

// struct llama_model_kv_override: int tag, char key[128], then a union of
// 128 bytes aligned to 8.
func TestKVOverrideLayout(t *testing.T) {
	if s, o := llama.KVOverrideLayout(); s != 264 || o != 136 {
		t.Errorf("llama_model_kv_override mirror: %d bytes, value at %d; want 264, 136", s, o)
	}
}
