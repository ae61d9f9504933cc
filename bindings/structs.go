// Port of llama.cpp ggml/include/ggml.h, ggml/include/ggml-backend.h and
// ggml/include/gguf.h (v0.5.0): the C structs and enums ggload mirrors.

package bindings

import "unsafe"

// Opaque native handles. Each is a distinct type so that a device can never
// be passed where a buffer type is expected.
type (
	Reg         uintptr // ggml_backend_reg_t
	Dev         uintptr // ggml_backend_dev_t
	Buft        uintptr // ggml_backend_buffer_type_t
	Buffer      uintptr // ggml_backend_buffer_t
	Backend     uintptr // ggml_backend_t
	Event       uintptr // ggml_backend_event_t
	Context     uintptr // struct ggml_context *
	Graph       uintptr // struct ggml_cgraph *
	Sched       uintptr // ggml_backend_sched_t
	GGUFContext uintptr // struct gguf_context *
	LlamaModel  uintptr // struct llama_model *
	Threadpool  uintptr // struct ggml_threadpool *
)

// Limits of the pinned ggml.h.
const (
	MaxDims     = 4
	MaxSrc      = 10
	MaxName     = 64
	MaxOpParams = 64
)

// Tensor mirrors struct ggml_tensor of the pinned ggml.h, field by field with
// explicit padding. Values of this type only ever live in native memory
// (ggml contexts); Go code holds *Tensor pointers into it.
type Tensor struct {
	Type     int32
	_        [4]byte
	Buffer   Buffer
	Ne       [MaxDims]int64
	Nb       [MaxDims]uintptr
	Op       int32
	OpParams [MaxOpParams / 4]int32
	Flags    int32
	Src      [MaxSrc]*Tensor
	ViewSrc  *Tensor
	ViewOffs uintptr
	Data     unsafe.Pointer
	Name     [MaxName]byte
	Extra    unsafe.Pointer
	Padding  [8]byte
}

// MetaMaxDevices is GGML_BACKEND_META_MAX_DEVICES: the most devices a meta
// device spans.
const MetaMaxDevices = 16

// SplitState mirrors struct ggml_backend_meta_split_state: how a meta
// device lays one tensor over its devices. Ne holds one length per segment
// and device (segment-major), Nr each segment's repeat count.
type SplitState struct {
	Axis      int32
	_         [4]byte
	Ne        [16 * MetaMaxDevices]int64
	Nr        [16]uint32
	NSegments uint32
	_         [4]byte
}

// InitParams mirrors struct ggml_init_params (passed by value to ggml_init).
type InitParams struct {
	MemSize   uintptr
	MemBuffer unsafe.Pointer
	NoAlloc   bool
	_         [7]byte
}

// DevCaps mirrors struct ggml_backend_dev_caps.
type DevCaps struct {
	Async             bool
	HostBuffer        bool
	BufferFromHostPtr bool
	Events            bool
	MmapSupport       bool
}

// DevProps mirrors struct ggml_backend_dev_props.
type DevProps struct {
	Name        *byte
	Description *byte
	MemoryFree  uintptr
	MemoryTotal uintptr
	Type        int32
	_           [4]byte
	DeviceID    *byte
	Caps        DevCaps
	_           [3]byte
}

// MaxThreads is GGML_MAX_N_THREADS: the length of a threadpool's CPU mask.
const MaxThreads = 512

// ThreadpoolParams mirrors struct ggml_threadpool_params (ggml.h): the CPU
// backend's thread pool, as ggml_threadpool_new takes it.
type ThreadpoolParams struct {
	CPUMask   [MaxThreads]bool // all false: the inherited affinity
	NThreads  int32
	Prio      int32  // enum ggml_sched_priority: -1 low, 0 normal, 1 medium, 2 high, 3 realtime
	Poll      uint32 // busy-wait level for new work, 0 (none) to 100
	StrictCPU bool
	Paused    bool
	_         [2]byte
}

// GGUFInitParams mirrors struct gguf_init_params.
type GGUFInitParams struct {
	NoAlloc bool
	_       [7]byte
	Ctx     *Context
}

// Feature mirrors struct ggml_backend_feature (name/value pairs a backend
// reports, NULL-terminated array).
type Feature struct {
	Name  *byte
	Value *byte
}

// Expected sizes and offsets from the pinned headers (x86-64 / arm64 LP64).
// The layout test compares them with unsafe.Sizeof/Offsetof, and Open compares
// the mirror with what the library itself reports.
const (
	TensorSize       = 336
	TensorDataOffset = 248
	TensorNameOffset = 256
	DevPropsSize     = 56
	InitParamsSize   = 24
)

// Device types (enum ggml_backend_dev_type).
const (
	DevTypeCPU   = 0
	DevTypeGPU   = 1
	DevTypeIGPU  = 2
	DevTypeAccel = 3
	DevTypeMeta  = 4
)

// Buffer usages (enum ggml_backend_buffer_usage).
const (
	BufferUsageAny     = 0
	BufferUsageWeights = 1
	BufferUsageCompute = 2
)

// GoString copies a NUL-terminated C string (nil gives "").
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// CString returns a NUL-terminated copy of s for arguments that native code
// only reads during the call.
func CString(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}
