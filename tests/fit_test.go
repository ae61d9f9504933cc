package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
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
	rpc  bool // RPC0 (an RPC server with a fixed memory budget) first
	moe  bool // only for models with experts
	// params are the parameters as given
	params func(p *place.Params, gpu string)
	// allow is the memory the case lets the fit use on each device (the
	// host, when there is none), from ggload's measures
	allow  func(m fitMeasures) int64
	minCtx uint32
	does   string // what most decisions must change: ctx, ngl, ot or ts
	// draft: the model is its own draft model too (llama.cpp's
	// common_fit_extra_model), with the main model's parameters
	draft bool
}

var fitCases = []fitCase{
	// an unset context for 4 sequences sharing one buffer: it shrinks
	// between 64 and the trained context of each, in steps of 256
	{"ctx", false, false, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.Context.NParallel, p.Context.KVUnified = 4, true
	}, func(m fitMeasures) int64 { return m.least + (m.full-m.least)*3/5 }, 64, "ctx", false},
	// a set context: the layers fall back
	{"layers", false, false, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.Context.NCtx = 256
	}, func(m fitMeasures) int64 { return m.base + (m.full-m.base)/2 }, 0, "ngl", false},
	// the dense weights fit, the experts do not
	{"moe", false, true, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.Context.NCtx = 256
	}, func(m fitMeasures) int64 { return m.dense + (m.full-m.dense)/3 }, 0, "ot", false},
	// no device: the host's total memory is the budget
	{"host", false, false, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{"none"}
		p.Context.NParallel, p.Context.KVUnified = 4, true
	}, func(m fitMeasures) int64 { return m.least + (m.full-m.least)/2 }, 64, "ctx", false},
	// two devices, an unset context: it shrinks, less what whole layers
	// may waste, and the layers are shared out back to front
	{"split-ctx", true, false, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{"RPC0", gpu}
		p.Context.NParallel, p.Context.KVUnified = 4, true
	}, func(m fitMeasures) int64 { return max(m.least, m.base) + (m.full-max(m.least, m.base))*3/4 }, 64, "ctx", false},
	// two devices, experts: the first device's overflowing layer goes to
	// the second
	{"split-moe", true, true, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{"RPC0", gpu}
		p.Context.NCtx = 256
	}, func(m fitMeasures) int64 { return m.dense + (m.full-m.dense)/2 }, 0, "ot", false},
	// a draft model beside it (the same file): its context follows the
	// main one's as it shrinks, and both count
	{"draft", false, false, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.Context.NParallel, p.Context.KVUnified = 4, true
	}, func(m fitMeasures) int64 { return m.least + (m.full-m.least)*3/5 }, 64, "ctx", true},
}

// fitRPCMemory is the RPC server's budget: fixed, so that both fits see
// the same free memory (the server reports the host's, which moves).
// fitMeasures are one device's bytes as -fit counts them: full with the
// case's parameters, least with the smallest context (-fitc), dense with
// every expert weight in host memory, base with no layer offloaded.
type fitMeasures struct{ full, least, dense, base int64 }

const fitRPCMemory = 2 << 30

const fitChildEnv = "GGLOAD_FIT_CHILD"

