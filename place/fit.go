package place

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// Fit is llama.cpp's -fit (common_fit_params in the pin's common/fit.cpp):
// it changes only the parameters the user left at their defaults (the
// context size 0, NGPULayers auto, no TensorSplit, no Overrides) so that
// every device keeps its fit target free of what the model and its
// context need there: the weights, the memory module (KV cache, recurrent
// state) and the compute buffers, per device as llama_get_memory_breakdown
// reports them on a model loaded with no_alloc. It shrinks the context
// first, then moves layers off the devices.

// DefaultFitTarget is the memory Fit leaves free on each device by default
// (llama.cpp's -fitt, 1024 MiB).
const DefaultFitTarget = 1 << 30

// DefaultFitMinCtx is llama.cpp's -fitc default.
const DefaultFitMinCtx = 4096

// FitFullCtx as FitOptions.MinCtx keeps the trained context: llama.cpp's
// -c 0 given explicitly, which turns the context reduction off.
const FitFullCtx = math.MaxUint32

// maxOverrides is llama_max_tensor_buft_overrides() of the pin.
const maxOverrides = 4096

// FitOptions are the fit parameters (llama.cpp's -fitt and -fitc).
type FitOptions struct {
	// Targets is the memory to leave free on each device of the model's
	// device list, in bytes: one value applies to every device; devices past
	// the end of a longer list get DefaultFitTarget. Empty: DefaultFitTarget.
	Targets []uint64
	// MinCtx is the smallest context per sequence fit may shrink an unset
	// context to (0: DefaultFitMinCtx; FitFullCtx: never shrink it).
	MinCtx uint32
	// Extra, when not nil, is a second model sharing the devices, which
	// every measure counts too (llama.cpp's common_fit_extra_model).
	Extra *FitExtra
}

// FitExtra is a second model that shares the main model's devices: a
// draft model for speculative decoding, whose context follows the main
// context's size (Params.Context.NCtx is set to it at each measure), or
// a context on the main model's own weights (SharesModel: an MTP
// context), which counts its context and compute alone. Its memory on
// devices the main model does not use is not counted, as in llama.cpp.
type FitExtra struct {
	Model       *gguf.Model
	Params      Params
	SharesModel bool
}

// Target is the memory to leave free on device id of the model's list.
func (o FitOptions) Target(id int) uint64 {
	switch {
	case len(o.Targets) == 1:
		return o.Targets[0]
	case id < len(o.Targets):
		return o.Targets[id]
	}
	return DefaultFitTarget
}

// FitStatus is how a fit ended.
type FitStatus string

// Fit outcomes. As in llama.cpp, a fit that fails is not an error: the
// parameters stay as given (but for a context it already shrank) and the
// load goes on with them.
const (
	FitUnchanged FitStatus = "unchanged" // every device keeps its target free as asked
	FitAdjusted  FitStatus = "adjusted"  // parameters the user left unset were chosen
	FitFailed    FitStatus = "failed"    // no fitting parameters were found (the reason is the last line)
	FitError     FitStatus = "error"     // the fit stopped on an error (llama.cpp's status error)
)

// Llama is the common_params_fit_status llama.cpp's fit returns:
// "success" (unchanged or adjusted), "failure" or "error".
func (s FitStatus) Llama() string {
	switch s {
	case FitFailed:
		return "failure"
	case FitError:
		return "error"
	}
	return "success"
}

// FitDevice is one device's memory, before and after: the weights, the
// context's memory and the compute buffers its own buffer types hold.
type FitDevice struct {
	Device *ggml.Device
	Free   uint64 // free memory (0 for a GPU that reports none: fit gives it nothing)
	Target uint64 // to be left free
	Before uint64 // in its memory with the parameters as given
	After  uint64 // with the parameters fit chose
}

// FitResult is what Fit decided, why, and the plan of the outcome.
type FitResult struct {
	Plan   *Plan
	Status FitStatus
	// Changed lists the parameters fit set: "n_ctx", "n_gpu_layers",
	// "tensor_split", "tensor_buft_overrides".
	Changed []string
	// NCtx is the context size fit leaves (llama_context_params.n_ctx):
	// an unset one resolved to the trained context of every sequence,
	// perhaps shrunk; a set one as given.
	NCtx      uint32
	Devices   []FitDevice
	Reasoning []string // one line per decision, in order
	Trials    int      // placements sized
	Took      time.Duration
	// ComputeWhy, when not empty, is why the compute buffers were not
	// counted (an architecture whose graph ggload does not replay yet):
	// the decisions then count the weights and the context alone.
	ComputeWhy string
}

// layerFraction is the part of a layer that stays on its device when the
// rest overflows (llama.cpp's common_layer_fraction_t).
type layerFraction int

const (
	fracNone layerFraction = iota
	fracAttn               // attention only
	fracUp                 // attention + up
	fracGate               // attention + up + gate
	fracMoE                // everything but the sparse expert weights
)

