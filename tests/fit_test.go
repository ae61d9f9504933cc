package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/arch"
	"github.com/ggload/ggload/internal/llama"
	"github.com/ggload/ggload/internal/synth"
	"github.com/ggload/ggload/internal/testenv"
	"github.com/ggload/ggload/loader/gguf"
	"github.com/ggload/ggload/place"
)

// -fit, for every architecture of the pin: ggload's place.Fit against
// llama.cpp's own common_fit_params (libllama-common of the same native
// set, in the same process and ggml registry), on the same file, devices
// and targets. The decisions must be equal: the status, the context
// size, -ngl, the tensor split and the overrides.
//
// The targets are set from ggload's own measure of each model, so that
// the context shrinks (ctx), the layers fall back (layers), the expert
// weights overflow in parts (moe) and the host alone is fitted (host).
//
//	go test -run TestFitMatchesLlamaCpp -v ./tests

// fitCase is one scenario of the comparison.
type fitCase struct {
	name string
	moe  bool // only for models with experts
	// params are the parameters as given
	params func(p *place.Params, gpu string)
	// allow is the memory the case lets the fit use on each device, from
	// ggload's measures: full as given, least with the smallest context
	// (-fitc), dense with every expert weight in host memory; 0 for a
	// host-only case's host
	allow  func(full, least, dense int64) int64
	minCtx uint32
}

var fitCases = []fitCase{
	// an unset context for 4 sequences sharing one buffer: it shrinks
	// between 64 and the trained context of each, in steps of 256
	{"ctx", false, func(p *place.Params, gpu string) {
		p.Devices = []string{gpu}
		p.Context.NParallel, p.Context.KVUnified = 4, true
	}, func(full, least, _ int64) int64 { return least + (full-least)*3/5 }, 64},
	// a set context: the layers fall back
	{"layers", false, func(p *place.Params, gpu string) {
		p.Devices = []string{gpu}
		p.Context.NCtx = 256
	}, func(full, least, _ int64) int64 { return full / 2 }, 0},
	// the dense weights fit, the experts do not
	{"moe", true, func(p *place.Params, gpu string) {
		p.Devices = []string{gpu}
		p.Context.NCtx = 256
	}, func(full, _, dense int64) int64 { return dense + (full-dense)/3 }, 0},
	// no device: the host's total memory is the budget
	{"host", false, func(p *place.Params, gpu string) {
		p.Devices = []string{"none"}
		p.Context.NParallel, p.Context.KVUnified = 4, true
	}, func(full, least, _ int64) int64 { return least + (full-least)/2 }, 64},
}

const fitChildEnv = "GGLOAD_FIT_CHILD"

