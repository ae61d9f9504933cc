package bindings

import (
	"testing"
	"unsafe"
)

// The mirrors must have the pinned headers' layout (LP64). Open checks the
// same mirrors against the library at run time (checkLayout).
func TestMirrorLayout(t *testing.T) {
	var tt Tensor
	checks := []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(ggml_tensor)", unsafe.Sizeof(tt), TensorSize},
		{"ggml_tensor.buffer", unsafe.Offsetof(tt.Buffer), 8},
		{"ggml_tensor.ne", unsafe.Offsetof(tt.Ne), 16},
		{"ggml_tensor.nb", unsafe.Offsetof(tt.Nb), 48},
		{"ggml_tensor.op", unsafe.Offsetof(tt.Op), 80},
		{"ggml_tensor.op_params", unsafe.Offsetof(tt.OpParams), 84},
		{"ggml_tensor.flags", unsafe.Offsetof(tt.Flags), 148},
		{"ggml_tensor.src", unsafe.Offsetof(tt.Src), 152},
		{"ggml_tensor.view_src", unsafe.Offsetof(tt.ViewSrc), 232},
		{"ggml_tensor.view_offs", unsafe.Offsetof(tt.ViewOffs), 240},
		{"ggml_tensor.data", unsafe.Offsetof(tt.Data), TensorDataOffset},
		{"ggml_tensor.name", unsafe.Offsetof(tt.Name), TensorNameOffset},
		{"ggml_tensor.extra", unsafe.Offsetof(tt.Extra), 320},
		{"sizeof(ggml_init_params)", unsafe.Sizeof(InitParams{}), InitParamsSize},
		{"ggml_init_params.no_alloc", unsafe.Offsetof(InitParams{}.NoAlloc), 16},
		{"sizeof(ggml_backend_dev_props)", unsafe.Sizeof(DevProps{}), DevPropsSize},
		{"ggml_backend_dev_props.memory_free", unsafe.Offsetof(DevProps{}.MemoryFree), 16},
		{"ggml_backend_dev_props.type", unsafe.Offsetof(DevProps{}.Type), 32},
		{"ggml_backend_dev_props.device_id", unsafe.Offsetof(DevProps{}.DeviceID), 40},
		{"ggml_backend_dev_props.caps", unsafe.Offsetof(DevProps{}.Caps), 48},
		{"sizeof(ggml_backend_dev_caps)", unsafe.Sizeof(DevCaps{}), 5},
		{"ggml_backend_dev_caps.mmap_support", unsafe.Offsetof(DevCaps{}.MmapSupport), 4},
		{"sizeof(ggml_backend_meta_split_state)", unsafe.Sizeof(SplitState{}), 2128},
		{"ggml_backend_meta_split_state.ne", unsafe.Offsetof(SplitState{}.Ne), 8},
		{"ggml_backend_meta_split_state.nr", unsafe.Offsetof(SplitState{}.Nr), 2056},
		{"ggml_backend_meta_split_state.n_segments", unsafe.Offsetof(SplitState{}.NSegments), 2120},
		{"sizeof(gguf_init_params)", unsafe.Sizeof(GGUFInitParams{}), 16},
		{"sizeof(ggml_type_traits_cpu)", unsafe.Sizeof(TypeTraitsCPU{}), 32},
		{"ggml_type_traits_cpu.vec_dot", unsafe.Offsetof(TypeTraitsCPU{}.VecDot), 8},
		{"ggml_type_traits_cpu.vec_dot_type", unsafe.Offsetof(TypeTraitsCPU{}.VecDotType), 16},
		{"ggml_type_traits_cpu.nrows", unsafe.Offsetof(TypeTraitsCPU{}.NRows), 24},
		{"sizeof(ggml_threadpool_params)", unsafe.Sizeof(ThreadpoolParams{}), 528},
		{"ggml_threadpool_params.n_threads", unsafe.Offsetof(ThreadpoolParams{}.NThreads), 512},
		{"ggml_threadpool_params.prio", unsafe.Offsetof(ThreadpoolParams{}.Prio), 516},
		{"ggml_threadpool_params.poll", unsafe.Offsetof(ThreadpoolParams{}.Poll), 520},
		{"ggml_threadpool_params.strict_cpu", unsafe.Offsetof(ThreadpoolParams{}.StrictCPU), 524},
		{"ggml_threadpool_params.paused", unsafe.Offsetof(ThreadpoolParams{}.Paused), 525},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, pinned header says %d", c.name, c.got, c.want)
		}
	}
}

func TestGoString(t *testing.T) {
	if GoString(nil) != "" {
		t.Error("nil")
	}
	b := []byte("ab\x00cd")
	if s := GoString(&b[0]); s != "ab" {
		t.Errorf("got %q", s)
	}
	if s := GoString(CString("héllo")); s != "héllo" {
		t.Errorf("got %q", s)
	}
}