var fracNames = [...]string{"none", "attention", "attention+up", "attention+up+gate", "dense"}

// overflowPattern matches the tensors of layer il that leave its device.
func overflowPattern(il uint32, f layerFraction) string {
	switch f {
	case fracAttn:
		return fmt.Sprintf(`blk\.%d\.ffn_(gate|up|gate_up|down).*`, il)
	case fracUp:
		return fmt.Sprintf(`blk\.%d\.ffn_(gate|gate_up|down).*`, il)
	case fracGate:
		return fmt.Sprintf(`blk\.%d\.ffn_down.*`, il)
	}
	return fmt.Sprintf(`blk\.%d%s`, il, fitExperts)
}

// fitExperts is ExpertsPattern as llama.cpp's fit spells it.
const fitExperts = `\.ffn_(up|down|gate_up|gate)_(ch|)exps`

// allExperts matches every layer's expert weights.
const allExperts = `blk\.\d+` + fitExperts

// devLayers is one device's share: nLayer layers, of which the last nPart
// keep only part of their weights (the first of them by overflow, the
// others their dense weights).
type devLayers struct {
	nLayer, nPart uint32
	overflow      layerFraction
}

func (d devLayers) nFull() uint32 { return d.nLayer - d.nPart }

type fitter struct {
	rt *ggml.Runtime
	m  *gguf.Model
	h  *hparams
	pr *prober
	// params are the parameters as they stand: given, measured with load
	// mode none (as llama.cpp measures), with the context fit resolved
	// or shrank
	params Params
	res    *FitResult

	devs    []*ggml.Device
	hpNgl   uint32
	extra   *extraModel
	ctxAuto bool    // the context was left unset
	nCtxMax uint32  // what an unset context resolves to: the trained one for every sequence
	targets []int64 // per device: most memory the model may use
}

func (f *fitter) say(format string, args ...any) {
	f.res.Reasoning = append(f.res.Reasoning, fmt.Sprintf(format, args...))
}

// memory is one measure: per device of the model's list the bytes its own
// buffer types hold (weights, context, compute), and the host's.
type memory struct {
	dev       []int64
	model     []int64 // of dev, the weights
	host      int64
	hostModel int64 // of host, the weights
}

// extraModel is the fit's second model: its plan's inputs, and its
// memory on the main model's devices at the context size it was last
// measured at.
type extraModel struct {
	x    *FitExtra
	h    *hparams
	pr   *prober
	mem  *memory
	nCtx int
}

// addExtra adds the second model's memory to a measure, measuring it
// again when the context it follows changed (llama.cpp's
// add_extra_memory). A second model that cannot be planned is fitted
// without, as llama.cpp does.
func (f *fitter) addExtra(m *memory) {
	e := f.extra
	if e == nil {
		return
	}
	if n := f.params.Context.NCtx; e.mem == nil || e.nCtx != n {
		e.nCtx = n
		q := e.x.Params
		q.Context.NCtx = n
		q.LoadMode = LoadNone
		p, err := plan(f.rt, e.x.Model, e.h, q, e.pr)
		if err == nil && p.ContextErr != nil {
			err = p.ContextErr
		}
		e.mem = &memory{dev: make([]int64, len(f.devs)), model: make([]int64, len(f.devs))}
		if err != nil {
			f.say("failed to measure the memory of the extra model, fitting without it: %v", err)
		} else {
			f.res.Trials++
			*e.mem = f.tally(p)
			if e.x.SharesModel {
				for i := range e.mem.dev {
					e.mem.dev[i] -= e.mem.model[i]
					e.mem.model[i] = 0
				}
				e.mem.host -= e.mem.hostModel
				e.mem.hostModel = 0
			}
			f.say("  the extra model at -c %d: %s on the devices, %s in host memory", n, human(uint64(e.mem.sum0())), human(uint64(e.mem.host)))
		}
	}
	for i := range m.dev {
		m.dev[i] += e.mem.dev[i]
		m.model[i] += e.mem.model[i]
	}
	m.host += e.mem.host
	m.hostModel += e.mem.hostModel
}

// sum0 is the devices' total alone.
func (m memory) sum0() int64 {
	s := int64(0)
	for _, v := range m.dev {
		s += v
	}
	return s
}

// sum is the devices' total (the host's when there are none).
func (m memory) sum() int64 {
	if len(m.dev) == 0 {
		return m.host
	}
	s := int64(0)
	for _, v := range m.dev {
		s += v
	}
	return s
}

