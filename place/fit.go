package place

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/loader/gguf"
)

// DefaultReserve is the memory Fit leaves free on every device: room for
// the KV cache and compute buffers that loading weights does not count.
const DefaultReserve = 512 << 20

// FitResult is the plan Fit chose and why.
type FitResult struct {
	Plan      *Plan
	Reasoning []string
}

// fits reports whether every device's allocations fit its free memory
// minus the reserve, and a line per device.
func fits(p *Plan, reserve uint64) (bool, []string) {
	ok := true
	var lines []string
	for _, u := range p.Usage {
		if u.Allocated == 0 {
			continue
		}
		avail := uint64(0)
		if u.Free > reserve {
			avail = u.Free - reserve
		}
		verdict := "fits"
		if u.Allocated > avail {
			verdict, ok = "does not fit", false
		}
		lines = append(lines, fmt.Sprintf("%s needs %s of %s free (%s kept in reserve): %s", u.Device.Name(), human(u.Allocated), human(u.Free), human(reserve), verdict))
	}
	return ok, lines
}

func human(n uint64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}

func hasExperts(m *gguf.Model) bool {
	for _, w := range m.Weights {
		if strings.Contains(w.Name, "_exps") {
			return true
		}
	}
	return false
}

// Fit finds the placement that offloads the most: all layers if they fit
// every device's free memory minus reserve; else, for a mixture-of-experts
// model, all layers with the experts of the fewest first layers kept on the
// CPU; else the largest number of offloaded layers that fits (with every
// expert on the CPU for MoE models). Only NGPULayers and NCPUMoE of params
// change; the reasoning says what was tried.
func Fit(rt *ggml.Runtime, m *gguf.Model, params Params, reserve uint64) (*FitResult, error) {
	h, err := readHparams(m, params.LoadMTP)
	if err != nil {
		return nil, err
	}
	pr := newProber(rt, h, params.NoProbeCache)
	defer pr.close()
	res := &FitResult{}
	try := func(ngl, ncpumoe int, cpuMoE bool) (*Plan, bool, error) {
		q := params
		q.NGPULayers, q.NCPUMoE, q.CPUMoE = ngl, ncpumoe, cpuMoE
		p, err := plan(rt, m, h, q, pr)
		if err != nil {
			return nil, false, err
		}
		ok, lines := fits(p, reserve)
		what := fmt.Sprintf("-ngl %d", ngl)
		if cpuMoE {
			what += " --cpu-moe"
		} else if ncpumoe > 0 {
			what += fmt.Sprintf(" --n-cpu-moe %d", ncpumoe)
		}
		verdict := "fits"
		if !ok {
			verdict = "does not fit"
		}
		res.Reasoning = append(res.Reasoning, fmt.Sprintf("%s: %s", what, verdict))
		for _, l := range lines {
			res.Reasoning = append(res.Reasoning, "  "+l)
		}
		return p, ok, nil
	}
	all := h.nLayerAll + 1
	p, ok, err := try(all, 0, false)
	if err != nil {
		return nil, err
	}
	if ok {
		res.Plan = p
		return res, nil
	}
	moe := hasExperts(m)
	if moe {
		// the fewest first layers whose experts stay on the CPU
		lo, hi := 1, h.nLayerAll
		var best *Plan
		if _, ok, err := try(all, 0, true); err != nil {
			return nil, err
		} else if ok {
			for lo < hi {
				mid := (lo + hi) / 2
				p, ok, err := try(all, mid, false)
				if err != nil {
					return nil, err
				}
				if ok {
					best, hi = p, mid
				} else {
					lo = mid + 1
				}
			}
			if best == nil || best.Params.NCPUMoE != lo {
				if best, _, err = try(all, lo, false); err != nil {
					return nil, err
				}
			}
			res.Plan = best
			res.Reasoning = append(res.Reasoning, fmt.Sprintf("chose all %d layers with the experts of the first %d on the CPU", all, lo))
			return res, nil
		}
	}
	// the largest -ngl that fits (experts on the CPU for MoE models)
	lo, hi := 0, all-1
	var best *Plan
	for lo <= hi {
		mid := (lo + hi) / 2
		p, ok, err := try(mid, 0, moe)
		if err != nil {
			return nil, err
		}
		if ok {
			best, lo = p, mid+1
		} else {
			hi = mid - 1
		}
	}
	if best == nil {
		return res, fmt.Errorf("place: the model does not fit even with no layer offloaded: %s", strings.Join(res.Reasoning, "; "))
	}
	res.Plan = best
	res.Reasoning = append(res.Reasoning, fmt.Sprintf("chose -ngl %d", best.Params.NGPULayers))
	return res, nil
}
