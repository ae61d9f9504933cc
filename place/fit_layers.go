// Port of llama.cpp common/fit.cpp (v0.5.0): common_fit_params' moving of
// layers off the devices.

package place

import (
	"fmt"
	"strings"
)

// Moving layers off the devices, as common_fit_params does once the
// context is as small as it may be: whole layers first, then layers of
// which part overflows to the next device (or the CPU).

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