// measure sizes a placement with its context, as llama.cpp's
// common_get_device_memory_data does: each buffer type's weights, context
// and compute, host buffer types to the host, the others to their device
// (a device not in the model's list, such as the CPU's repacking buffer
// type's, to none). The first measure fixes the device list.
func (f *fitter) measure(q Params) (memory, *Plan, error) {
	f.res.Trials++
	p, err := plan(f.rt, f.m, f.h, q, f.pr)
	if err != nil {
		return memory{}, nil, err
	}
	if p.ContextErr != nil {
		return memory{}, nil, fitErr("failed to create llama_context from model: %v", p.ContextErr)
	}
	if f.devs == nil {
		f.devs = append([]*ggml.Device{}, p.Devices...)
	}
	return f.tally(p), p, nil
}

// tally is a plan's memory per device of the fit's list, and the host's.
func (f *fitter) tally(p *Plan) memory {
	if c := p.Context; c != nil && !c.ComputeKnown && c.Class != "custom" && f.res.ComputeWhy == "" {
		f.res.ComputeWhy = c.ComputeWhy
		f.say("compute buffers not counted (%s): the measures are the weights and the context", c.ComputeWhy)
	}
	mem := memory{dev: make([]int64, len(f.devs)), model: make([]int64, len(f.devs))}
	for _, e := range p.Breakdown() {
		n := int64(e.Model + e.Context + e.Compute)
		if e.BufferType.IsHost() {
			mem.host += n
			mem.hostModel += int64(e.Model)
			continue
		}
		d, ok := e.BufferType.Device()
		if !ok {
			continue
		}
		for i, dd := range f.devs {
			if dd == d {
				mem.dev[i] += n
				mem.model[i] += int64(e.Model)
				break
			}
		}
	}
	return mem
}

// apply sets the layers per device, the split and the overflow overrides
// (llama.cpp's set_ngl_tensor_split_tbo).
func (f *fitter) apply(ngl []devLayers, overflow []string, q *Params) error {
	total := uint32(0)
	for _, d := range ngl {
		total += d.nLayer
	}
	q.NGPULayers = NLayers(int(total))
	if len(f.devs) > 1 {
		q.TensorSplit = make([]float32, len(f.devs))
		for id, d := range ngl {
			q.TensorSplit[id] = float32(d.nLayer)
		}
	}
	q.Overrides = nil
	il0 := f.hpNgl + 1 - total
	for id, d := range ngl {
		il0 += d.nFull()
		for il := il0; il < il0+d.nPart; il++ {
			if len(q.Overrides)+1 >= maxOverrides {
				return fail("llama_max_tensor_buft_overrides() == %d is insufficient for model", maxOverrides)
			}
			if il >= 1000 {
				return fitErr("at most 1000 model layers are supported")
			}
			frac, buft := fracMoE, "CPU"
			if il == il0 {
				frac, buft = d.overflow, overflow[id]
			}
			q.Overrides = append(q.Overrides, Override{Pattern: overflowPattern(il, frac), BufferType: buft})
		}
		il0 += d.nPart
	}
	return nil
}

// memFor measures the given layers per device.
func (f *fitter) memFor(ngl []devLayers, overflow []string) ([]int64, error) {
	q := f.params
	if err := f.apply(ngl, overflow, &q); err != nil {
		return nil, err
	}
	mem, _, err := f.measure(q)
	if err == nil {
		f.addExtra(&mem)
	}
	return mem.dev, err
}

// fitFailure ends a fit that cannot change (more): the parameters stay as
// they stand, as llama.cpp goes on with them. An error one is llama.cpp's
// status error (a runtime error), the others its failure.
type fitFailure struct {
	msg   string
	isErr bool
}

func (e *fitFailure) Error() string { return e.msg }

