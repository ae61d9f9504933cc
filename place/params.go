package place

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/replay/arch"
)

// SplitMode is how a model is spread over several devices.
type SplitMode int

// Split modes. The zero value is SplitLayer, llama.cpp's default; Llama
// gives the llama_split_mode number.
const (
	SplitLayer  SplitMode = iota // whole layers per device (default)
	SplitNone                    // one device: MainGPU
	SplitRow                     // rows of each matrix over the devices (backends with a split buffer type)
	SplitTensor                  // tensor parallelism through ggml's meta device
)

// Llama returns the mode's llama_split_mode value.
func (m SplitMode) Llama() int {
	switch m {
	case SplitNone:
		return 0
	case SplitLayer:
		return 1
	}
	return int(m)
}

func (m SplitMode) String() string {
	switch m {
	case SplitNone:
		return "none"
	case SplitLayer:
		return "layer"
	case SplitRow:
		return "row"
	case SplitTensor:
		return "tensor"
	}
	return fmt.Sprintf("SplitMode(%d)", int(m))
}

// ParseSplitMode reads -sm's values.
func ParseSplitMode(s string) (SplitMode, error) {
	for m := SplitLayer; m <= SplitTensor; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("split mode %q: want none, layer, row or tensor", s)
}

// LoadMode is how weights reach memory (llama_load_mode).
type LoadMode int

// Load modes. The zero value is LoadAuto, llama.cpp's default; Llama
// gives the llama_load_mode number.
const (
	LoadAuto      LoadMode = iota // mmap unless a device lacks mmap support
	LoadNone                      // read into buffers
	LoadMmap                      // map the file; zero copy where possible
	LoadMlock                     // read into buffers and lock host buffers
	LoadMmapMlock                 // map and lock the mapping
	LoadDirectIO                  // read with O_DIRECT, bypassing the page cache
)

// Llama returns the mode's llama_load_mode value (-1 for auto).
func (m LoadMode) Llama() int { return int(m) - 1 }

// loadModeNames are the pin's spellings (llama_load_mode_name).
var loadModeNames = map[LoadMode]string{
	LoadAuto: "auto", LoadNone: "none", LoadMmap: "mmap", LoadMlock: "mlock", LoadMmapMlock: "mmap+mlock", LoadDirectIO: "dio",
}

// loadModeAliases are ggload's earlier spellings, still accepted.
var loadModeAliases = map[string]LoadMode{"mmap-mlock": LoadMmapMlock, "direct-io": LoadDirectIO}

// LoadModeNames lists the load modes as the pin spells them, in its order.
func LoadModeNames() []string {
	return []string{"auto", "none", "mmap", "mlock", "mmap+mlock", "dio"}
}

func (m LoadMode) String() string {
	if s, ok := loadModeNames[m]; ok {
		return s
	}
	return fmt.Sprintf("LoadMode(%d)", int(m))
}

// UsesMmap reports whether the mode maps the file (AUTO before resolution).
func (m LoadMode) UsesMmap() bool { return m == LoadMmap || m == LoadMmapMlock || m == LoadAuto }

// ParseLoadMode reads -lm/--load-mode's values: the pin's (auto, none,
// mmap, mlock, mmap+mlock, dio) and the spellings mmap-mlock and direct-io.
func ParseLoadMode(s string) (LoadMode, error) {
	for m, name := range loadModeNames {
		if name == s {
			return m, nil
		}
	}
	if m, ok := loadModeAliases[s]; ok {
		return m, nil
	}
	return 0, fmt.Errorf("load mode %q: want auto, none, mmap, mlock, mmap+mlock or dio", s)
}

// LazyMode is whether large tensors that the architecture marks (per-layer
// embeddings) stay on disk and are read on demand (llama_lazy_mode).
type LazyMode int

// Lazy modes. The zero value is LazyAuto, llama.cpp's default; Llama
// gives the llama_lazy_mode number.
const (
	LazyAuto LazyMode = iota // only tensors larger than 4 GiB
	LazyOff
	LazyOn
)

// Llama returns the mode's llama_lazy_mode value.
func (m LazyMode) Llama() int {
	switch m {
	case LazyOff:
		return 0
	case LazyAuto:
		return 1
	}
	return int(m)
}

func (m LazyMode) String() string {
	switch m {
	case LazyOff:
		return "off"
	case LazyAuto:
		return "auto"
	case LazyOn:
		return "on"
	}
	return fmt.Sprintf("LazyMode(%d)", int(m))
}