// fitShards is how many children compare at once.
const fitShards = 2

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
	var models []archModel
	for _, f := range archFiles(t, rt, 0) {
		if f.Types == synth.ConverterTypes {
			models = append(models, archModel{Arch: f.Arch, Name: f.Name, Path: f.Path})
		}
	}
	if ok, why := testenv.HaveRPCServer(); !ok {
		if testenv.Required("rpc") {
			t.Fatalf("rpc is required (GGLOAD_REQUIRE) but missing: %s", why)
		}
		t.Logf("the cases over two devices are skipped: %s", why)
	}
	// two children at once, each with half the models (every other one)
	var results []archResult
	var mu sync.Mutex
	t.Run("shards", func(t *testing.T) {
		for shard := range fitShards {
			t.Run(fmt.Sprint(shard), func(t *testing.T) {
				t.Parallel()
				var mine []archModel
				for i, m := range models {
					if i%fitShards == shard {
						mine = append(mine, m)
					}
				}
				work := t.TempDir()
				list, err := json.Marshal(mine)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(work, "models.json"), list, 0o644); err != nil {
					t.Fatal(err)
				}
				rs := runChildren(t, "TestFitMatchesLlamaCpp", fitChildEnv, work)
				mu.Lock()
				results = append(results, rs...)
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	final := map[[2]string]archResult{}
	for _, r := range results {
		if r.Status != "start" && r.Status != "note" {
			final[[2]string{r.Config, r.Arch}] = r
		}
	}
	for _, c := range fitCases {
		var k, n, exact int
		var ours, theirs time.Duration
		changed := map[string]int{}
		var refused []string
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
				var did string
				fmt.Sscan(r.Detail, &a, &b, &did)
				for _, d := range strings.Split(did, ",") {
					changed[d]++
				}
				ours += time.Duration(a) * time.Microsecond
				theirs += time.Duration(b) * time.Microsecond
			case "skip":
			case "both-refuse", "graph-crash":
				refused = append(refused, f.Name+" ("+r.Detail+")")
			default:
				n++
				t.Errorf("%s/%s: %s\n%s", c.name, f.Name, r.Status, r.Detail)
			}
		}
		sort.Strings(refused)
		t.Logf("%-7s %d/%d architectures' fit decisions identical to llama.cpp's (%d of them with the compute buffers counted); ggload's fits took %.1f s, llama.cpp's %.1f s", c.name, k, n, exact, ours.Seconds(), theirs.Seconds())
		t.Logf("%-7s of them, the decision shrank the context %d times, set -ngl above 0 %d times, overrides %d times, a tensor split %d times", c.name, changed["ctx"], changed["ngl"], changed["ot"], changed["ts"])
		if k > 0 && changed[c.does]*2 < k {
			t.Errorf("%s: only %d of %d decisions did what the case is for (%s)", c.name, changed[c.does], k, c.does)
		}
		t.Logf("%-7s %d refused, or abort llama.cpp on the synthesized model: %s", c.name, len(refused), strings.Join(refused, ", "))
	}
}

func fitChild(t *testing.T, work string) {
	rt, gpu, l, files, done := childState(t, work)
	haveRPC, _ := testenv.HaveRPCServer()
	if haveRPC {
		srv := testenv.StartRPCServer(t)
		if _, err := rt.AddRPCServer(context.Background(), srv.Endpoint, ggml.RPCOptions{Memory: fitRPCMemory}); err != nil {
			t.Fatalf("register %s: %v", srv.Endpoint, err)
		}
	}
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
			if c.rpc && !haveRPC {
				appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: "skip", Detail: "no ggml-rpc-server"})
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
		p, err := place.New(context.Background(), rt, m, q)
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
	resolvedCtx := 0
	if ourErr == nil && p0.Context != nil && params.Context.NCtx == 0 {
		// as the fit resolves an unset context: the trained one for
		// every sequence
		params.Context.NCtx = int(p0.Context.NCtx) * max(1, params.Context.NParallel)
		resolvedCtx = params.Context.NCtx
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
		dense, base := full, full
		if ourErr == nil && c.moe {
			q = params
			q.Overrides = []place.Override{{Pattern: place.ExpertsPattern, BufferType: "CPU"}}
			dense, _, _, ourErr = measure(q)
		}
		if ourErr == nil && len(p0.Devices) > 0 {
			q = params
			q.NGPULayers = place.NLayers(0)
			base, _, _, ourErr = measure(q)
		}
		if ourErr == nil {
			if len(p0.Devices) == 0 {
				_, total := rt.CPUDevice().Memory()
				margins = []uint64{uint64(int64(total) - c.allow(fitMeasures{fullHost, leastHost, fullHost, fullHost}))}
			}
			for i, d := range p0.Devices {
				free, _ := d.Memory()
				allow := c.allow(fitMeasures{full[i], least[i], dense[i], base[i]})
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
	opts := place.FitOptions{Targets: margins, MinCtx: c.minCtx}
	var draft place.Params
	if c.draft {
		// llama.cpp's common_base_params_to_speculative: the main
		// parameters, f16 caches, as many outputs as sequences
		draft = params
		draft.Context.TypeK, draft.Context.TypeV = place.CacheF16, place.CacheF16
		draft.Context.NOutputsMax = max(1, params.Context.NParallel)
		opts.Extra = &place.FitExtra{Model: m, Params: draft}
	}
	res, err := place.Fit(context.Background(), rt, m, params, opts)
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
	var extra *llama.FitExtra
	if c.draft {
		dl, err := llama.LoadFor(rt, path, draft)
		if err != nil {
			return "differ", err.Error()
		}
		dc, err := l.ContextParamsFor(draft.Context)
		if err != nil {
			return "differ", err.Error()
		}
		dc.NRSSeq = 0
		extra = &llama.FitExtra{Load: dl, Context: dc}
	}
	theirs, _, err := l.FitWith(ld, cp, margins, c.minCtx, extra)
	if err != nil {
		return "differ", err.Error()
	}
	// what the decision changed: the context, the layers, overrides, a split
	var did []string
	if cp.NCtx == 0 && theirs.NCtx < uint32(resolvedCtx) {
		did = append(did, "ctx")
	}
	if theirs.NGPULayers > 0 {
		did = append(did, "ngl") // fewer layers than all, more than none
	}
	if len(theirs.Overrides) > 0 {
		did = append(did, "ot")
	}
	if len(theirs.TensorSplit) > 0 {
		did = append(did, "ts")
	}
	took := fmt.Sprintf("%d %d %s", t1.Sub(t0).Microseconds(), time.Since(t2).Microseconds(), strings.Join(did, ","))
	q := res.Plan.Params
	ours := llama.FitOutcome{Status: map[string]int{"success": 0, "failure": 1, "error": 2}[res.Status.Llama()],
		NCtx: res.NCtx, NGPULayers: int32(q.NGPULayers.Llama())}
	if len(q.TensorSplit) > 0 && slices.ContainsFunc(q.TensorSplit, func(v float32) bool { return v != 0 }) && res.Status == place.FitAdjusted {
		// as the oracle reads llama.cpp's buffer: without trailing zeros
		ours.TensorSplit = q.TensorSplit
		for len(ours.TensorSplit) > 0 && ours.TensorSplit[len(ours.TensorSplit)-1] == 0 {
			ours.TensorSplit = ours.TensorSplit[:len(ours.TensorSplit)-1]
		}
	}
	if res.Status == place.FitAdjusted {
		for _, o := range q.Overrides {
			ours.Overrides = append(ours.Overrides, [2]string{o.Pattern, o.BufferType})
		}
	}
	if c.draft && !strings.Contains(strings.Join(res.Reasoning, "\n"), "the extra model at -c") {
		return "differ", "ggload's fit did not count the draft model:\n   " + strings.Join(res.Reasoning, "\n   ")
	}
	if fmt.Sprint(ours) == fmt.Sprint(theirs) {
		if res.ComputeWhy != "" {
			return "match", took
		}
		return "match-compute", took
	}
	detail := fmt.Sprintf("margins %v\n ggload    %+v\n llama.cpp %+v\n ggload's reasoning:\n   %s", margins, ours, theirs, strings.Join(res.Reasoning, "\n   "))
	if res.ComputeWhy != "" {
		detail += "\n ggload counted no compute buffers: " + res.ComputeWhy
	}
	return "differ", detail
}