// Fit chooses the parameters the user left unset so that the model and
// its context leave every device its target free, as llama.cpp's -fit
// (common_fit_params) does, within ctx. It measures the model, its
// context and its compute buffers as llama.cpp measures them (load mode
// none); when a device misses its target it first shrinks an unset
// context, down to o.MinCtx per sequence, then chooses -ngl and, over
// several devices, the tensor split and the overrides that move tensors
// off a full device. FitResult.Reasoning says each step. Fit returns an
// error only when params cannot be planned at all; a fit that cannot help
// has Status FitFailed (or FitError) and the plan of the parameters as
// they stand.
func Fit(ctx context.Context, rt *ggml.Runtime, m *gguf.Model, params Params, o FitOptions) (*FitResult, error) {
	start := time.Now()
	h, err := readHparams(m, params)
	if err != nil {
		return nil, err
	}
	pr := newProber(ctx, rt, h, params.noProbeCache)
	res := &FitResult{}
	measured := params
	measured.LoadMode = LoadNone
	f := &fitter{rt: rt, m: m, h: h, pr: pr, params: measured, res: res}
	if x := o.Extra; x != nil {
		if x.Model == nil {
			return nil, fmt.Errorf("place: fit: the extra model has no file")
		}
		eh, err := readHparams(x.Model, x.Params)
		if err != nil {
			return nil, fmt.Errorf("place: fit: the extra model: %w", err)
		}
		f.extra = &extraModel{x: x, h: eh, pr: newProber(ctx, rt, eh, x.Params.noProbeCache)}
	}
	kept := []Params{params}
	if o.Extra != nil {
		kept = append(kept, o.Extra.Params)
	}
	defer KeepConnected(rt, kept...)()
	chosen, ferr := f.run(o)
	if ferr != nil {
		var fail *fitFailure
		if !asFailure(ferr, &fail) {
			return nil, ferr
		}
		if fail.isErr {
			f.say("encountered an error while trying to fit params to free device memory: %s", fail.msg)
			res.Status = FitError
		} else {
			f.say("failed to fit params to free device memory: %s", fail.msg)
			res.Status = FitFailed
		}
		// what llama.cpp leaves: the context as it stands, the rest as given
		chosen = params
		chosen.Context.NCtx = f.params.Context.NCtx
		if f.ctxAuto && chosen.Context.NCtx != int(f.nCtxMax) {
			res.Changed = []string{"n_ctx"}
			f.say("the context stays at %d, the other parameters as given", chosen.Context.NCtx)
		} else {
			f.say("the parameters stay as given")
		}
	}
	chosen.LoadMode = params.LoadMode
	res.NCtx = uint32(chosen.Context.NCtx)
	res.Plan, err = plan(rt, m, h, chosen, pr)
	if err != nil {
		return nil, err
	}
	if len(res.Devices) > 0 {
		chosen.LoadMode = LoadNone
		after := res.Plan
		if params.LoadMode != LoadNone {
			// sized as llama.cpp sizes it: without the load mode's host buffers
			if after, err = plan(rt, m, h, chosen, pr); err != nil {
				return nil, err
			}
		}
		mem := f.tally(after)
		f.addExtra(&mem)
		for i := range res.Devices {
			res.Devices[i].After = uint64(max(mem.dev[i], 0))
		}
	}
	res.Took = time.Since(start)
	return res, nil
}

func asFailure(err error, out **fitFailure) bool {
	f, ok := err.(*fitFailure)
	if ok {
		*out = f
	}
	return ok
}

func fail(format string, args ...any) error {
	return &fitFailure{msg: fmt.Sprintf(format, args...)}
}

func fitErr(format string, args ...any) error {
	return &fitFailure{msg: fmt.Sprintf(format, args...), isErr: true}
}

// run is the fit; it returns the parameters chosen (given ones: no change).
func (f *fitter) run(o FitOptions) (Params, error) {
	params := &f.params
	if params.SplitMode == SplitTensor {
		return *params, fail("llama_params_fit is not implemented for SPLIT_MODE_TENSOR, abort")
	}
	cp := &params.Context
	nSeq := uint32(max(cp.NParallel, 1))
	nStreams := nSeq
	if cp.KVUnified {
		nStreams = 1
	}
	minCtx := o.MinCtx
	if minCtx == 0 {
		minCtx = DefaultFitMinCtx
	}
	// step 1: the model and its context as given
	full, err := f.measureGiven(nSeq)
	if err != nil {
		return *params, err
	}
	sums, fits := f.againstTargets(full, o)
	if fits {
		f.res.Status = FitUnchanged
		return *params, nil
	}
	// step 2: a smaller context
	nCtxMinTotal := uint32(min(uint64(minCtx)*uint64(nStreams), math.MaxUint32))
	if surplus := sums.free - sums.used - sums.margin; surplus < 0 {
		f.say("%s too much in total", human(uint64(-surplus)))
		done, err := f.shrinkContext(f.ctxAuto, f.nCtxMax, nCtxMinTotal, nStreams, minCtx, o, sums.free, sums.used, sums.model)
		if err != nil || done {
			return *params, err
		}
	}
	if len(f.devs) == 0 {
		return *params, fail("was unable to fit model into system memory by reducing context, abort")
	}
	// step 3: the layers and tensors, where the user left them to fit
	if err := f.canFill(); err != nil {
		return *params, err
	}
	chosen, err := f.fill()
	if err != nil {
		return *params, err
	}
	f.res.Status = FitAdjusted
	f.res.Changed = f.changed(chosen)
	return chosen, nil
}

// setContext is the context size the fit measures with from now on.
func (f *fitter) setContext(n uint32) { f.params.Context.NCtx = int(n) }