func TestFitMatchesLlamaCpp(t *testing.T) {
	if dir := os.Getenv(fitChildEnv); dir != "" {
		fitChild(t, dir)
		return
	}
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	l := openLlama(t, rt)
	if err := l.HaveCommon(); err != nil {
		if testenv.Required("llama") {
			t.Fatalf("llama is required (GGLOAD_REQUIRE) but: %v", err)
		}
		t.Skipf("%v", err)
	}
	src := testenv.SourceTree(t)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	files, err := synth.ArchFiles(filepath.Join(cache, "ggload", "archs", arch.Pin), src, synth.ArchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var models []archModel
	only := os.Getenv("GGLOAD_FIT_ARCHS") // a comma-separated subset, to work on
	for _, f := range files {
		if f.Types == synth.ConverterTypes && (only == "" || slices.Contains(strings.Split(only, ","), f.Arch)) {
			models = append(models, archModel{Arch: f.Arch, Name: f.Name, Path: f.Path})
		}
	}
	work := t.TempDir()
	list, err := json.Marshal(models)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "models.json"), list, 0o644); err != nil {
		t.Fatal(err)
	}
	results := runChildren(t, "TestFitMatchesLlamaCpp", fitChildEnv, work)
	final := map[[2]string]archResult{}
	for _, r := range results {
		if r.Status != "start" && r.Status != "note" {
			final[[2]string{r.Config, r.Arch}] = r
		}
	}
	for _, c := range fitCases {
		var k, n, exact int
		var ours, theirs time.Duration
		var refused, why []string
		for _, f := range models {
			r, ok := final[[2]string{c.name, f.Name}]
			if !ok {
				t.Errorf("%s/%s: no result", c.name, f.Name)
				continue
			}
			switch r.Status {
			case "match", "match-compute":
				k++
				n++
				if r.Status == "match-compute" {
					exact++
				}
				var a, b int64
				fmt.Sscan(r.Detail, &a, &b)
				ours += time.Duration(a) * time.Microsecond
				theirs += time.Duration(b) * time.Microsecond
			case "skip":
			case "both-refuse", "graph-crash":
				refused = append(refused, f.Name+" ("+r.Detail+")")
			case "uncounted":
				// ggload does not replay this architecture's graph yet:
				// its fit counts no compute buffers, llama.cpp's does
				n++
				why = append(why, f.Name)
			default:
				n++
				t.Errorf("%s/%s: %s\n%s", c.name, f.Name, r.Status, r.Detail)
			}
		}
		sort.Strings(refused)
		t.Logf("%-7s %d/%d architectures' fit decisions identical to llama.cpp's (%d of them with the compute buffers counted); ggload's fits took %.1f s, llama.cpp's %.1f s", c.name, k, n, exact, ours.Seconds(), theirs.Seconds())
		t.Logf("%-7s %d refused, or abort llama.cpp on the synthesized model: %s", c.name, len(refused), strings.Join(refused, ", "))
		if len(why) > 0 {
			t.Logf("%-7s %d differ where ggload does not count the compute buffers yet: %s", c.name, len(why), strings.Join(why, ", "))
		}
	}
}

func fitChild(t *testing.T, work string) {
	rt, gpu, l, files, done := childState(t, work)
	// a model that aborts llama.cpp in one case (as it builds the graph of
	// the synthesized model) aborts it in every case: it is not retried
	crashed := map[string]archResult{}
	for _, r := range readArchResults(t, work) {
		if r.Status == "graph-crash" {
			crashed[r.Arch] = r
		}
	}
	for _, f := range files {
		for _, c := range fitCases {
			if done[[2]string{c.name, f.Name}] {
				continue
			}
			if r, ok := crashed[f.Name]; ok {
				appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: "graph-crash", Detail: r.Detail + ", in case " + r.Config})
				continue
			}
			appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: "start"})
			status, detail := compareFit(rt, l, f.Path, c, gpu, func() {
				// llama.cpp's turn: a crash from here on is its abort
				appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: "start", Detail: "graph"})
			})
			appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: status, Detail: detail})
		}
	}
}

// fitTotals is a plan's memory as -fit counts it: per device of the
// plan's list its own buffer types' bytes, and the host's.
func fitTotals(p *place.Plan) (devs []int64, host int64) {
	devs = make([]int64, len(p.Devices))
	for _, e := range p.Breakdown() {
		n := int64(e.Model + e.Context + e.Compute)
		if e.BufferType.IsHost() {
			host += n
			continue
		}
		if d, ok := e.BufferType.Device(); ok {
			if i := slices.Index(p.Devices, d); i >= 0 {
				devs[i] += n
			}
		}
	}
	return devs, host
}

