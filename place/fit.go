package place

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/loader/gguf"
)

// Fit is llama.cpp's -fit (common_fit_params in the pin's common/fit.cpp),
// for the weights: it changes only the parameters the user left at their
// defaults (NGPULayers auto, no TensorSplit, no Overrides),
// so that every device keeps its fit target free. ggload creates no
// context, so what llama.cpp counts besides the weights (KV cache, compute
// buffers) is not counted: the target is the room left for it, and the
// pin's first remedy, a smaller context, has nothing to shrink.

// DefaultFitTarget is the memory Fit leaves free on each device by default
// (llama.cpp's -fitt, 1024 MiB).
const DefaultFitTarget = 1 << 30

// DefaultFitMinCtx is llama.cpp's -fitc default.
const DefaultFitMinCtx = 4096

// maxOverrides is llama_max_tensor_buft_overrides() of the pin.
const maxOverrides = 4096

// FitOptions are the fit parameters (llama.cpp's -fitt and -fitc).
type FitOptions struct {
	// Targets is the memory to leave free on each device of the model's
	// device list, in bytes: one value applies to every device; devices past
	// the end of a longer list get DefaultFitTarget. Empty: DefaultFitTarget.
	Targets []uint64
	// MinCtx is the smallest context fit may shrink to (0: 4096). ggload
	// creates no context: it is reported, never used.
	MinCtx uint32
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
// parameters stay as given and the load goes on with them.
const (
	FitUnchanged FitStatus = "unchanged" // every device keeps its target free as asked
	FitAdjusted  FitStatus = "adjusted"  // parameters the user left unset were chosen
	FitFailed    FitStatus = "failed"    // no change could be made (the reason is the last line)
)

// FitDevice is one device's memory for the weights, before and after.
type FitDevice struct {
	Device *ggml.Device
	Free   uint64 // free memory (0 for a GPU that reports none: fit gives it nothing)
	Target uint64 // to be left free
	Before uint64 // weights in its memory with the parameters as given
	After  uint64 // with the parameters fit chose
}

// FitResult is what Fit decided, why, and the plan of the outcome.
type FitResult struct {
	Plan      *Plan
	Status    FitStatus
	Changed   []string // the parameters fit set: "n_gpu_layers", "tensor_split", "tensor_buft_overrides"
	Devices   []FitDevice
	Reasoning []string // one line per decision, in order
	Trials    int      // placements sized
	Took      time.Duration
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
	return fmt.Sprintf(`blk\.%d%s`, il, ExpertsPattern)
}

// allExperts matches every layer's expert weights.
const allExperts = `blk\.\d+` + ExpertsPattern

// devLayers is one device's share: nLayer layers, of which the last nPart
// keep only part of their weights (the first of them by overflow, the
// others their dense weights).
type devLayers struct {
	nLayer, nPart uint32
	overflow      layerFraction
}

func (d devLayers) nFull() uint32 { return d.nLayer - d.nPart }

type fitter struct {
	rt     *ggml.Runtime
	m      *gguf.Model
	h      *hparams
	pr     *prober
	params Params // as given, measured with load mode none (as llama.cpp measures)
	res    *FitResult

	devs    []*ggml.Device
	hpNgl   uint32
	targets []int64 // per device: most memory the weights may use
}

func (f *fitter) say(format string, args ...any) {
	f.res.Reasoning = append(f.res.Reasoning, fmt.Sprintf(format, args...))
}

// measure sizes a placement and returns each device's weights in its own
// memory (host buffer types are the host's). The first measure fixes the
// device list.
func (f *fitter) measure(q Params) ([]int64, *Plan, error) {
	f.res.Trials++
	p, err := plan(f.rt, f.m, f.h, q, f.pr)
	if err != nil {
		return nil, nil, err
	}
	if f.devs == nil {
		f.devs = append([]*ggml.Device{}, p.Devices...)
	}
	mem := make([]int64, len(f.devs))
	for i, d := range f.devs {
		for _, u := range p.Usage {
			if u.Device == d {
				mem[i] = int64(u.Allocated)
			}
		}
	}
	return mem, p, nil
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
				return fail("at most 1000 model layers are supported")
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
	return mem, err
}

// failure ends a fit that cannot change anything: the parameters stay as
// given, as llama.cpp goes on with them.
type fitFailure struct{ msg string }

func (e *fitFailure) Error() string { return e.msg }

// Fit chooses the parameters the user left unset so that the weights leave
// every device its target free, as llama.cpp's -fit does (see the package
// comment above). It returns an error only when params cannot be planned
// at all; a fit that cannot help has Status FitFailed and the plan of the
// parameters as given.
func Fit(rt *ggml.Runtime, m *gguf.Model, params Params, o FitOptions) (*FitResult, error) {
	return FitContext(context.Background(), rt, m, params, o)
}

// FitContext is Fit within ctx (see NewContext).
func FitContext(ctx context.Context, rt *ggml.Runtime, m *gguf.Model, params Params, o FitOptions) (*FitResult, error) {
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
	chosen, ferr := f.run(o)
	chosen.LoadMode = params.LoadMode
	if ferr != nil {
		var fail *fitFailure
		if !asFailure(ferr, &fail) {
			return nil, ferr
		}
		f.say("failed to fit params to free device memory: %s", fail.msg)
		f.say("the parameters stay as given")
		chosen, res.Status = params, FitFailed
	}
	res.Plan, err = plan(rt, m, h, chosen, pr)
	if err != nil {
		return nil, err
	}
	for i := range res.Devices {
		for _, u := range res.Plan.Usage {
			if u.Device == res.Devices[i].Device {
				res.Devices[i].After = u.Allocated
			}
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

func fail(format string, args ...any) error { return &fitFailure{fmt.Sprintf(format, args...)} }

// run is the fit; it returns the parameters chosen (given ones: no change).
func (f *fitter) run(o FitOptions) (Params, error) {
	params, res := f.params, f.res
	if params.SplitMode == SplitTensor {
		return params, fail("llama_params_fit is not implemented for SPLIT_MODE_TENSOR, abort")
	}
	// step 1: the weights as given
	full, p0, err := f.measure(params)
	if err != nil {
		return params, err
	}
	nd := len(f.devs)
	f.hpNgl = uint32(f.h.nLayerAll - f.h.nLayerNextn)
	if params.LoadMTP {
		f.hpNgl += uint32(f.h.nLayerNextn)
	}
	minCtx := o.MinCtx
	if minCtx == 0 {
		minCtx = DefaultFitMinCtx
	}
	ngl := params.NGPULayers.String()
	f.say("the weights as given (-ngl %s), sized with load mode none as llama.cpp sizes them:", ngl)
	if nd == 0 {
		cpuFree, cpuTotal := f.rt.CPUDevice().Memory()
		used := int64(0)
		for _, u := range p0.Usage {
			used += int64(u.Allocated)
		}
		margin := int64(o.Target(0))
		f.say("  no devices: %s of %s host memory (free %s), target %s kept", human(uint64(used)), human(cpuTotal), human(cpuFree), human(uint64(margin)))
		if int64(cpuTotal)-used >= margin {
			f.say("will leave %s >= %s of host memory: no change needed", human(uint64(int64(cpuTotal)-used)), human(uint64(margin)))
			res.Status = FitUnchanged
			return params, nil
		}
		return params, fail("was unable to fit model into system memory by reducing context, abort")
	}
	hostFree, _ := f.rt.CPUDevice().Memory()
	changes := false
	f.targets = make([]int64, nd)
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
		res.Devices = append(res.Devices, FitDevice{Device: d, Free: free, Target: margin, Before: uint64(full[id])})
		f.targets[id] = int64(free) - int64(margin)
		left := int64(free) - full[id]
		verdict := "meets it"
		if left < int64(margin) {
			verdict, changes = fmt.Sprintf("misses it by %s", human(uint64(int64(margin)-left))), true
		}
		f.say("  %s: weights %s of %s free, %s would stay free; target %s: %s", d.Name(), human(uint64(full[id])), human(free), signedHuman(left), human(margin), verdict)
	}
	if !changes {
		f.say("every device keeps its target free: no change needed")
		res.Status = FitUnchanged
		return params, nil
	}
	// step 2 of llama.cpp shrinks the context
	f.say("no context to shrink: ggload loads weights only (-fitc %d has nothing to act on); the targets are the room left for it", minCtx)
	// step 3 needs the parameters it would set to be unset
	if !params.NGPULayers.IsAuto() {
		return params, fail("n_gpu_layers already set by user to %d, abort", params.NGPULayers.Llama())
	}
	if nd > 1 {
		for _, s := range params.TensorSplit {
			if s != 0 {
				return params, fail("model_params::tensor_split already set by user, abort")
			}
		}
		if params.SplitMode == SplitRow {
			return params, fail("changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort")
		}
	}
	if len(params.allOverrides()) > 0 {
		return params, fail("model_params::tensor_buft_overrides already set by user, abort")
	}
	chosen, err := f.fill()
	if err != nil {
		return params, err
	}
	res.Status = FitAdjusted
	res.Changed = []string{"n_gpu_layers"}
	if nd > 1 {
		res.Changed = append(res.Changed, "tensor_split")
	}
	if len(chosen.Overrides) > 0 {
		res.Changed = append(res.Changed, "tensor_buft_overrides")
	}
	return chosen, nil
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
	moe := f.hasExperts()
	var surplusMoE int64
	var err error
	if moe {
		if surplusMoE, err = f.expertSurplus(); err != nil {
			return f.params, err
		}
	}
	for id, d := range f.devs {
		f.say("  %s may use %s for weights", d.Name(), signedHuman(f.targets[id]))
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

// hasExperts reports whether the model has expert weights.
func (f *fitter) hasExperts() bool {
	re := regexp.MustCompile(ExpertsPattern)
	for _, w := range f.m.Weights {
		if re.MatchString(w.Name) {
			return true
		}
	}
	return false
}

// expertSurplus is the room, summed over the devices, that the dense
// weights leave with every expert weight in host memory (negative: what
// they miss by).
func (f *fitter) expertSurplus() (int64, error) {
	q := f.params
	q.Overrides = []Override{{Pattern: allExperts, BufferType: "CPU"}}
	mem, _, err := f.measure(q)
	if err != nil {
		return 0, err
	}
	surplus := int64(0)
	for id := range f.devs {
		surplus += f.targets[id] - mem[id]
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