// measureGiven is step 1's measure: the model and its context as given,
// an unset context resolved to the trained one of every sequence.
func (f *fitter) measureGiven(nSeq uint32) (memory, error) {
	params := &f.params
	full, _, err := f.measure(*params)
	if err != nil {
		return memory{}, err
	}
	f.hpNgl = uint32(f.h.nLayerAll - f.h.nLayerNextn)
	if params.LoadMTP {
		f.hpNgl += uint32(f.h.nLayerNextn)
	}
	f.ctxAuto = params.Context.NCtx == 0 && !params.Context.Skip
	f.nCtxMax = uint32(min(uint64(uint32(f.h.nCtxTrain))*uint64(nSeq), math.MaxUint32))
	if f.ctxAuto {
		f.setContext(f.nCtxMax)
		if nSeq > 1 {
			f.say("context unset: %d tokens for %d sequences", f.nCtxMax, nSeq)
			if full, _, err = f.measure(*params); err != nil {
				return memory{}, err
			}
		}
	}
	f.addExtra(&full)
	return full, nil
}

// fitSums are the devices' totals: free memory, what the model uses, its
// weights, and the targets to keep free.
type fitSums struct{ free, used, model, margin int64 }

// againstTargets reports the measure against each device's free memory
// and target (host memory, with no devices), and whether every one keeps
// its target free.
func (f *fitter) againstTargets(full memory, o FitOptions) (fitSums, bool) {
	what := "the model and its context"
	if f.params.Context.Skip {
		what = "the weights (no context planned)"
	}
	f.say("%s as given (-ngl %s, -c %d), sized with load mode none as llama.cpp sizes them:", what, f.params.NGPULayers, f.params.Context.NCtx)
	var s fitSums
	if len(f.devs) == 0 {
		_, cpuTotal := f.rt.CPUDevice().Memory()
		s.used, s.free, s.margin = full.host, int64(cpuTotal), int64(o.Target(0))
		f.say("  no devices: %s of %s host memory, target %s kept free", human(uint64(s.used)), human(cpuTotal), human(uint64(s.margin)))
		if s.free-s.used >= s.margin {
			f.say("will leave %s >= %s of host memory: no change needed", signedHuman(s.free-s.used), human(uint64(s.margin)))
			return s, true
		}
		return s, false
	}
	hostFree, _ := f.rt.CPUDevice().Memory()
	changes := false
	f.targets = make([]int64, len(f.devs))
	for id, d := range f.devs {
		free, total := d.Memory()
		if free == 0 && total == 0 {
			if t := d.Type(); t == ggml.DeviceGPU || t == ggml.DeviceIGPU {
				f.say("  %s did not report memory; fit will not use it", d.Name())
			} else {
				free = hostFree
			}
		}
		margin := o.Target(id)
		f.res.Devices = append(f.res.Devices, FitDevice{Device: d, Free: free, Target: margin, Before: uint64(full.dev[id])})
		f.targets[id] = int64(free) - int64(margin)
		left := int64(free) - full.dev[id]
		s.free += int64(free)
		s.used += full.dev[id]
		s.margin += int64(margin)
		verdict := "meets it"
		if left < int64(margin) {
			verdict, changes = fmt.Sprintf("misses it by %s", human(uint64(int64(margin)-left))), true
		}
		s.model += full.model[id]
		f.say("  %s: %s of %s free, %s would stay free; target %s: %s", d.Name(), human(uint64(full.dev[id])), human(free), signedHuman(left), human(margin), verdict)
	}
	if !changes {
		f.say("every device keeps its target free: no change needed")
	}
	return s, !changes
}

// canFill is step 3's condition: the parameters it would set are unset.
func (f *fitter) canFill() error {
	params := &f.params
	if !params.NGPULayers.IsAuto() {
		return fail("n_gpu_layers already set by user to %d, abort", params.NGPULayers.Llama())
	}
	if len(f.devs) > 1 {
		for _, s := range params.TensorSplit {
			if s != 0 {
				return fail("model_params::tensor_split already set by user, abort")
			}
		}
		if params.SplitMode == SplitRow {
			return fail("changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort")
		}
	}
	if len(params.allOverrides()) > 0 {
		return fail("model_params::tensor_buft_overrides already set by user, abort")
	}
	return nil
}

// changed names the parameters step 3 set, as llama.cpp's fit reports
// them.
func (f *fitter) changed(chosen Params) []string {
	var out []string
	if chosen.Context.NCtx != int(f.nCtxMax) && f.ctxAuto {
		out = append(out, "n_ctx")
	}
	out = append(out, "n_gpu_layers")
	if len(f.devs) > 1 {
		out = append(out, "tensor_split")
	}
	if len(chosen.Overrides) > 0 {
		out = append(out, "tensor_buft_overrides")
	}
	return out
}

