package place

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/arch"
	"github.com/ggload/ggload/loader/gguf"
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
}

// BufferPlan is one buffer the loader will create.
type BufferPlan struct {
	Name      string // as llama.cpp names it ("CPU_Mapped", "Vulkan0", ...)
	Size      uint64 // as the buffer will report it: Requested plus the backend's own slack
	Requested uint64 // what the loader asks for: the tensors' allocation sizes, aligned
	File      int    // mapped buffers: the file; -1 for allocated buffers
	First     int64  // mapped buffers: the file range wrapped
	Last      int64
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

// Plan is where everything goes.
type Plan struct {
	Model    *gguf.Model
	Arch     string
	Exact    bool // the architecture's own tensor creation was replayed; false: the generic path, by tensor names
	NLayer   int  // n_layer_all; the output layer is NLayer
	Params   Params
	LoadMode LoadMode // resolved: never LoadAuto
	UseMmap  bool
	Lazy     LazyMode // resolved

	CPU          *ggml.Device
	Devices      []*ggml.Device // the model's device list
	Shares       []float32      // per device: tensor split or free memory
	Splits       []float32      // cumulative normalised split points
	GPUStart     int            // i_gpu_start
	GPULayers    int            // act_gpu_layers
	LayerDevices []*ggml.Device // per layer 0..NLayer (the output); the CPU for layers kept there

	Tensors  []TensorPlan
	Contexts []ContextPlan
	Moved    Moved
	Log      []LogLine
	Usage    []DeviceUse

	ProbeQuestions int // supports_op questions
	Probes         int // questions that reached a device (cache misses)
}

// bufEntry is one (device, buffer type) of a buffer type list.
type bufEntry struct {
	dev  *ggml.Device
	buft ggml.BufferType
}

type planner struct {
	rt     *ggml.Runtime
	m      *gguf.Model
	h      *hparams
	p      *Plan
	pr     *prober
	cpu    *ggml.Device
	cpuBuf ggml.BufferType

	cpuList  []bufEntry
	gpuLists map[*ggml.Device][]bufEntry
	layerLst [][]bufEntry // per layer 0..NLayer

	overrides []compiledOverride
	warnedOT  bool

	ctxIndex  map[ctxKey]int
	members   map[member]bool // which weights each context holds
	allocSize map[allocKey]uint64
}

type member struct {
	ctx int
	w   *gguf.Weight
}

type ctxKey struct {
	buft ggml.BufferType
	lazy bool
}

type allocKey struct {
	buft ggml.BufferType
	typ  ggml.Type
	ne   ggml.Shape
}

type compiledOverride struct {
	Override
	re   *regexp.Regexp
	buft ggml.BufferType
}

// New plans the placement of model m on the devices of rt.
func New(rt *ggml.Runtime, m *gguf.Model, params Params) (*Plan, error) {
	h, err := readHparams(m, params.LoadMTP)
	if err != nil {
		return nil, err
	}
	pr := newProber(rt, h, params.NoProbeCache)
	return plan(rt, m, h, params, pr)
}

func plan(rt *ggml.Runtime, m *gguf.Model, h *hparams, params Params, pr *prober) (*Plan, error) {
	cpu := rt.CPUDevice()
	if cpu == nil {
		return nil, fmt.Errorf("place: no CPU backend found in %s", rt.Location().Dir)
	}
	if params.SplitMode == SplitTensor {
		return nil, fmt.Errorf("place: split mode tensor needs ggml's meta device, whose split-state callback returns a struct by value, which Go callbacks through purego cannot; use split mode layer or row")
	}
	if params.SplitMode < SplitNone || params.SplitMode > SplitTensor {
		return nil, fmt.Errorf("place: invalid split mode %d", params.SplitMode)
	}
	if params.NCPUMoE < 0 {
		return nil, fmt.Errorf("place: --n-cpu-moe %d is negative", params.NCPUMoE)
	}
	p := &Plan{Model: m, Arch: h.arch, Exact: h.exact, NLayer: h.nLayerAll, Params: params, CPU: cpu, Lazy: params.Lazy}
	pl := &planner{
		rt: rt, m: m, h: h, p: p, pr: pr, cpu: cpu, cpuBuf: cpu.BufferType(),
		gpuLists: map[*ggml.Device][]bufEntry{}, ctxIndex: map[ctxKey]int{},
		members:   make(map[member]bool, len(m.Weights)+8),
		allocSize: map[allocKey]uint64{},
	}
	if h.exact {
		p.info(fmt.Sprintf("place: architecture '%s': llama.cpp %s's own tensor creation, replayed", h.arch, arch.Pin))
	}
	if h.nLayerAll > arch.LayerLimit() {
		p.warn(fmt.Sprintf("place: %d layers: llama.cpp %s loads at most %d (LLAMA_MAX_LAYERS) and would abort on this model", h.nLayerAll, arch.Pin, arch.LayerLimit()))
	}
	devs, devLog, err := resolveDevices(rt, params)
	if err != nil {
		return nil, err
	}
	p.Devices = devs
	for _, l := range devLog {
		p.info(l)
	}
	for _, d := range devs {
		pr := d.Props()
		id := pr.DeviceID
		if id == "" {
			id = "unknown id"
		}
		p.info(fmt.Sprintf("llama_prepare_model_devices: using device %s (%s) (%s) - %d MiB free", d.Name(), pr.Description, id, pr.MemoryFree/1024/1024))
	}
	if len(params.TensorSplit) > max(len(devs), 1) && len(params.TensorSplit) > 0 {
		return nil, fmt.Errorf("place: %d tensor split values for %d devices (%s)", len(params.TensorSplit), len(devs), deviceNames(devs))
	}
	if err := pl.resolveModes(); err != nil {
		return nil, err
	}
	if err := pl.buildLists(); err != nil {
		return nil, err
	}
	pl.assignLayers()
	if err := pl.compileOverrides(); err != nil {
		return nil, err
	}
	if err := pl.createTensors(); err != nil {
		return nil, err
	}
	if err := pl.sizeContexts(); err != nil {
		return nil, err
	}
	pl.summarise()
	p.ProbeQuestions, p.Probes = pr.asked, pr.probes
	return p, nil
}

func deviceNames(devs []*ggml.Device) string {
	if len(devs) == 0 {
		return "none"
	}
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = d.Name()
	}
	return strings.Join(names, ", ")
}

