package place

import (
	"fmt"
	"strconv"
	"strings"
)

// SplitMode is how a model is spread over several devices.
type SplitMode int

// Split modes (llama_split_mode).
const (
	SplitNone   SplitMode = 0 // one device: MainGPU
	SplitLayer  SplitMode = 1 // whole layers per device (default)
	SplitRow    SplitMode = 2 // rows of each matrix over the devices (backends with a split buffer type)
	SplitTensor SplitMode = 3 // tensor parallelism through ggml's meta device
)

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
	for m := SplitNone; m <= SplitTensor; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("split mode %q: want none, layer, row or tensor", s)
}

// LoadMode is how weights reach memory (llama_load_mode).
type LoadMode int

// Load modes.
const (
	LoadAuto      LoadMode = -1 // mmap unless a device lacks mmap support
	LoadNone      LoadMode = 0  // read into buffers
	LoadMmap      LoadMode = 1  // map the file; zero copy where possible
	LoadMlock     LoadMode = 2  // read into buffers and lock host buffers
	LoadMmapMlock LoadMode = 3  // map and lock the mapping
	LoadDirectIO  LoadMode = 4  // read with O_DIRECT, bypassing the page cache
)

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

// Lazy modes.
const (
	LazyOff  LazyMode = 0
	LazyAuto LazyMode = 1 // only tensors larger than 4 GiB
	LazyOn   LazyMode = 2
)

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
	for m := LazyOff; m <= LazyOn; m++ {
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

// NGPULayers values with a meaning of their own (llama.cpp's -ngl auto and
// all). Plans treat both as every layer; Fit chooses the count only when
// it is NGPULayersAuto, the default.
const (
	NGPULayersAuto = -1
	NGPULayersAll  = -2
)

// Params are the placement parameters, with llama.cpp's names and
// defaults (see DefaultParams).
type Params struct {
	NGPULayers    int       // layers (counting the output layer) to offload; NGPULayersAuto (default) or NGPULayersAll (any value below -1): all
	SplitMode     SplitMode // default SplitLayer
	MainGPU       int       // the device for SplitNone (negative: none)
	TensorSplit   []float32 // share per device; empty: by free memory
	Overrides     []Override
	NoHost        bool     // keep host (pinned) buffer types out of the CPU list
	UseExtraBufts bool     // CPU extra buffer types (CPU_REPACK) take part; llama.cpp's default is on
	LoadMode      LoadMode // default LoadAuto
	Lazy          LazyMode // default LazyAuto
	Devices       []string // device names to use, in order; empty: automatic; ["none"]: no offload

	// CPUMoE keeps every layer's expert weights on the CPU; NCPUMoE keeps
	// those of the first N layers. Both become overrides placed before
	// Overrides, as llama.cpp's --cpu-moe / --n-cpu-moe do.
	CPUMoE  bool
	NCPUMoE int

	// MapRanges chooses how mapped buffers cover the file (see MapRanges).
	MapRanges MapRanges

	// LoadMTP loads the multi-token-prediction (NextN) blocks some
	// architectures carry; llama.cpp's default leaves them unused.
	LoadMTP bool

	// NoProbeCache asks every supports_op question anew (tests prove the
	// cache changes nothing).
	NoProbeCache bool
}

// MapRanges is how the zero-copy buffers of a context cover the mapped file.
type MapRanges int

const (
	// MapOwnRanges wraps only the byte ranges of the context's own tensors
	// that no other context uses (merged), so that a buffer never pins the
	// bytes of tensors that live elsewhere (the get_mapping_ranges of llama.cpp's loader design).
	MapOwnRanges MapRanges = iota
	// MapSpan wraps one range per file from the context's first tensor to
	// its last, as the pinned llama.cpp v0.5.0 does (get_mapping_range).
	MapSpan
)

func (r MapRanges) String() string {
	if r == MapSpan {
		return "span"
	}
	return "own"
}

// DefaultParams are llama.cpp's defaults: layers auto (all, unless Fit
// chooses), layer split, mmap where every device supports it, extra buffer
// types on, lazy auto.
func DefaultParams() Params {
	return Params{NGPULayers: NGPULayersAuto, SplitMode: SplitLayer, LoadMode: LoadAuto, Lazy: LazyAuto, UseExtraBufts: true}
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