// ParseLazyMode reads -lzm/--lazy-mode's values.
func ParseLazyMode(s string) (LazyMode, error) {
	for m := LazyAuto; m <= LazyOn; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("lazy mode %q: want off, auto or on", s)
}

// LazyAutoMinSize is the size above which LazyAuto reads a tensor lazily.
const LazyAutoMinSize = 4 << 30

// Override sends the tensors whose names match Pattern to a buffer type
// (llama.cpp's -ot). Patterns are regular expressions searched anywhere in
// the name; the first matching override wins.
type Override struct {
	Pattern    string
	BufferType string // a device's buffer type name ("CPU", "Vulkan0", "RPC0[host:port]")
}

// ParseOverrides reads -ot's "pattern=buffer type,..." form.
func ParseOverrides(s string) ([]Override, error) {
	var out []Override
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			continue
		}
		i := strings.LastIndexByte(item, '=')
		if i <= 0 || i == len(item)-1 {
			return nil, fmt.Errorf("override %q: want <tensor name pattern>=<buffer type>", item)
		}
		out = append(out, Override{Pattern: item[:i], BufferType: item[i+1:]})
	}
	return out, nil
}

// ParseTensorSplit reads -ts's "3,1" or "3/1" form.
func ParseTensorSplit(s string) ([]float32, error) {
	var out []float32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '/' }) {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
		if err != nil || x < 0 {
			return nil, fmt.Errorf("tensor split %q: %q is not a non-negative number", s, f)
		}
		out = append(out, float32(x))
	}
	return out, nil
}

// ExpertsPattern matches the MoE expert weights (llama.cpp's
// LLM_FFN_EXPS_REGEX), for --cpu-moe and --n-cpu-moe.
const ExpertsPattern = `\.ffn_(up|down|gate|gate_up)_(ch|)exps`

// DenseFFNPattern matches the dense FFN weights (llama.cpp's
// LLM_FFN_DENSE_REGEX), for --n-cpu-ffn.
const DenseFFNPattern = `\.ffn_(up|down|gate)\.`

// FirstLayersOnCPU returns the overrides that keep the weights matching
// pattern (ExpertsPattern, DenseFFNPattern) of layers 0..n-1 on the CPU,
// as llama.cpp's --n-cpu-moe and --n-cpu-ffn add them.
func FirstLayersOnCPU(n int, pattern string) []Override {
	out := make([]Override, 0, max(n, 0))
	for i := 0; i < n; i++ {
		out = append(out, Override{Pattern: fmt.Sprintf(`blk\.%d%s`, i, pattern), BufferType: "CPU"})
	}
	return out
}

// Layers is how many layers (counting the output layer) go to the GPUs:
// llama.cpp's -ngl. Its zero value is auto, llama.cpp's default: every
// layer, unless Fit chooses a count. NLayers and AllLayers make the others.
type Layers struct {
	n    int
	kind layersKind
}

type layersKind uint8

const (
	layersAuto layersKind = iota
	layersAll
	layersCount
)

// NLayers offloads n layers, as -ngl n. A negative n has llama.cpp's
// meaning for n_gpu_layers: -1 is auto and anything below is all.
func NLayers(n int) Layers {
	switch {
	case n == -1:
		return Layers{}
	case n < -1:
		return AllLayers()
	}
	return Layers{n: n, kind: layersCount}
}

// AllLayers offloads every layer (-ngl all).
func AllLayers() Layers { return Layers{kind: layersAll} }

// AutoLayers is the zero value: every layer unless Fit chooses (-ngl auto).
func AutoLayers() Layers { return Layers{} }

// IsAuto reports whether the count is left to llama.cpp's default.
func (l Layers) IsAuto() bool { return l.kind == layersAuto }

// Count returns the number of layers, or false for auto and all.
func (l Layers) Count() (int, bool) { return l.n, l.kind == layersCount }

// Llama returns llama.cpp's n_gpu_layers value: the count, -1 for auto,
// -2 for all.
func (l Layers) Llama() int {
	switch l.kind {
	case layersAuto:
		return -1
	case layersAll:
		return -2
	}
	return l.n
}

// resolve returns the count for a model of nLayerAll layers plus output.
func (l Layers) resolve(nLayerAll int) int {
	if n, ok := l.Count(); ok {
		return n
	}
	return nLayerAll + 1
}

func (l Layers) String() string {
	switch l.kind {
	case layersAuto:
		return "auto"
	case layersAll:
		return "all"
	}
	return strconv.Itoa(l.n)
}

