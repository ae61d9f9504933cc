// Port of llama.cpp common/fit.cpp (v0.5.0): common_fit_params, its
// options and its result.

package place

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place/internal/probe"
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

type fitter struct {
	rt *ggml.Runtime
	m  *gguf.Model
	h  *hparams
	pr *probe.Prober
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
	pr   *probe.Prober
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
	pr := probe.New(ctx, rt, h.probe, params.noProbeCache)
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
		f.extra = &extraModel{x: x, h: eh, pr: probe.New(ctx, rt, eh.probe, x.Params.noProbeCache)}
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
