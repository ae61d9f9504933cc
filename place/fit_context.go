// Port of llama.cpp common/fit.cpp (v0.5.0): common_fit_params' reduction
// of the context.

package place

import (
	"fmt"
	"math"

	"github.com/ggload/ggload/ggml"
)

// The context's part of the fit: the given parameters measured against
// the devices' targets, and the context shrunk where it was left unset.

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