// compareFit sets the case's targets from ggload's measures of the model
// and has both fits decide.
func compareFit(rt *ggml.Runtime, l *llama.Lib, path string, c fitCase, gpu string, theirTurn func()) (string, string) {
	params := place.Params{}
	c.params(&params, gpu)
	m, err := gguf.OpenModel(path)
	if err != nil {
		return "ggload-refuses", err.Error()
	}
	defer m.Close()
	if c.moe && !hasExperts(m) {
		return "skip", "no experts"
	}
	measure := func(q place.Params) ([]int64, int64, *place.Plan, error) {
		q.LoadMode = place.LoadNone
		p, err := place.New(rt, m, q)
		if err == nil && p.ContextErr != nil {
			err = p.ContextErr
		}
		if err != nil {
			return nil, 0, nil, err
		}
		d, h := fitTotals(p)
		return d, h, p, nil
	}
	full, fullHost, p0, ourErr := measure(params)
	var margins []uint64
	if ourErr == nil && p0.Context != nil && params.Context.NCtx == 0 {
		// as the fit resolves an unset context: the trained one for
		// every sequence
		params.Context.NCtx = int(p0.Context.NCtx) * max(1, params.Context.NParallel)
		full, fullHost, p0, ourErr = measure(params)
	}
	if ourErr == nil {
		q := params
		q.Context.NCtx = int(c.minCtx) * max(1, q.Context.NParallel)
		if q.Context.KVUnified {
			q.Context.NCtx = int(c.minCtx)
		}
		least, leastHost := full, fullHost
		if c.minCtx > 0 {
			least, leastHost, _, ourErr = measure(q)
		}
		dense := full
		if ourErr == nil && c.moe {
			q = params
			q.Overrides = []place.Override{{Pattern: place.ExpertsPattern, BufferType: "CPU"}}
			dense, _, _, ourErr = measure(q)
		}
		if ourErr == nil {
			if len(p0.Devices) == 0 {
				_, total := rt.CPUDevice().Memory()
				margins = []uint64{uint64(int64(total) - c.allow(fullHost, leastHost, 0))}
			}
			for i, d := range p0.Devices {
				free, _ := d.Memory()
				allow := c.allow(full[i], least[i], dense[i])
				margins = append(margins, uint64(max(int64(free)-allow, 0)))
			}
		}
		params.Context.NCtx = 0
		c.params(&params, gpu)
	}
	if ourErr != nil {
		// llama.cpp must refuse it too
		ld, err := llama.LoadFor(rt, path, params)
		if err != nil {
			return "ggload-refuses", ourErr.Error()
		}
		cp, _ := l.ContextParamsFor(params.Context)
		theirTurn()
		out, _, err := l.Fit(ld, cp, []uint64{1 << 30}, c.minCtx)
		if err == nil && out.Status == 2 {
			return "both-refuse", ourErr.Error()
		}
		return "ggload-refuses", ourErr.Error()
	}
	t0 := time.Now()
	res, err := place.Fit(rt, m, params, place.FitOptions{Targets: margins, MinCtx: c.minCtx})
	t1 := time.Now()
	if err != nil {
		return "ggload-refuses", err.Error()
	}
	ld, err := llama.LoadFor(rt, path, params)
	if err != nil {
		return "differ", err.Error()
	}
	cp, err := l.ContextParamsFor(params.Context)
	if err != nil {
		return "differ", err.Error()
	}
	theirTurn()
	t2 := time.Now()
	theirs, _, err := l.Fit(ld, cp, margins, c.minCtx)
	if err != nil {
		return "differ", err.Error()
	}
	took := fmt.Sprintf("%d %d", t1.Sub(t0).Microseconds(), time.Since(t2).Microseconds())
	q := res.Plan.Params
	ours := llama.FitOutcome{Status: map[string]int{"success": 0, "failure": 1, "error": 2}[res.Status.Llama()],
		NCtx: res.NCtx, NGPULayers: int32(q.NGPULayers.Llama())}
	if len(q.TensorSplit) > 0 && slices.ContainsFunc(q.TensorSplit, func(v float32) bool { return v != 0 }) && res.Status == place.FitAdjusted {
		ours.TensorSplit = q.TensorSplit
	}
	if res.Status == place.FitAdjusted {
		for _, o := range q.Overrides {
			ours.Overrides = append(ours.Overrides, [2]string{o.Pattern, o.BufferType})
		}
	}
	if fmt.Sprint(ours) == fmt.Sprint(theirs) {
		if res.ComputeWhy != "" {
			return "match", took
		}
		return "match-compute", took
	}
	detail := fmt.Sprintf("margins %v\n ggload    %+v\n llama.cpp %+v\n ggload's reasoning:\n   %s", margins, ours, theirs, strings.Join(res.Reasoning, "\n   "))
	if res.ComputeWhy != "" {
		return "uncounted", detail
	}
	return "differ", detail
}
