package place

import (
	"context"
	"iter"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place/internal/probe"
)

// Reason says why a tensor got its buffer type.
type Reason string

// Reasons.
const (
	ReasonDefault  Reason = "default"          // the first choice of its layer's list
	ReasonFallback Reason = "unsupported-op"   // earlier choices cannot run its op
	ReasonOverride Reason = "override"         // an -ot pattern
	ReasonLazy     Reason = "lazy"             // read on demand; kept on the CPU buffer type
	ReasonMmapHost Reason = "mmap-host-to-cpu" // a host buffer type, replaced by the CPU's under mmap
	ReasonUnused   Reason = "unused"           // TENSOR_SKIP: present in the file, not used
)

// TensorPlan is the decision for one tensor, in llama.cpp's creation order.
type TensorPlan struct {
	Name       string
	Type       ggml.Type
	Shape      ggml.Shape
	Bytes      int64
	Class      LayerClass
	Layer      int // the layer whose device it follows (-1 input, NLayer output)
	Op         ggml.Op
	BufferType ggml.BufferType // zero for unused tensors
	Device     *ggml.Device
	Reason     Reason
	Detail     string
	Duplicate  bool // a second placement of a file tensor (tied output, per-layer rope factors)
	Shared     bool // a duplicate that reuses the same tensor of its context: no extra bytes
	Lazy       bool
	Context    int // index into Plan.Contexts, -1 for unused tensors
	Weight     *gguf.Weight
	// Split is how the meta device of split mode tensor lays the tensor
	// over its devices; nil for tensors elsewhere.
	Split *ggml.SplitState
}

// BufferPlan is one buffer the loader will create.
type BufferPlan struct {
	Name      string // as llama.cpp names it ("CPU_Mapped", "Vulkan0", ...)
	Size      uint64 // as the buffer will report it: Requested plus the backend's own slack
	Requested uint64 // what the loader asks for: the tensors' allocation sizes, aligned
	File      int    // mapped buffers: the file; -1 for allocated buffers
	First     int64  // mapped buffers: the file range wrapped
	Last      int64
	// Parts are, for the buffer of a meta device, what it allocates on
	// each of its devices (Size is then the largest, as ggml reports it).
	Parts []BufferPart
	// Measured is, for the buffer of a meta device, what a no_alloc load
	// reports for it (llama_get_memory_breakdown, as -fit measures): per
	// tensor, the largest allocation any of its devices' buffer types
	// would make for the whole tensor, aligned to the largest alignment.
	Measured uint64
}

// BufferPart is the share of a meta device's buffer on one of its devices.
type BufferPart struct {
	Device     *ggml.Device
	BufferType ggml.BufferType
	Size       uint64 // as the device's buffer will report it
	Requested  uint64
}

// ContextPlan is one ggml context of weights: one buffer type (and lazy
// flag), its tensors, and the buffers that will hold them.
type ContextPlan struct {
	BufferType ggml.BufferType
	Device     *ggml.Device
	Lazy       bool
	Mapped     bool // zero copy over the mapped file
	Tensors    []int
	Buffers    []BufferPlan
	Size       uint64
}

// DeviceUse sums what a device's memory will hold (host buffer types count
// as the CPU's: they are host RAM).
type DeviceUse struct {
	Device    *ggml.Device
	Allocated uint64 // bytes of allocated buffers
	Mapped    uint64 // bytes of mapped buffers (the file's pages, not allocations)
	Free      uint64
	Total     uint64
}

// Moved is llama.cpp's summary of tensors not on their list's first choice.
type Moved struct {
	Count     int
	FirstName string
	FirstType ggml.Type
	From, To  ggml.BufferType
}

// LogLine is a message worded as llama.cpp's.
type LogLine struct {
	Level string `json:"level"` // DEBUG, INFO, WARN
	Text  string `json:"text"`
}

