// Package llama drives the pinned libllama (prebuilt, same native set)
// through purego, in the same process and ggml registry as ggload, so that
// tests and benchmarks can compare ggload with llama.cpp itself: its
// placement decisions (read from its own log and its internal tensor map)
// and its load times.
//
// It is a harness, not an API: it mirrors llama_model_params of v0.5.0 and
// two internal C++ entry points whose layout the tests check.
package llama

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/place"
)

// ModelParams mirrors struct llama_model_params (include/llama.h of
// v0.5.0): 80 bytes, 8-byte aligned.
type ModelParams struct {
	Devices                  uintptr // ggml_backend_dev_t *, NULL-terminated
	TensorBuftOverrides      uintptr // llama_model_tensor_buft_override *, pattern NULL-terminated
	NGPULayers               int32
	SplitMode                int32
	LoadMode                 int32
	LazyMode                 int32
	MainGPU                  int32
	_                        [4]byte
	TensorSplit              uintptr // const float * (llama_max_devices() entries)
	ProgressCallback         uintptr
	ProgressCallbackUserData uintptr
	KVOverrides              uintptr
	VocabOnly                bool
	CheckTensors             bool
	UseExtraBufts            bool
	NoHost                   bool
	NoAlloc                  bool
	LoadMTP                  bool
	_                        [2]byte
}

// buftOverride mirrors struct llama_model_tensor_buft_override.
type buftOverride struct {
	pattern *byte
	buft    bindings.Buft
}

// kvOverride mirrors struct llama_model_kv_override: the tag, the key
// (128 bytes), and a union of 128 bytes at offset 136.
type kvOverride struct {
	tag int32
	key [128]byte
	_   [4]byte
	val [128]byte
}

// Lib is the opened libllama.
type Lib struct {
	BackendInit        func()                                   `c:"llama_backend_init"`
	LogSet             func(cb, ud uintptr)                     `c:"llama_log_set"`
	ModelDefaultParams func() ModelParams                       `c:"llama_model_default_params"`
	ModelLoadFromFile  func(path string, p ModelParams) uintptr `c:"llama_model_load_from_file"`
	ModelFree          func(m uintptr)                          `c:"llama_model_free"`
	MaxDevices         func() uintptr                           `c:"llama_max_devices"`
	ModelNDevices      func(m uintptr) int32                    `c:"_Z21llama_model_n_devicesPK11llama_model"`
	ModelGetDevice     func(m uintptr, i int32) bindings.Dev    `c:"_Z22llama_model_get_devicePK11llama_modeli"`
	tensorMap          func(m uintptr) unsafe.Pointer           `c:"_Z29llama_internal_get_tensor_mapB5cxx11PK11llama_model"`
	// llama_meta_device_get_split_state returns a struct of 2128 bytes
	// by value (purego passes the result's address as the ABI wants)
	splitState func(t *bindings.Tensor, ud unsafe.Pointer) bindings.SplitState `c:"_Z33llama_meta_device_get_split_statePK11ggml_tensorPv"`

	rt     *ggml.Runtime
	handle uintptr

	ctxOnce sync.Once
	ctxLib  *contextLib
	ctxErr  error

	decOnce sync.Once
	decLib  *decodeLib
	decErr  error

	voc vocabState   // the vocabulary API (vocab.go)
	smp samplerState // the sampler API (sampler.go)
}

var (
	openMu   sync.Mutex
	opened   *Lib
	progress uintptr
)

// ErrMissing is wrapped by Open's error when the native set has no libllama.
var ErrMissing = errors.New("no libllama in the native set")

// Open opens the libllama of rt's native set (once per process) and routes
// its log through ggml's (the same callback, so the bindings' tap sees it).
func Open(rt *ggml.Runtime) (*Lib, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if opened != nil {
		return opened, nil
	}
	path := rt.Location().Llama
	if path == "" {
		return nil, fmt.Errorf("%w %s (the prebuilt packages carry it: scripts/fetch-native.sh)", ErrMissing, rt.Location().Dir)
	}
	h, err := bindings.OpenLibrary(path)
	if err != nil {
		return nil, fmt.Errorf("llama: open %s: %w", path, err)
	}
	l := &Lib{rt: rt, handle: h}
	if err := bindings.Bind(l, h); err != nil {
		return nil, fmt.Errorf("llama: %s: %w", path, err)
	}
	l.BackendInit() // a no-op: ggml's registry is already populated
	l.LogSet(bindings.CallbackAddr(), 0)
	progress = bindings.NewCallback(func(_ float32, _ uintptr) uintptr { return 1 })
	opened = l
	return l, nil
}