// shrinkContext is llama.cpp's step 2: an unset context goes down,
// between the largest (the trained context of every sequence) and the
// smallest (-fitc per stream), linearly on the memory the two use, so
// that the devices' total keeps the targets' total free; it is aligned
// down to 256 per stream. With one device (or none) that ends the fit
// when it is enough (done).
func (f *fitter) shrinkContext(ctxAuto bool, nCtxMax, nCtxMinTotal, nStreams, minCtx uint32, o FitOptions, sumFree, sumUsed, sumModel int64) (done bool, err error) {
	cp := &f.params.Context
	nd := len(f.devs)
	switch {
	case !ctxAuto && cp.Skip:
		f.say("no context planned: none to shrink")
		return false, nil
	case !ctxAuto:
		f.say("context size set by user to %d: no change", cp.NCtx)
		return false, nil
	case nCtxMax <= nCtxMinTotal:
		if minCtx == FitFullCtx {
			f.say("the full context of %d was asked for (-c 0): no change", nCtxMax)
		} else {
			f.say("the model's context of %d is <= the smallest fit may set, %d: no change", nCtxMax, nCtxMinTotal)
		}
		return false, nil
	}
	target := sumFree
	if nd == 0 {
		target -= int64(o.Target(0))
	}
	for id := range f.devs {
		target -= int64(o.Target(id))
	}
	if nd > 1 {
		// layers (or, with experts, tensors) go to devices whole: half a
		// layer (a sixth) per device and one more is held back
		ngl := uint32(math.MaxUint32)
		if n := f.params.NGPULayers.Llama(); n >= 0 {
			ngl = uint32(n)
		}
		div := min(ngl, f.hpNgl)
		if div == 0 {
			return false, fitErr("n_gpu_layers is 0: no layer to share the model's memory out by")
		}
		perLayer := sumModel / int64(div)
		share := int64(2)
		if f.h.nExpert != 0 {
			share = 6
		}
		target -= int64(nd+1) * perLayer / share
	}
	f.setContext(nCtxMinTotal)
	minMem, _, err := f.measure(f.params)
	if err != nil {
		return false, err
	}
	f.addExtra(&minMem)
	usedMin := minMem.sum()
	if target <= usedMin {
		f.say("context reduced from %d to %d (the least -fitc %d allows): %s less in total, not enough", nCtxMax, cp.NCtx, minCtx, signedHuman(sumUsed-usedMin))
		return false, nil
	}
	span := sumUsed - usedMin
	if span <= 0 {
		return false, fitErr("the context's memory does not grow with its size (%s at %d, %s at %d)", human(uint64(usedMin)), nCtxMinTotal, human(uint64(sumUsed)), nCtxMax)
	}
	n := uint32(int64(nCtxMinTotal) + int64(nCtxMax-nCtxMinTotal)*(target-usedMin)/span)
	align := 256 * nStreams
	n = max(n-n%align, nCtxMinTotal)
	f.setContext(n)
	perCtx := span / int64(nCtxMax-nCtxMinTotal)
	f.say("context reduced from %d to %d: about %s less in total", nCtxMax, n, human(uint64(int64(nCtxMax-n)*perCtx)))
	if nd <= 1 {
		f.say("the whole model fits with the smaller context: chose -c %d", n)
		f.res.Status = FitAdjusted
		f.res.Changed = []string{"n_ctx"}
		return true, nil
	}
	f.say("the model should fit across the devices with the smaller context")
	return false, nil
}

// fillState is where fill stands: the layers per device, the memory they
// use on each, and where each device's overflowing layer goes.
type fillState struct {
	ngl      []devLayers
	mem      []int64
	overflow []string
	// denseStart is the first device whose layers may still be dense-only
	// (len(ngl): none); the conversion takes layers from it and those after
	denseStart int
}

// fill is llama.cpp's steps 3 and 4: dense layers filled back to front,
// device by device, by false position between a count that fits and one
// that does not; for a mixture-of-experts model first with every expert
// weight in host memory, then, if the dense weights leave room, whole
// layers converted front to back, with part of one more layer overflowing
// to the next device or the host.
func (f *fitter) fill() (Params, error) {
	nd := len(f.devs)
	moe := f.h.nExpert > 0
	var surplusMoE int64
	var err error
	if moe {
		if surplusMoE, err = f.expertSurplus(); err != nil {
			return f.params, err
		}
	}
	for id, d := range f.devs {
		f.say("  %s may use %s", d.Name(), signedHuman(f.targets[id]))
	}
	s := &fillState{ngl: make([]devLayers, nd), overflow: make([]string, nd)}
	for id := range s.overflow {
		s.overflow[id] = "CPU"
	}
	if s.mem, err = f.memFor(s.ngl, s.overflow); err != nil {
		return f.params, err
	}
	what := "layers"
	if moe {
		what = "dense-only layers (experts in host memory)"
	}
	f.say("filling %s back to front:", what)
	for id := nd - 1; id >= 0; id-- {
		if err := f.fillDevice(s, id, moe); err != nil {
			return f.params, err
		}
		f.say("  %s: %d layers, %s used, %s free", f.devs[id].Name(), s.ngl[id].nLayer, human(uint64(s.mem[id])), signedHuman(int64(f.resFree(id))-s.mem[id]))
	}
	if moe && surplusMoE > 0 {
		if err := f.convert(s); err != nil {
			return f.params, err
		}
	}
	return f.chosen(s.ngl, s.overflow)
}