// Plan is where everything goes: every tensor's buffer type and device,
// the buffers they make up, and llama.cpp's report lines. New and Fit make
// it and nothing changes it afterwards, so it is safe for concurrent
// reads; loader.Load carries it out.
type Plan struct {
	Model  *gguf.Model
	Arch   string
	Exact  bool // the architecture's own tensor creation was replayed; false: the generic path, by tensor names
	NLayer int  // n_layer_all; the output layer is NLayer
	Params Params
	// LoadMode is the load mode resolved (never LoadAuto): auto maps the
	// files where every device and every source can, and reads them
	// (LoadNone) where one cannot, NoMmap saying why (a device lacks mmap
	// support; a source is no local file, a URL or a reader; a GGUF
	// inside a file at an offset ggml cannot use in place).
	LoadMode LoadMode
	UseMmap  bool
	NoMmap   string
	// Lazy is the lazy mode in effect: LazyOff where auto was asked and
	// the files are not mapped (lazy tensors stay in a mapping); else as
	// asked (auto: the candidates over 4 GiB are read on demand).
	Lazy LazyMode

	CPU           *ggml.Device
	Devices       []*ggml.Device // the model's device list
	TensorDevices []*ggml.Device // split mode tensor: the devices the meta device (Devices' one entry) spans
	Shares        []float32      // per device: tensor split or free memory
	Splits        []float32      // cumulative normalised split points
	GPUStart      int            // i_gpu_start
	GPULayers     int            // act_gpu_layers
	LayerDevices  []*ggml.Device // per layer 0..NLayer (the output); the CPU for layers kept there

	Tensors  []TensorPlan
	Contexts []ContextPlan
	Moved    Moved
	Log      []LogLine
	Usage    []DeviceUse

	// Context is the llama.cpp context of Params.Context (nil with Skip,
	// and when llama.cpp would refuse it: ContextErr says why).
	Context    *ContextMemory
	ContextErr error

	ProbeQuestions int // supports_op questions
	Probes         int // questions that reached a device (cache misses)

	rt         *ggml.Runtime
	splitKeep  any          // keeps the meta device's splitter alive
	layerLists [][]bufEntry // per layer 0..NLayer: its buffer type list (dev_layer's buft_list)
}

// Runtime is the runtime whose devices the plan uses.
func (p *Plan) Runtime() *ggml.Runtime { return p.rt }

// Placements walks the tensors in llama.cpp's creation order, duplicates
// (a tied output, a rope tensor every layer uses) and unused tensors
// included.
func (p *Plan) Placements() iter.Seq[*TensorPlan] {
	return func(yield func(*TensorPlan) bool) {
		for i := range p.Tensors {
			if !yield(&p.Tensors[i]) {
				return
			}
		}
	}
}

// New plans the placement of model m on the devices of rt, within ctx.
// Planning asks RPC devices for their memory and buffer properties: a few
// round trips, each bounded by the RPC guard's timeout; ctx ends it
// between them.
func New(ctx context.Context, rt *ggml.Runtime, m *gguf.Model, params Params) (*Plan, error) {
	h, err := readHparams(m, params)
	if err != nil {
		return nil, err
	}
	defer KeepConnected(rt, params)()
	pr := probe.New(ctx, rt, h.probe, params.noProbeCache)
	return plan(rt, m, h, params, pr)
}

func (p *Plan) log(level, text string) { p.Log = append(p.Log, LogLine{level, text}) }
func (p *Plan) info(text string)       { p.log("INFO", text) }
func (p *Plan) debug(text string)      { p.log("DEBUG", text) }
func (p *Plan) warn(text string)       { p.log("WARN", text) }

// autoModes is llama.cpp's resolution of AUTO for the devices of a
// model: AUTO maps the file unless some device lacks mmap support (then it
// reads: NONE), and lazy AUTO turns OFF in that case too.
func autoModes(mode LoadMode, lazy LazyMode, devices []ggml.Caps) (LoadMode, bool, LazyMode) {
	allMmap := true
	for _, c := range devices {
		if !c.MmapSupport {
			allMmap = false
		}
	}
	useMmap := mode.UsesMmap()
	if mode == LoadAuto {
		useMmap = allMmap
		mode = LoadNone
		if allMmap {
			mode = LoadMmap
		}
	}
	if lazy == LazyAuto && !allMmap {
		lazy = LazyOff
	}
	return mode, useMmap, lazy
}

// buildLists makes the CPU list and each device's list