// Load describes one llama_model_load_from_file call.
type Load struct {
	Path        string
	NGPULayers  int
	SplitMode   int
	MainGPU     int
	LoadMode    int // -1 auto, 0 none, 1 mmap, 2 mlock, 3 mmap-mlock, 4 direct-io
	LazyMode    int
	TensorSplit []float32
	Devices     []*ggml.Device // nil: llama.cpp's own selection
	Overrides   [][2]string    // pattern, buffer type name
	KVOverrides []place.KVOverride
	NoHost      bool
	NoExtra     bool
	NoAlloc     bool
	Check       bool
	LoadMTP     bool
}

// Model is a loaded llama_model.
type Model struct {
	l *Lib
	h uintptr
}

// LoadModel loads a model; the error carries llama.cpp's own error line.
func (l *Lib) LoadModel(ld Load) (*Model, []LogLine, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	p, err := l.modelParams(ld, &pin)
	if err != nil {
		return nil, nil, err
	}
	var lines []LogLine
	old := bindings.SetLogTap(func(level int, line string) { lines = append(lines, LogLine{level, line}) })
	h := l.ModelLoadFromFile(ld.Path, p)
	bindings.SetLogTap(old)
	if h == 0 {
		// the line that says why ("error loading model: ..."), else the
		// last error
		msg := "llama_model_load_from_file failed"
		for _, ln := range lines {
			if ln.Level == 4 && (msg == "llama_model_load_from_file failed" || strings.Contains(ln.Text, "error loading model")) {
				msg = ln.Text
			}
		}
		return nil, lines, errors.New("llama: " + msg)
	}
	return &Model{l, h}, lines, nil
}

// modelParams is the llama_model_params of a load; what it points to is
// pinned by pin until the caller unpins it.
func (l *Lib) modelParams(ld Load, pin *runtime.Pinner) (ModelParams, error) {
	p := l.ModelDefaultParams()
	p.NGPULayers = int32(ld.NGPULayers)
	p.SplitMode = int32(ld.SplitMode)
	p.MainGPU = int32(ld.MainGPU)
	p.LoadMode = int32(ld.LoadMode)
	p.LazyMode = int32(ld.LazyMode)
	p.NoHost, p.UseExtraBufts, p.NoAlloc, p.CheckTensors, p.LoadMTP = ld.NoHost, !ld.NoExtra, ld.NoAlloc, ld.Check, ld.LoadMTP
	p.ProgressCallback = progress

	if ld.Devices != nil {
		devs := make([]bindings.Dev, len(ld.Devices)+1)
		for i, d := range ld.Devices {
			devs[i] = bindings.Dev(d.Handle())
		}
		pin.Pin(&devs[0])
		p.Devices = uintptr(unsafe.Pointer(&devs[0]))
	}
	if len(ld.TensorSplit) > 0 {
		ts := make([]float32, max(int(l.MaxDevices()), len(ld.TensorSplit)))
		copy(ts, ld.TensorSplit)
		pin.Pin(&ts[0])
		p.TensorSplit = uintptr(unsafe.Pointer(&ts[0]))
	}
	if len(ld.Overrides) > 0 {
		ovs := make([]buftOverride, len(ld.Overrides)+1)
		for i, o := range ld.Overrides {
			b, err := l.rt.BufferTypeByName(o[1])
			if err != nil {
				return p, err
			}
			pat := bindings.CString(o[0])
			pin.Pin(pat)
			ovs[i] = buftOverride{pat, bindings.Buft(b.Handle())}
		}
		pin.Pin(&ovs[0])
		p.TensorBuftOverrides = uintptr(unsafe.Pointer(&ovs[0]))
	}
	if len(ld.KVOverrides) > 0 {
		kvs := make([]kvOverride, len(ld.KVOverrides)+1) // the last key empty: the end
		for i, o := range ld.KVOverrides {
			if len(o.Key) >= len(kvs[i].key) || len(o.Str) >= len(kvs[i].val) {
				return p, fmt.Errorf("llama: override %s: too long", o.Key)
			}
			kvs[i].tag = int32(o.Type)
			copy(kvs[i].key[:], o.Key)
			switch o.Type {
			case place.OverrideInt:
				*(*int64)(unsafe.Pointer(&kvs[i].val[0])) = o.Int
			case place.OverrideFloat:
				*(*float64)(unsafe.Pointer(&kvs[i].val[0])) = o.Float
			case place.OverrideBool:
				if o.Bool {
					kvs[i].val[0] = 1
				}
			case place.OverrideStr:
				copy(kvs[i].val[:], o.Str)
			}
		}
		pin.Pin(&kvs[0])
		p.KVOverrides = uintptr(unsafe.Pointer(&kvs[0]))
	}
	return p, nil
}