// expertSurplus is the room, summed over the devices, that the dense
// weights and the context leave with every expert weight in host memory
// (negative: what they miss by).
func (f *fitter) expertSurplus() (int64, error) {
	q := f.params
	q.Overrides = []Override{{Pattern: allExperts, BufferType: "CPU"}}
	mem, _, err := f.measure(q)
	if err != nil {
		return 0, err
	}
	f.addExtra(&mem)
	surplus := int64(0)
	for id := range f.devs {
		surplus += f.targets[id] - mem.dev[id]
	}
	if surplus > 0 {
		f.say("with every expert weight in host memory the dense weights leave %s to spare in total", human(uint64(surplus)))
	} else {
		f.say("with every expert weight in host memory the dense weights still miss by %s in total", human(uint64(-surplus)))
	}
	return surplus, nil
}

// fillDevice gives device id as many of the layers the devices after it
// left as fit its target (for a mixture-of-experts model, dense-only).
func (f *fitter) fillDevice(s *fillState, id int, moe bool) error {
	nd := len(f.devs)
	unassigned := f.hpNgl + 1
	for jd := id + 1; jd < nd; jd++ {
		unassigned -= s.ngl[jd].nLayer
	}
	high := clone(s.ngl)
	high[id].nLayer = unassigned
	if moe {
		high[id].nPart = high[id].nLayer
		if id == nd-1 {
			high[id].nPart-- // the output layer is always whole
		}
	}
	if high[id].nLayer == 0 {
		return nil
	}
	memHigh, err := f.memFor(high, s.overflow)
	if err != nil {
		return err
	}
	if memHigh[id] <= f.targets[id] {
		s.ngl, s.mem = high, memHigh
		return nil
	}
	f.say("  %s: %d layers would use %s, over its %s", f.devs[id].Name(), high[id].nLayer, human(uint64(memHigh[id])), signedHuman(f.targets[id]))
	for delta := high[id].nLayer - s.ngl[id].nLayer; delta > 1; delta = high[id].nLayer - s.ngl[id].nLayer {
		step := falsePosition(delta, f.targets[id]-s.mem[id], memHigh[id]-s.mem[id])
		test := clone(s.ngl)
		test[id].nLayer += step
		if moe {
			if id == nd-1 && test[id].nPart == 0 {
				test[id].nPart += step - 1
			} else {
				test[id].nPart += step
			}
		}
		memTest, err := f.memFor(test, s.overflow)
		if err != nil {
			return err
		}
		verdict := "over"
		if memTest[id] <= f.targets[id] {
			s.ngl, s.mem, verdict = test, memTest, "within"
		} else {
			high, memHigh = test, memTest
		}
		f.say("  %s: %d layers use %s: %s", f.devs[id].Name(), test[id].nLayer, human(uint64(memTest[id])), verdict)
	}
	return nil
}

// convert turns the dense-only layers into whole layers, device by device
// front to back, each device then taking part of one more layer.
func (f *fitter) convert(s *fillState) error {
	nd := len(f.devs)
	s.denseStart = nd
	for id := nd - 1; id >= 0 && s.ngl[id].nLayer > 0; id-- {
		s.denseStart = id
	}
	f.say("converting dense-only layers to whole layers front to back, overflowing to the next device or host memory:")
	for id := 0; id <= s.denseStart && s.denseStart < nd; id++ {
		if err := f.convertDevice(s, id); err != nil {
			return err
		}
		if err := f.overflowLayer(s, id); err != nil {
			return err
		}
		f.sayOverflowing(s, id)
	}
	for id := s.denseStart + 1; id < nd; id++ {
		f.sayOverflowing(s, id)
	}
	return nil
}

// convertDevice moves to device id as many whole layers, taken from the
// dense-only ones, as fit its target.
func (f *fitter) convertDevice(s *fillState, id int) error {
	nd := len(f.devs)
	high := clone(s.ngl)
	for jd := s.denseStart; jd < nd; jd++ {
		move := high[jd].nLayer
		if jd == nd-1 {
			move--
		}
		high[id].nLayer += move
		high[jd].nLayer -= move
		high[jd].nPart = 0
	}
	memHigh, err := f.memFor(high, s.overflow)
	if err != nil {
		return err
	}
	if memHigh[id] <= f.targets[id] {
		s.ngl, s.mem = high, memHigh
		s.denseStart = nd - 1
		return nil
	}
	f.say("  %s: %d whole layers would use %s, over its %s", f.devs[id].Name(), high[id].nFull(), human(uint64(memHigh[id])), signedHuman(f.targets[id]))
	for delta := high[id].nFull() - s.ngl[id].nFull(); delta > 1; delta = high[id].nFull() - s.ngl[id].nFull() {
		step := falsePosition(delta, f.targets[id]-s.mem[id], memHigh[id]-s.mem[id])
		test := clone(s.ngl)
		testStart := s.denseStart
		converted := uint32(0)
		for ; testStart < nd; testStart++ {
			n := min(step-converted, test[testStart].nPart)
			test[testStart].nLayer -= n
			test[testStart].nPart -= n
			test[id].nLayer += n
			converted += n
			if test[testStart].nPart > 0 {
				break
			}
		}
		memTest, err := f.memFor(test, s.overflow)
		if err != nil {
			return err
		}
		verdict := "over"
		if memTest[id] <= f.targets[id] {
			s.ngl, s.mem, s.denseStart, verdict = test, memTest, testStart, "within"
		} else {
			high, memHigh = test, memTest
		}
		f.say("  %s: %d layers (%d partial) use %s: %s", f.devs[id].Name(), test[id].nLayer, test[id].nPart, human(uint64(memTest[id])), verdict)
	}
	return nil
}

