// Port of llama.cpp src/llama-model.cpp and src/llama-model-loader.cpp
// (v0.5.0): load_tensors' buffer type lists (make_cpu_buft_list,
// make_gpu_buft_list) and create_tensor's choice (select_weight_buft).

package place

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/place/internal/probe"
)

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
	pr     *probe.Prober
	cpu    *ggml.Device
	cpuBuf ggml.BufferType

	cpuList  []bufEntry
	gpuLists map[*ggml.Device][]bufEntry
	layerLst [][]bufEntry // per layer 0..NLayer

	overrides []compiledOverride
	warnedOT  bool

	splitTable map[string]ggml.SplitState // split mode tensor: what the meta device asks
	splitter   *tensorSplitter            // and asks it of the weights and the cache
	// cacheSplitErr is the first cache tensor's split the callback
	// refuses (ContextMemory.AllocErr)
	cacheSplitErr error

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

func plan(rt *ggml.Runtime, m *gguf.Model, h *hparams, params Params, pr *probe.Prober) (*Plan, error) {
	if err := pr.Err(); err != nil {
		return nil, fmt.Errorf("place: planning ended: %w", err)
	}
	cpu := rt.CPUDevice()
	if cpu == nil {
		return nil, fmt.Errorf("place: no CPU backend found in %s", rt.Location().Dir)
	}
	if params.SplitMode < SplitLayer || params.SplitMode > SplitTensor {
		return nil, fmt.Errorf("place: invalid split mode %d", params.SplitMode)
	}
	if params.NCPUMoE < 0 {
		return nil, fmt.Errorf("place: --n-cpu-moe %d is negative", params.NCPUMoE)
	}
	p := &Plan{rt: rt, Model: m, Arch: h.arch, Exact: h.exact, NLayer: h.nLayerAll, Params: params, CPU: cpu, Lazy: params.Lazy}
	pl := &planner{
		rt: rt, m: m, h: h, p: p, pr: pr, cpu: cpu, cpuBuf: cpu.BufferType(),
		gpuLists: map[*ggml.Device][]bufEntry{}, ctxIndex: map[ctxKey]int{},
		members:   make(map[member]bool, len(m.Weights)+8),
		allocSize: map[allocKey]uint64{},
	}
	p.Log = append(p.Log, h.log...)
	if h.exact {
		p.info(fmt.Sprintf("place: architecture '%s': llama.cpp %s's own tensor creation, replayed", h.shown, arch.Pin))
	}
	if h.nLayerAll > arch.LayerLimit() {
		p.warn(fmt.Sprintf("place: %d layers: llama.cpp %s loads at most %d (LLAMA_MAX_LAYERS) and would abort on this model", h.nLayerAll, arch.Pin, arch.LayerLimit()))
	}
	devs, devLog, err := resolveDevices(rt, params)
	if err != nil {
		return nil, err
	}
	for _, l := range devLog {
		p.info(l)
	}
	if params.SplitMode == SplitTensor {
		if devs, err = pl.metaDevice(devs); err != nil {
			return nil, err
		}
	}
	p.Devices = devs
	for _, d := range devs {
		pr := d.Props()
		id := pr.DeviceID
		if id == "" {
			id = "unknown id"
		}
		p.info(fmt.Sprintf("llama_prepare_model_devices: using device %s (%s) (%s) - %d MiB free", d.Name(), pr.Description, id, pr.MemoryFree/1024/1024))
	}
	shared := devs // the devices -ts shares among
	if p.TensorDevices != nil {
		shared = p.TensorDevices
	}
	if len(params.TensorSplit) > max(len(shared), 1) {
		return nil, fmt.Errorf("place: %d tensor split values for %d devices (%s)", len(params.TensorSplit), len(shared), deviceNames(shared))
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
	if err := pl.splitTensors(); err != nil {
		return nil, err
	}
	if err := pl.sizeContexts(); err != nil {
		return nil, err
	}
	switch {
	case p.Params.Context.Skip:
	case p.Params.Context.Custom != nil:
		if err := pl.customContext(p.Params.Context.Custom); err != nil {
			return nil, err
		}
	case !h.exact:
		p.info(fmt.Sprintf("place: no context planned: the memory a context of '%s' needs is its own code, which llama.cpp %s does not have", h.shown, arch.Pin))
	default:
		// a context llama.cpp would refuse leaves the weights' plan as it
		// is, and says why
		if err := pl.planContext(); err != nil {
			p.Context, p.ContextErr = nil, err
			p.warn("place: no context: " + strings.TrimPrefix(err.Error(), "place: "))
		}
	}
	pl.summarise()
	p.ProbeQuestions, p.Probes = pr.Asked, pr.Probes
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

// resolveModes applies AUTO's fallbacks (see autoModes).
func (pl *planner) resolveModes() error {
	p := pl.p
	if _, ok := loadModeNames[p.Params.LoadMode]; !ok {
		return fmt.Errorf("place: invalid load mode %d", p.Params.LoadMode)
	}
	if p.Lazy < LazyAuto || p.Lazy > LazyOn {
		return fmt.Errorf("place: invalid lazy mode %d", p.Lazy)
	}
	caps := make([]ggml.Caps, len(p.Devices))
	for i, d := range p.Devices {
		caps[i] = d.Caps()
	}
	// a source that is no local file (a reader, an HTTP URL) cannot be
	// mapped: AUTO reads it, as when a device cannot map, and a mode that
	// maps it or reads it directly is refused
	for _, f := range p.Model.Files {
		if src := f.Source(); !src.Local() {
			switch {
			case p.Params.LoadMode.UsesMmap() && p.Params.LoadMode != LoadAuto, p.Params.LoadMode == LoadDirectIO:
				return fmt.Errorf("place: load mode %s needs a local file: %s is read through a reader (load mode none or auto reads it)", p.Params.LoadMode, src.Name)
			case p.Params.Lazy == LazyOn:
				return fmt.Errorf("place: lazy tensors stay in a file's mapping: %s is read through a reader and cannot be mapped", src.Name)
			}
			caps = append(caps, ggml.Caps{})
			p.NoMmap = src.Name + " is read through a reader"
			break
		}
		// tensors used in place must be aligned in memory as ggml asks: a
		// GGUF at an offset that breaks it cannot be mapped for them
		if src := f.Source(); src.Offset%ggml.HostPtrAlignment != 0 {
			if p.Params.LoadMode.UsesMmap() && p.Params.LoadMode != LoadAuto || p.Params.Lazy == LazyOn {
				return fmt.Errorf("place: load mode %s maps the file: %s starts at byte %d of its file, not a multiple of %d, and its tensors cannot be used in place (load mode none or auto reads it)", p.Params.LoadMode, src.Name, src.Offset, ggml.HostPtrAlignment)
			}
			caps = append(caps, ggml.Caps{})
			p.NoMmap = fmt.Sprintf("%s starts at byte %d of its file, not a multiple of %d", src.Name, src.Offset, ggml.HostPtrAlignment)
			break
		}
	}
	p.LoadMode, p.UseMmap, p.Lazy = autoModes(p.Params.LoadMode, p.Params.Lazy, caps)
	switch {
	case p.Params.LoadMode != LoadAuto:
		p.NoMmap = "" // a mode asked for needs no reason
	case !p.UseMmap && p.NoMmap == "":
		p.NoMmap = "a device lacks mmap support"
	}
	p.info(fmt.Sprintf("load_tensors: loading model tensors, this can take a while... (load_mode = %s)", p.LoadMode))
	return nil
}

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
	if !p.Params.NoExtraBufts {
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
	// only the first value per device counts (in split mode tensor, the
	// meta device's: the rest are its devices' shares of each tensor)
	for i, x := range p.Params.TensorSplit {
		if x != 0 && i < n {
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
	p.GPUStart, p.GPULayers = gpuLayers(p.NLayer, p.NGPULayers(), n)
	p.LayerDevices = make([]*ggml.Device, p.NLayer+1)
	pl.layerLst = make([][]bufEntry, p.NLayer+1)
	p.layerLists = pl.layerLst
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
		ok, err := pl.pr.Supported(t.Name, t.Type, t.Shape, t.Op, e.buft, e.dev)
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

// summarise writes llama.cpp's closing lines (moved tensors, offload counts,
// buffer sizes) and sums what each device holds.
func (pl *planner) summarise() {
	p := pl.p
	if p.Moved.Count > 0 {
		p.debug(fmt.Sprintf("done_getting_tensors: tensor '%s' (%s) (and %d others) cannot be used with preferred buffer type %s, using %s instead",
			p.Moved.FirstName, p.Moved.FirstType, p.Moved.Count-1, p.Moved.From.Name(), p.Moved.To.Name()))
	}
	if pl.supportsOffload() {
		ngl := p.NGPULayers()
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
	at := func(d *ggml.Device, b ggml.BufferType) *DeviceUse {
		// host buffer types (pinned memory of a GPU's driver) use host RAM
		if b.IsHost() {
			d = pl.cpu
		}
		u, ok := use[d]
		if !ok {
			free, total := d.Memory()
			u = &DeviceUse{Device: d, Free: free, Total: total}
			use[d] = u
			order = append(order, d)
		}
		return u
	}
	for _, c := range p.Contexts {
		for _, b := range c.Buffers {
			p.info(fmt.Sprintf("load_tensors: %12s model buffer size = %8.2f MiB", b.Name, float64(b.Size)/1024/1024))
		}
		if c.Device.IsMeta() {
			// each device of a meta device holds its slices
			for _, b := range c.Buffers {
				for _, part := range b.Parts {
					at(part.Device, part.BufferType).Allocated += part.Size
				}
			}
			continue
		}
		u := at(c.Device, c.BufferType)
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

// metaDevice makes the meta device of split mode tensor over devs
// (llama_prepare_model_devices); it is then the model's one device.
func (pl *planner) metaDevice(devs []*ggml.Device) ([]*ggml.Device, error) {
	p := pl.p
	if ok, err := pl.h.run.SupportsTensorSplit(); err != nil || !ok {
		if err == nil {
			err = &arch.Throw{Msg: fmt.Sprintf("LLAMA_SPLIT_MODE_TENSOR not implemented for architecture '%s'", pl.h.shown)}
		}
		return nil, refused(pl.m, err)
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("place: split mode tensor needs at least one device other than the CPU")
	}
	if len(devs) > ggml.MetaMaxDevices {
		return nil, fmt.Errorf("place: split mode tensor over %d devices (%s): ggml's meta device spans at most %d", len(devs), deviceNames(devs), ggml.MetaMaxDevices)
	}
	if err := ggml.MetaDeviceSupported(); err != nil {
		return nil, fmt.Errorf("place: split mode tensor: %w", err)
	}
	if len(p.Params.DeviceNames) > 0 {
		p.info(fmt.Sprintf("llama_prepare_model_devices: creating a Meta device with %d devices", len(devs)))
		for i, d := range devs {
			p.info(fmt.Sprintf("llama_prepare_model_devices: - device %d: %s", i, d.Name()))
		}
	} else {
		p.info(fmt.Sprintf("llama_prepare_model_devices: creating a Meta device for tensor parallelism from %d devices:", len(devs)))
		for i, d := range devs {
			p.info(fmt.Sprintf("llama_prepare_model_devices: - device %d: %s (%s)", i, d.Name(), d.Description()))
		}
	}
	table := map[string]ggml.SplitState{}
	meta, keep, err := pl.rt.MetaDevice(devs, func(name string) (ggml.SplitState, bool) {
		s, ok := table[name]
		return s, ok
	})
	if err != nil {
		return nil, fmt.Errorf("place: split mode tensor: %w", err)
	}
	pl.splitTable = table
	p.TensorDevices, p.splitKeep = devs, keep
	return []*ggml.Device{meta}, nil
}

// splitTensors decides how the meta device holds each tensor placed on it.
func (pl *planner) splitTensors() error {
	p := pl.p
	if len(p.TensorDevices) == 0 {
		return nil
	}
	meta := p.Devices[0]
	// llama_model::get_tensor: the model's tensors by name
	byName := map[string]arch.Tensor{}
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if _, ok := byName[t.Name]; !ok && t.Context >= 0 {
			byName[t.Name] = arch.Tensor{Name: t.Name, Type: int(t.Type), Ne: t.Shape}
		}
	}
	sp := newTensorSplitter(pl.h, len(p.TensorDevices), p.Params.TensorSplit, func(name string) (arch.Tensor, bool) {
		t, ok := byName[name]
		return t, ok
	})
	pl.splitter = sp
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if t.Context < 0 || t.Device != meta {
			continue
		}
		st, ok := pl.splitTable[t.Name]
		if !ok {
			var err error
			if st, err = sp.state(t.Name, t.Type, t.Shape); err != nil {
				return refused(pl.m, err)
			}
			pl.splitTable[t.Name] = st
		}
		t.Split = &st
		p.debug(fmt.Sprintf("tensor %s split over %s: %s", t.Name, deviceNames(p.TensorDevices), st))
	}
	return nil
}