// LogLine is a captured log line (level 1 debug ... 4 error).
type LogLine struct {
	Level int
	Text  string
}

// Free frees the model.
func (m *Model) Free() {
	if m.h != 0 {
		m.l.ModelFree(m.h)
		m.h = 0
	}
}

// Devices is the model's device list after llama.cpp's selection.
func (m *Model) Devices() []bindings.Dev {
	n := m.l.ModelNDevices(m.h)
	out := make([]bindings.Dev, n)
	for i := range out {
		out[i] = m.l.ModelGetDevice(m.h, int32(i))
	}
	return out
}

// splitUserData mirrors struct llama_meta_device_get_split_state_userdata.
type splitUserData struct {
	nDevices uintptr
	model    uintptr
}

// SplitState is llama.cpp's own answer to a meta device of n devices over
// the model (llama_meta_device_get_split_state): how it lays t out. The
// model's tensor split (its load's) gives the devices' shares.
func (m *Model) SplitState(t *bindings.Tensor, n int) (ggml.SplitState, error) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		return ggml.SplitState{}, err
	}
	ud := &splitUserData{uintptr(n), m.h}
	c := m.l.splitState(t, unsafe.Pointer(ud))
	runtime.KeepAlive(ud)
	s := ggml.SplitState{Axis: ggml.SplitAxis(c.Axis)}
	switch {
	case s.Axis.IsDim():
		for i := 0; i < int(c.NSegments); i++ {
			s.Segments = append(s.Segments, ggml.SplitSegment{Lengths: append([]int64(nil), c.Ne[i*n:(i+1)*n]...), Repeat: c.Nr[i]})
		}
	case s.Axis == ggml.SplitPartial:
		s.Segments = []ggml.SplitSegment{{Lengths: append([]int64(nil), c.Ne[:n]...), Repeat: c.Nr[0]}}
	}
	return s, nil
}

// Tensor is one entry of the model's tensors_by_name.
type Tensor struct {
	Name string
	C    *bindings.Tensor
}

// Tensors reads llama_model::tensors_by_name: a std::vector of
// std::pair<std::string, ggml_tensor*> (libstdc++'s C++11 ABI: 40-byte
// elements, the string's pointer and length first, the tensor at 32).
func (m *Model) Tensors() []Tensor {
	v := m.l.tensorMap(m.h)
	begin := *(*unsafe.Pointer)(v)
	end := *(*unsafe.Pointer)(unsafe.Add(v, 8))
	n := (uintptr(end) - uintptr(begin)) / 40
	out := make([]Tensor, 0, n)
	for i := uintptr(0); i < n; i++ {
		e := unsafe.Add(begin, i*40)
		p := *(**byte)(e)
		ln := *(*uintptr)(unsafe.Add(e, 8))
		out = append(out, Tensor{string(unsafe.Slice(p, ln)), *(**bindings.Tensor)(unsafe.Add(e, 32))})
	}
	return out
}