// overflowLayer gives device id part of one more layer, the rest of it
// overflowing to the next device (the host for the last): attention and
// up if they fit, and then gate too, else attention alone.
func (f *fitter) overflowLayer(s *fillState, id int) error {
	nd := len(f.devs)
	last := uint32(0)
	if id == nd-1 {
		last = 1
	}
	if s.denseStart >= nd || s.ngl[s.denseStart].nLayer <= last {
		return nil
	}
	test := clone(s.ngl)
	testStart := s.denseStart
	test[testStart].nLayer--
	test[testStart].nPart--
	test[id].nLayer++
	test[id].nPart++
	if test[testStart].nPart == 0 {
		testStart++
	}
	testOverflow := append([]string{}, s.overflow...)
	if id < nd-1 {
		testOverflow[id] = f.devs[id+1].BufferType().Name()
	}
	try := func(frac layerFraction) (bool, error) {
		test[id].overflow = frac
		m, err := f.memFor(test, testOverflow)
		if err != nil {
			return false, err
		}
		ok := m[id] < f.targets[id] && (id+1 == nd || m[id+1] < f.targets[id+1])
		verdict := "does not fit"
		if ok {
			s.ngl, s.overflow, s.mem, s.denseStart = clone(test), testOverflow, m, testStart
			verdict = "fits"
		}
		f.say("  %s: one more layer keeping its %s weights, the rest to %s: %s", f.devs[id].Name(), fracNames[frac], testOverflow[id], verdict)
		return ok, nil
	}
	ok, err := try(fracUp)
	if err != nil {
		return err
	}
	if ok {
		_, err = try(fracGate)
	} else {
		_, err = try(fracAttn)
	}
	return err
}

// sayOverflowing says device id's layers after the conversion.
func (f *fitter) sayOverflowing(s *fillState, id int) {
	f.say("  %s: %d layers (%d overflowing), %s used, %s free", f.devs[id].Name(), s.ngl[id].nLayer, s.ngl[id].nPart, human(uint64(s.mem[id])), signedHuman(int64(f.resFree(id))-s.mem[id]))
}

func (f *fitter) resFree(id int) uint64 { return f.res.Devices[id].Free }

// chosen turns the layers per device into parameters and says what they are.
func (f *fitter) chosen(ngl []devLayers, overflow []string) (Params, error) {
	q := f.params
	if err := f.apply(ngl, overflow, &q); err != nil {
		return q, err
	}
	line := fmt.Sprintf("chose -ngl %s", q.NGPULayers)
	if f.ctxAuto {
		line = fmt.Sprintf("chose -c %d -ngl %s", q.Context.NCtx, q.NGPULayers)
	}
	if len(q.TensorSplit) > 0 {
		parts := make([]string, len(q.TensorSplit))
		for i, s := range q.TensorSplit {
			parts[i] = fmt.Sprint(s)
		}
		line += " -ts " + strings.Join(parts, ",")
	}
	for _, o := range q.Overrides {
		line += fmt.Sprintf(" -ot %s=%s", o.Pattern, o.BufferType)
	}
	f.say("%s", line)
	return q, nil
}

// falsePosition is the next step between a count that fits and delta more
// that do not, interpolated linearly on memory, at least 1 and at most
// delta-1. The arithmetic is llama.cpp's (int64, then truncated to
// uint32); where it would divide by zero the step is 1.
func falsePosition(delta uint32, room, span int64) uint32 {
	step := uint32(1)
	if span != 0 {
		step = uint32(int64(delta) * room / span)
	}
	return min(max(step, 1), delta-1)
}

func clone(d []devLayers) []devLayers { return append([]devLayers(nil), d...) }

func human(n uint64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}

func signedHuman(n int64) string {
	if n < 0 {
		return "-" + human(uint64(-n))
	}
	return human(uint64(n))
}