func (p *Plan) log(level, text string) { p.Log = append(p.Log, LogLine{level, text}) }
func (p *Plan) info(text string)       { p.log("INFO", text) }
func (p *Plan) debug(text string)      { p.log("DEBUG", text) }
func (p *Plan) warn(text string)       { p.log("WARN", text) }

// resolveModes applies AUTO's fallbacks (see ResolveModes).
func (pl *planner) resolveModes() error {
	p := pl.p
	if _, ok := loadModeNames[p.Params.LoadMode]; !ok {
		return fmt.Errorf("place: invalid load mode %d", p.Params.LoadMode)
	}
	if p.Lazy < LazyOff || p.Lazy > LazyOn {
		return fmt.Errorf("place: invalid lazy mode %d", p.Lazy)
	}
	caps := make([]ggml.Caps, len(p.Devices))
	for i, d := range p.Devices {
		caps[i] = d.Caps()
	}
	p.LoadMode, p.UseMmap, p.Lazy = ResolveModes(p.Params.LoadMode, p.Params.Lazy, caps)
	p.info(fmt.Sprintf("load_tensors: loading model tensors, this can take a while... (load_mode = %s)", p.LoadMode))
	return nil
}

// ResolveModes is llama.cpp's resolution of AUTO for the devices of a
// model: AUTO maps the file unless some device lacks mmap support (then it
// reads: NONE), and lazy AUTO turns OFF in that case too.
func ResolveModes(mode LoadMode, lazy LazyMode, devices []ggml.Caps) (LoadMode, bool, LazyMode) {
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
// (make_cpu_buft_list, make_gpu_buft_list).
func (pl *planner) buildLists() error {
	p := pl.p
	all := pl.rt.Devices()
	for _, d := range all {
		if d.Type() == ggml.DeviceAccel && d.BufferType() != pl.cpuBuf {
			pl.cpuList = append(pl.cpuList, bufEntry{d, d.BufferType()})
		}
	}
	if !p.Params.NoHost {
		for _, d := range p.Devices {
			if h, ok := d.HostBufferType(); ok {
				pl.cpuList = append(pl.cpuList, bufEntry{d, h})
				break
			}
		}
	}
	if p.Params.UseExtraBufts {
		for _, x := range pl.cpu.ExtraBufferTypes() {
			pl.cpuList = append(pl.cpuList, bufEntry{pl.cpu, x})
		}
	}
	for _, d := range all {
		if d.Type() == ggml.DeviceCPU {
			pl.cpuList = append(pl.cpuList, bufEntry{d, d.BufferType()})
		}
	}
	for _, d := range p.Devices {
		var list []bufEntry
		if p.Params.SplitMode == SplitRow {
			b, err := d.SplitBufferType(p.Params.TensorSplit)
			if err != nil {
				return fmt.Errorf("place: split mode row: %w", err)
			}
			list = append(list, bufEntry{d, b})
		}
		list = append(list, bufEntry{d, d.BufferType()})
		for _, x := range d.ExtraBufferTypes() {
			list = append(list, bufEntry{d, x})
		}
		pl.gpuLists[d] = append(list, pl.cpuList...)
	}
	return nil
}

// assignLayers computes the split points and each layer's device.
func (pl *planner) assignLayers() {
	p := pl.p
	n := len(p.Devices)
	shares := make([]float32, n)
	allZero := true
	for _, x := range p.Params.TensorSplit {
		if x != 0 {
			allZero = false
		}
	}
	if allZero {
		for i, d := range p.Devices {
			free, total := d.Memory()
			if free == 0 && total == 0 {
				free, _ = pl.cpu.Memory()
			}
			shares[i] = float32(free)
		}
	} else {
		copy(shares, p.Params.TensorSplit)
	}
	p.Shares = shares
	p.Splits = splitPoints(shares)
	p.GPUStart, p.GPULayers = gpuLayers(p.NLayer, p.Params.NGPULayers, n)
	p.LayerDevices = make([]*ggml.Device, p.NLayer+1)
	pl.layerLst = make([][]bufEntry, p.NLayer+1)
	for il := 0; il <= p.NLayer; il++ {
		i := layerDevice(il, p.GPUStart, p.GPULayers, p.Splits)
		dev, list := pl.cpu, pl.cpuList
		if i >= 0 && i < n {
			dev, list = p.Devices[i], pl.gpuLists[p.Devices[i]]
		}
		p.LayerDevices[il], pl.layerLst[il] = dev, list
		p.debug(fmt.Sprintf("load_tensors: layer %3d assigned to device %s, is_swa = %d", il, dev.Name(), b2i(il < p.NLayer && pl.h.swa(il))))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (pl *planner) compileOverrides() error {
	for _, o := range pl.p.Params.allOverrides() {
		re, err := regexp.Compile(o.Pattern)
		if err != nil {
			return fmt.Errorf("place: -ot pattern '%s': %w", o.Pattern, err)
		}
		b, err := pl.rt.BufferTypeByName(o.BufferType)
		if err != nil {
			return fmt.Errorf("place: -ot %s=%s: %w", o.Pattern, o.BufferType, err)
		}
		pl.overrides = append(pl.overrides, compiledOverride{o, re, b})
	}
	return nil
}

// place is buft_for_tensor plus the context bookkeeping of create_tensor,
// for a tensor created with the shape shape (a file tensor's own, or the
// one a TENSOR_ALLOW_RESHAPE creation gives it).
func (pl *planner) place(w *gguf.Weight, info TensorInfo, il int, dup, lazyCapable bool, shape ggml.Shape) error {
	p := pl.p
	t := TensorPlan{Name: w.Name, Type: w.Type, Shape: shape, Bytes: w.Size, Class: info.Layer, Op: info.Op, Duplicate: dup, Weight: w}
	var list []bufEntry
	switch info.Layer {
	case LayerInput:
		t.Layer, list = -1, pl.cpuList
	case LayerOutput:
		t.Layer, list = p.NLayer, pl.layerLst[p.NLayer]
	default:
		t.Layer, list = il, pl.layerLst[il]
	}
	if len(list) == 0 {
		return fmt.Errorf("place: no buffer types for tensor %s", w.Name)
	}
	lazy := false
	if lazyCapable && p.Lazy != LazyOff && (p.Lazy == LazyOn || w.Size > LazyAutoMinSize) {
		lazy = true
		t.Lazy = true
		t.BufferType, t.Device, t.Reason = pl.cpuBuf, pl.cpu, ReasonLazy
		t.Detail = "read on demand from the mapping; kept on the CPU buffer type"
		p.info(fmt.Sprintf("lazy_read::add: tensor %s (size = %d MiB) lazy read enabled", w.Name, w.Size/1024/1024))
	} else if err := pl.chooseBuft(&t, list); err != nil {
		return err
	}
	return pl.addToContext(t, lazy)
}

func (pl *planner) chooseBuft(t *TensorPlan, list []bufEntry) error {
	p := pl.p
	var chosen ggml.BufferType
	var chosenDev *ggml.Device
	for _, o := range pl.overrides {
		if !o.re.MatchString(t.Name) {
			continue
		}
		t.Reason = ReasonOverride
		if o.buft == pl.cpuBuf {
			b, d, err := pl.selectWeightBuft(t, pl.cpuList)
			if err != nil {
				return err
			}
			chosen, chosenDev = b, d
			t.Detail = fmt.Sprintf("-ot %s=%s, through the CPU list", o.Pattern, o.BufferType)
			if p.UseMmap && !pl.warnedOT {
				pl.warnedOT = true
				p.warn("llama_model_loader: tensor overrides to CPU are used with mmap enabled - consider using --load-mode none for better performance")
			}
		} else {
			chosen = o.buft
			chosenDev, _ = o.buft.Device()
			t.Detail = fmt.Sprintf("-ot %s=%s", o.Pattern, o.BufferType)
		}
		p.debug(fmt.Sprintf("tensor %s (%d MiB %s) buffer type overridden to %s", t.Name, t.Bytes/1024/1024, t.Type, chosen.Name()))
		break
	}
	if chosen.IsZero() {
		b, d, err := pl.selectWeightBuft(t, list)
		if err != nil {
			return err
		}
		chosen, chosenDev = b, d
		if b == list[0].buft {
			t.Reason = ReasonDefault
		} else {
			t.Reason = ReasonFallback
			t.Detail = fmt.Sprintf("%s on %s cannot run %s for %s; first supported: %s", list[0].buft.Name(), list[0].dev.Name(), pl.rt.OpName(t.Op), t.Type, b.Name())
		}
	}
	// under mmap, a device's host buffer type becomes the CPU's
	if dev, ok := chosen.Device(); p.UseMmap && ok {
		if h, ok := dev.HostBufferType(); ok && h == chosen {
			t.Detail = strings.TrimSpace(t.Detail + fmt.Sprintf(" (%s under mmap is the CPU buffer type)", chosen.Name()))
			chosen, chosenDev = pl.cpuBuf, pl.cpu
			if t.Reason == ReasonDefault {
				t.Reason = ReasonMmapHost
			}
		}
	}
	if chosenDev == nil {
		chosenDev = pl.cpu
	}
	if chosen != list[0].buft {
		if p.Moved.Count == 0 {
			p.Moved = Moved{FirstName: t.Name, FirstType: t.Type, From: list[0].buft, To: chosen}
		}
		p.Moved.Count++
	}
	t.BufferType, t.Device = chosen, chosenDev
	return nil
}

// selectWeightBuft is select_weight_buft: the first entry of list whose
// device supports the tensor's op with the weight in that buffer type.
func (pl *planner) selectWeightBuft(t *TensorPlan, list []bufEntry) (ggml.BufferType, *ggml.Device, error) {
	for _, e := range list {
		ok, err := pl.pr.supported(t.Name, t.Type, t.Shape, t.Op, e.buft, e.dev)
		if err != nil {
			return ggml.BufferType{}, nil, err
		}
		if ok {
			dev := e.dev
			if d, ok := e.buft.Device(); ok {
				dev = d
			}
			return e.buft, dev, nil
		}
	}
	return ggml.BufferType{}, nil, fmt.Errorf("place: failed to find a compatible buffer type for tensor %s", t.Name)
}

// addToContext is ctx_for_buft and the TENSOR_DUPLICATED reuse rule.
func (pl *planner) addToContext(t TensorPlan, lazy bool) error {
	p := pl.p
	key := ctxKey{t.BufferType, lazy}
	ci, ok := pl.ctxIndex[key]
	if !ok {
		ci = len(p.Contexts)
		pl.ctxIndex[key] = ci
		dev := t.Device
		if d, ok := t.BufferType.Device(); ok {
			dev = d
		} else {
			dev = pl.cpu
		}
		p.Contexts = append(p.Contexts, ContextPlan{BufferType: t.BufferType, Device: dev, Lazy: lazy})
	}
	t.Context = ci
	mk := member{ci, t.Weight}
	if t.Duplicate && pl.members[mk] {
		t.Shared = true
	}
	idx := len(p.Tensors)
	p.Tensors = append(p.Tensors, t)
	if !t.Shared {
		p.Contexts[ci].Tensors = append(p.Contexts[ci].Tensors, idx)
		pl.members[mk] = true
	}
	return nil
}

// sizeContexts sorts the contexts as llama.cpp's ctx_map does (non-lazy
// first, then by buffer type name) and sizes their buffers.
func (pl *planner) sizeContexts() error {
	p := pl.p
	order := make([]int, len(p.Contexts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := p.Contexts[a], p.Contexts[b]
		if ca.Lazy != cb.Lazy {
			return cmp.Compare(b2i(ca.Lazy), b2i(cb.Lazy))
		}
		// by the native name: for RPC buffer types behind ggload's guard
		// that holds the guard's address, which is what llama.cpp in this
		// process orders by
		return strings.Compare(ca.BufferType.NativeName(), cb.BufferType.NativeName())
	})
	remap := make([]int, len(order))
	sorted := make([]ContextPlan, len(order))
	for newI, oldI := range order {
		remap[oldI] = newI
		sorted[newI] = p.Contexts[oldI]
	}
	p.Contexts = sorted
	for i := range p.Tensors {
		if p.Tensors[i].Context >= 0 {
			p.Tensors[i].Context = remap[p.Tensors[i].Context]
		}
	}
	for ci := range p.Contexts {
		c := &p.Contexts[ci]
		isDefault := c.BufferType == c.Device.BufferType()
		if (p.UseMmap || c.Lazy) && c.Device.Caps().BufferFromHostPtr && isDefault {
			c.Mapped = true
			name, err := c.Device.HostPtrBufferName()
			if err != nil {
				return err
			}
			for fi := range p.Model.Files {
				for _, r := range pl.mappedRanges(ci, fi) {
					n := uint64(r[1] - r[0])
					c.Buffers = append(c.Buffers, BufferPlan{Name: name, Size: n, Requested: n, File: fi, First: r[0], Last: r[1]})
				}
			}
		} else {
			size, err := pl.allocatedSize(c)
			if err != nil {
				return err
			}
			slack, err := c.BufferType.AllocSlack()
			if err != nil {
				return fmt.Errorf("place: %s: %w", c.BufferType.Name(), err)
			}
			c.Buffers = []BufferPlan{{Name: c.BufferType.Name(), Size: size + slack, Requested: size, File: -1}}
		}
		for _, b := range c.Buffers {
			c.Size += b.Size
		}
	}
	return nil
}

// mappedRanges are the file ranges a mapped context's buffers wrap.
func (pl *planner) mappedRanges(ci, fi int) [][2]int64 {
	p := pl.p
	var own [][2]int64
	ownW := map[*gguf.Weight]bool{}
	for _, ti := range p.Contexts[ci].Tensors {
		w := p.Tensors[ti].Weight
		if w.File != fi {
			continue
		}
		ownW[w] = true
		own = append(own, [2]int64{w.Offset, w.Offset + w.Size})
	}
	if len(own) == 0 {
		return nil
	}
	if p.Params.MapRanges == MapSpan {
		first, last := own[0][0], own[0][1]
		for _, r := range own {
			first, last = min(first, r[0]), max(last, r[1])
		}
		if first >= last {
			return nil
		}
		return [][2]int64{{first, last}}
	}
	var other [][2]int64
	for cj := range p.Contexts {
		if cj == ci {
			continue
		}
		for _, ti := range p.Contexts[cj].Tensors {
			w := p.Tensors[ti].Weight
			if w.File == fi && !ownW[w] {
				other = append(other, [2]int64{w.Offset, w.Offset + w.Size})
			}
		}
	}
	return subRanges(mergeRanges(own), mergeRanges(other))
}

// mergeRanges sorts and merges overlapping ranges.
func mergeRanges(rs [][2]int64) [][2]int64 {
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	for _, r := range rs {
		if r[0] >= r[1] {
			continue
		}
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
		} else {
			out = append(out, r)
		}
	}
	return out
}

// subRanges removes the merged ranges b from the merged ranges a.
func subRanges(a, b [][2]int64) [][2]int64 {
	var out [][2]int64
	j := 0
	for _, r := range a {
		start := r[0]
		for j < len(b) && b[j][1] <= start {
			j++
		}
		k := j
		for k < len(b) && b[k][0] < r[1] {
			if b[k][0] > start {
				out = append(out, [2]int64{start, b[k][0]})
			}
			start = max(start, b[k][1])
			k++
		}
		if start < r[1] {
			out = append(out, [2]int64{start, r[1]})
		}
	}
	return out
}

// allocatedSize is what ggml_backend_alloc_ctx_tensors_from_buft allocates:
// each tensor's allocation size padded to the buffer type's alignment.
func (pl *planner) allocatedSize(c *ContextPlan) (uint64, error) {
	align := c.BufferType.Alignment()
	if align == 0 {
		align = 1
	}
	var total uint64
	for _, ti := range c.Tensors {
		t := &pl.p.Tensors[ti]
		n, err := pl.tensorAllocSize(c.BufferType, t.Type, t.Shape)
		if err != nil {
			return 0, err
		}
		total += (n + align - 1) / align * align
	}
	return total, nil
}

// tensorAllocSize asks the buffer type how much a tensor needs (backends
// may pad), once per (buffer type, type, shape).
func (pl *planner) tensorAllocSize(b ggml.BufferType, typ ggml.Type, ne ggml.Shape) (uint64, error) {
	key := allocKey{b, typ, ne}
	if n, ok := pl.allocSize[key]; ok {
		return n, nil
	}
	ctx, err := pl.rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		return 0, err
	}
	defer ctx.Free()
	t, err := ctx.NewTensor(typ, ne[:]...)
	if err != nil {
		return 0, err
	}
	n := b.AllocSize(t)
	pl.allocSize[key] = n
	return n, nil
}

// summarise writes llama.cpp's closing lines (moved tensors, offload counts,
// buffer sizes) and sums what each device holds.
func (pl *planner) summarise() {
	p := pl.p
	if p.Moved.Count > 0 {
		p.debug(fmt.Sprintf("done_getting_tensors: tensor '%s' (%s) (and %d others) cannot be used with preferred buffer type %s, using %s instead",
			p.Moved.FirstName, p.Moved.FirstType, p.Moved.Count-1, p.Moved.From.Name(), p.Moved.To.Name()))
	}
	if pl.supportsOffload() {
		ngl := p.Params.NGPULayers
		if ngl < 0 {
			ngl = p.NLayer + 1
		}
		nGPU := min(ngl, p.NLayer)
		nRep := nGPU
		if nRep > 0 {
			p.info("load_tensors: offloading output layer to GPU")
			nRep--
		}
		p.info(fmt.Sprintf("load_tensors: offloading %d repeating layers to GPU", nRep))
		p.info(fmt.Sprintf("load_tensors: offloaded %d/%d layers to GPU", min(ngl, p.NLayer+1), p.NLayer+1))
	}
	use := map[*ggml.Device]*DeviceUse{}
	var order []*ggml.Device
	for _, c := range p.Contexts {
		for _, b := range c.Buffers {
			p.info(fmt.Sprintf("load_tensors: %12s model buffer size = %8.2f MiB", b.Name, float64(b.Size)/1024/1024))
		}
		// host buffer types (pinned memory of a GPU's driver) use host RAM
		holder := c.Device
		if c.BufferType.IsHost() {
			holder = pl.cpu
		}
		u, ok := use[holder]
		if !ok {
			free, total := holder.Memory()
			u = &DeviceUse{Device: holder, Free: free, Total: total}
			use[holder] = u
			order = append(order, holder)
		}
		if c.Mapped {
			u.Mapped += c.Size
		} else {
			u.Allocated += c.Size
		}
	}
	for _, d := range order {
		p.Usage = append(p.Usage, *use[d])
	}
}

func (pl *planner) supportsOffload() bool {
	for _, d := range pl.rt.Devices() {
		if t := d.Type(); t == ggml.DeviceGPU || t == ggml.DeviceIGPU {
			return true
		}
	}
	for _, r := range pl.rt.Backends() {
		if r.Name() == "RPC" {
			return true
		}
	}
	return false
}