// ParseLayers reads -ngl's values: a count, auto or all (and llama.cpp's
// negative numbers: -1 auto, below that all).
func ParseLayers(s string) (Layers, error) {
	switch s {
	case "auto":
		return Layers{}, nil
	case "all":
		return AllLayers(), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return Layers{}, fmt.Errorf("gpu layers %q: want a number, auto or all", s)
	}
	return NLayers(n), nil
}

// Params are the placement parameters, with llama.cpp's names. The zero
// value is llama.cpp's defaults: layers auto (all, unless Fit chooses),
// layer split, mmap where every device supports it, the CPU's extra buffer
// types on, lazy auto.
type Params struct {
	NGPULayers  Layers    // layers (counting the output layer) to offload; zero: auto
	SplitMode   SplitMode // zero: SplitLayer
	MainGPU     int       // the device for SplitNone (negative: none)
	TensorSplit []float32 // share per device; empty: by free memory
	Overrides   []Override
	NoHost      bool     // keep host (pinned) buffer types out of the CPU list
	LoadMode    LoadMode // zero: LoadAuto (Plan.LoadMode and Plan.NoMmap say how it resolved)
	Lazy        LazyMode // zero: LazyAuto (off where auto reads: Plan.Lazy)
	DeviceNames []string // device names to use, in order; empty: automatic; ["none"]: no offload

	// NoExtraBufts keeps the CPU's extra buffer types (CPU_REPACK, whose
	// weights are rearranged for faster kernels and cannot be read back)
	// out of the CPU list, as llama.cpp's --no-repack does.
	NoExtraBufts bool

	// CPUMoE keeps every layer's expert weights on the CPU; NCPUMoE keeps
	// those of the first N layers. Both become overrides placed before
	// Overrides, as llama.cpp's --cpu-moe / --n-cpu-moe do.
	CPUMoE  bool
	NCPUMoE int

	// MapRanges chooses how mapped buffers cover the file (see MapRanges).
	MapRanges MapRanges

	// Context is the llama.cpp context the plan sizes beside the weights
	// (KV cache, recurrent state, output buffer); the zero value is
	// llama.cpp's command-line defaults.
	Context ContextParams

	// KVOverrides replace metadata values as llama.cpp's --override-kv
	// does (llama_model_params.kv_overrides): the hyperparameters read
	// them instead of the file's, so placement follows them.
	KVOverrides []KVOverride

	// LoadMTP loads the multi-token-prediction (NextN) blocks some
	// architectures carry; llama.cpp's default leaves them unused.
	LoadMTP bool

	// noProbeCache asks every supports_op question anew: the tests' way
	// to prove the cache changes nothing (export_test.go).
	noProbeCache bool
}

// KVOverride is one metadata override, llama_model_kv_override: a key,
// its kind (OverrideInt, OverrideFloat, OverrideBool, OverrideStr) and
// the value of that kind. A reader of a key of another kind warns, as
// llama.cpp does, and takes the file's value.
type KVOverride = arch.KVOverride

// The kinds of a KVOverride.
const (
	OverrideInt   = arch.OverrideInt
	OverrideFloat = arch.OverrideFloat
	OverrideBool  = arch.OverrideBool
	OverrideStr   = arch.OverrideStr
)

// ParseKVOverride parses KEY=TYPE:VALUE (TYPE int, float, bool or str)
// as llama.cpp's --override-kv does, one item of its comma list.
func ParseKVOverride(s string) (KVOverride, error) { return arch.ParseKVOverride(s) }

// MapRanges is how the zero-copy buffers of a context cover the mapped file.
type MapRanges int

const (
	// MapSpan (the zero value) wraps one range per file from the context's
	// first tensor to its last, as the pinned llama.cpp v0.5.0 does
	// (get_mapping_range): the buffers, their sizes and the report's
	// "model buffer size" lines are llama.cpp's.
	MapSpan MapRanges = iota
	// MapOwnRanges wraps only the byte ranges of the context's own tensors
	// that no other context uses (merged), so that a buffer never pins the
	// bytes of tensors that live elsewhere (the get_mapping_ranges of
	// llama.cpp's loader design). A context then gets a buffer per range,
	// and the buffer lines differ from llama.cpp's.
	MapOwnRanges
)

func (r MapRanges) String() string {
	if r == MapOwnRanges {
		return "own"
	}
	return "span"
}

// overrides returns the --cpu-moe / --n-cpu-moe overrides followed by the
// explicit ones.
func (p *Params) allOverrides() []Override {
	var out []Override
	if p.CPUMoE {
		out = append(out, Override{Pattern: ExpertsPattern, BufferType: "CPU"})
	}
	out = append(out, FirstLayersOnCPU(p.NCPUMoE, ExpertsPattern)...)
	return append(out, p.Overrides...)
}
