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
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// The memory of a context, for every architecture of the pin: ggload's
// plan (weights and memory module, per buffer type) against libllama's
// own llama_get_memory_breakdown of a context made with the same options
// on a model loaded as -fit loads it (no_alloc, load mode none), under
// several configurations. Model and context bytes must be equal per
// buffer type, and so must the context's resolved sizes; where ggload
// replays the compute graph, so must the scheduler's lines (the graphs'
// node and split counts among them).
//
//	go test -run TestContextMemory -v ./tests

// ctxConfig is one configuration of the context comparison.
type ctxConfig struct {
	name   string
	rpc    bool
	moe    bool  // only for models with experts
	embd   int64 // the models synthesized with this embedding_length (0: the default)
	params func(p *place.Params, gpu string)
}

// runs reports whether the configuration compares model f.
func (c ctxConfig) runs(f archModel) bool { return f.Embd == c.embd }

var ctxConfigs = []ctxConfig{
	{"defaults", false, false, 0, func(p *place.Params, gpu string) { p.DeviceNames = []string{gpu} }},
	// heads of 64: a q8_0 block divides them
	{"c8192-q8-fa", false, false, 256, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.Context = place.ContextParams{NCtx: 8192, TypeK: place.CacheQ8_0, TypeV: place.CacheQ8_0, FlashAttn: place.FlashAttnOn}
	}},
	{"np4", false, false, 0, func(p *place.Params, gpu string) { p.DeviceNames = []string{gpu}; p.Context.NParallel = 4 }},
	{"ngl2-nkvo", false, false, 0, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.NGPULayers = place.NLayers(2)
		p.Context.NoKVOffload = true
	}},
	// with rollback snapshots: the recurrent states grow by n_rs_seq
	// planes, and the graphs write them
	{"ub256-fa-off-rs4", false, false, 0, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.Context = place.ContextParams{NCtx: 1024, NUBatch: 256, FlashAttn: place.FlashAttnOff, NParallel: 2, KVUnified: true, NRSSeq: 4}
	}},
	{"rpc-split", true, false, 0, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{"RPC0", gpu}
		p.TensorSplit = []float32{1, 1}
		p.Context.NCtx = 512
	}},
	{"sm-tensor", true, false, 0, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{"RPC0", gpu}
		p.SplitMode = place.SplitTensor
		p.TensorSplit = []float32{1, 1}
		p.Context.NCtx = 512
	}},
	{"ot-exps-cpu", false, true, 0, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.Overrides = []place.Override{{Pattern: "exps", BufferType: "CPU"}}
		p.Context.SWAFull = true
	}},
}

const ctxChildEnv = "GGLOAD_CONTEXT_CHILD"

func TestContextMemory(t *testing.T) {
	if dir := os.Getenv(ctxChildEnv); dir != "" {
		contextChild(t, dir)
		return
	}
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	openLlama(t, rt)
	var models []archModel
	for _, embd := range []int64{0, 256} {
		for _, f := range archFiles(t, rt, embd) {
			if f.Types == synth.ConverterTypes {
				models = append(models, archModel{Arch: f.Arch, Name: f.Name, Path: f.Path, Embd: embd})
			}
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
	results := runChildren(t, "TestContextMemory", ctxChildEnv, work)
	final := map[[2]string]archResult{}
	notes := map[[2]string][2][]string{} // the memory lines of each side, as the child saw them
	for _, r := range results {
		key := [2]string{r.Config, r.Arch}
		switch r.Status {
		case "start":
			if r.Detail == "" {
				notes[key] = [2][]string{} // a new attempt
			}
		case "note":
			ns := notes[key]
			if l, ok := strings.CutPrefix(r.Detail, "ours:"); ok {
				ns[0] = append(ns[0], l)
			} else if l, ok := strings.CutPrefix(r.Detail, "theirs:"); ok {
				ns[1] = append(ns[1], l)
			}
			notes[key] = ns
		default:
			final[key] = r
		}
	}
	for _, c := range ctxConfigs {
		var k, n int
		var refused, graph, withCompute, splitAborts []string
		for _, f := range models {
			if !c.runs(f) {
				continue
			}
			r, ok := final[[2]string{c.name, f.Name}]
			if !ok {
				t.Errorf("%s/%s: no result", c.name, f.Name)
				continue
			}
			switch r.Status {
			case "match":
				k++
				n++
				if r.Detail == "compute" {
					withCompute = append(withCompute, f.Name)
				}
			case "skip":
			case "split-abort":
				splitAborts = append(splitAborts, f.Name)
			case "both-refuse", "crash":
				refused = append(refused, f.Name+" ("+r.Detail+")")
			case "graph-crash":
				// llama.cpp made its memory module, then aborted: its lines
				// are all there is to compare
				ns := notes[[2]string{c.name, f.Name}]
				if len(ns[1]) == 0 || !slices.Equal(ns[0], ns[1]) {
					n++
					t.Errorf("%s/%s: memory lines before llama.cpp aborted (%s):\n ggload    %q\n llama.cpp %q", c.name, f.Name, r.Detail, ns[0], ns[1])
					continue
				}
				graph = append(graph, f.Name+" ("+r.Detail+")")
			default:
				n++
				t.Errorf("%s/%s: %s\n%s", c.name, f.Name, r.Status, r.Detail)
			}
		}
		sort.Strings(refused)
		t.Logf("%-12s %d/%d architectures' context memory identical to llama.cpp's (%d refused by both: %s)", c.name, k, n, len(refused), strings.Join(refused, ", "))
		t.Logf("%-12s %d of them with their compute buffers planned by the graph replay, identical too: %s", c.name, len(withCompute), strings.Join(withCompute, ", "))
		if len(splitAborts) > 0 {
			t.Logf("%-12s %d more refused by ggload, whose weights' split states abort llama.cpp's load (not its no_alloc measure): %s", c.name, len(splitAborts), strings.Join(splitAborts, ", "))
		}
		if len(graph) > 0 {
			sort.Strings(graph)
			t.Logf("%-12s %d more abort llama.cpp while it builds the compute graph on the synthesized model, after the memory module: their memory lines are llama.cpp's (their bytes uncompared): %s", c.name, len(graph), strings.Join(graph, "; "))
		}
	}
}

func contextChild(t *testing.T, work string) {
	rt, gpu, l, files, done := childState(t, work)
	for _, c := range ctxConfigs {
		if c.rpc {
			if ok, why := testenv.HaveRPCServer(); !ok {
				if testenv.Required("rpc") {
					t.Fatalf("rpc is required (GGLOAD_REQUIRE) but missing: %s", why)
				}
				for _, f := range files {
					if c.runs(f) {
						appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: "skip", Detail: why})
					}
				}
				continue
			}
			testenv.RPC(t, 1)
		}
		for _, f := range files {
			if !c.runs(f) || done[[2]string{c.name, f.Name}] {
				continue
			}
			appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: "start"})
			status, detail := compareContext(t, rt, l, f.Path, c, gpu, func(stage string) {
				// on record before llama.cpp goes on (and perhaps aborts):
				// a stage, or a memory line of either side
				st := "start"
				if strings.HasPrefix(stage, "ours:") || strings.HasPrefix(stage, "theirs:") {
					st = "note"
				}
				appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: st, Detail: stage})
			})
			appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: status, Detail: detail})
		}
	}
}

// compareContext plans a model's context under one configuration and has
// libllama make the same context.
// stage hears how far the comparison came: "planned" when ggload planned
// the context, "graph" when llama.cpp began building its compute graph
// (which ggload does not replay yet).
func compareContext(t *testing.T, rt *ggml.Runtime, l *llama.Lib, path string, c ctxConfig, gpu string, stage func(string)) (string, string) {
	params := place.Params{LoadMode: place.LoadNone} // as -fit loads: no_alloc needs load mode none
	c.params(&params, gpu)
	m, err := gguf.OpenModel(path)
	if err != nil {
		return "ggload-refuses", err.Error()
	}
	defer m.Close()
	if c.moe && !hasExperts(m) {
		return "skip", "no experts"
	}
	plan, ourErr := place.New(context.Background(), rt, m, params)
	if ourErr == nil && plan.ContextErr != nil {
		ourErr = plan.ContextErr
	}
	if ourErr == nil {
		for _, l := range memoryLines(plan.Log, func(ln place.LogLine) string { return ln.Text }, func(ln place.LogLine) bool { return ln.Level != "DEBUG" }) {
			stage("ours:" + l)
		}
		stage("planned")
	}
	ld, err := llama.LoadFor(rt, path, params)
	if err != nil {
		return "differ", err.Error()
	}
	ld.NoAlloc = true
	lm, _, theirErr := l.LoadModel(ld)
	var ctx *llama.Context
	var lines []llama.LogLine
	if theirErr == nil {
		defer lm.Free()
		cp, err := l.ContextParamsFor(params.Context)
		if err != nil {
			return "differ", err.Error()
		}
		ctx, lines, theirErr = lm.NewContextTap(cp, func(ln llama.LogLine) {
			if ourErr != nil {
				return
			}
			if ml := memoryLines([]llama.LogLine{ln}, func(ln llama.LogLine) string { return ln.Text }, func(ln llama.LogLine) bool { return ln.Level >= 2 }); len(ml) == 1 {
				stage("theirs:" + ml[0])
			}
			if strings.HasPrefix(ln.Text, "sched_reserve: reserving") {
				stage("graph")
			}
		})
		if theirErr == nil {
			defer ctx.Free()
		}
	}
	switch {
	case ourErr != nil && theirErr != nil:
		return "both-refuse", strings.TrimPrefix(theirErr.Error(), "llama: ")
	case ourErr != nil && c.name == "sm-tensor" && strings.Contains(ourErr.Error(), "(in llama_meta_device_get_split_state) (llama.cpp would abort here)"):
		// a split state the meta buffer asserts on: llama.cpp asks it as
		// it places the weights' bytes, which a no_alloc load never does
		// (TestArchitectures' sm-tensor loads show its abort)
		return "split-abort", ourErr.Error()
	case ourErr != nil:
		return "ggload-refuses", ourErr.Error()
	case theirErr != nil:
		return "llama-refuses", theirErr.Error()
	}
	var diffs []string
	nCtx, nBatch, nUBatch, nSeq := ctx.Sizes()
	cm := plan.Context
	if cm == nil {
		return "differ", "ggload planned no context"
	}
	if got, want := [4]uint32{cm.NCtx, cm.NBatch, cm.NUBatch, cm.NSeqMax}, [4]uint32{nCtx, nBatch, nUBatch, nSeq}; got != want {
		diffs = append(diffs, fmt.Sprintf("n_ctx, n_batch, n_ubatch, n_seq_max: ggload %v, llama.cpp %v", got, want))
	}
	lib := testenv.Lib(rt)
	// the compute buffers too, where ggload replays the architecture's graph
	known := cm.ComputeKnown
	theirs := map[string][3]uint64{}
	for _, e := range ctx.MemoryBreakdown() {
		comp := uint64(0)
		if known {
			comp = e.Compute
		}
		if e.Model+e.Context+comp > 0 {
			theirs[rt.RPCName(lib.BuftName(e.BufferType))] = [3]uint64{e.Model, e.Context, comp}
		}
	}
	ours := map[string][3]uint64{}
	for _, e := range plan.Breakdown() {
		ours[rt.RPCName(e.BufferType.NativeName())] = [3]uint64{e.Model, e.Context, e.Compute}
	}
	var names []string
	for n := range theirs {
		names = append(names, n)
	}
	for n := range ours {
		if _, ok := theirs[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if ours[n] != theirs[n] {
			diffs = append(diffs, fmt.Sprintf("%s: model, context, compute ggload %v, llama.cpp %v", n, ours[n], theirs[n]))
		}
	}
	// llama.cpp's lines of the memory module, as ggload prints them
	want := memoryLines(lines, func(ln llama.LogLine) string { return ln.Text }, func(ln llama.LogLine) bool { return ln.Level >= 2 })
	got := memoryLines(plan.Log, func(ln place.LogLine) string { return ln.Text }, func(ln place.LogLine) bool { return ln.Level != "DEBUG" })
	if !slices.Equal(got, want) {
		diffs = append(diffs, fmt.Sprintf("memory lines:\n ggload    %q\n llama.cpp %q", got, want))
	}
	if known {
		// and the scheduler's: the fused ops resolved, each graph's
		// nodes, splits and inputs, the buffer sizes
		var ours, theirs []string
		for _, ln := range plan.Log {
			if ln.Level != "DEBUG" && schedLines(ln.Text) {
				ours = append(ours, ln.Text)
			}
		}
		for _, ln := range lines {
			if text := strings.TrimRight(ln.Text, "\n"); ln.Level >= 2 && schedLines(text) {
				theirs = append(theirs, text)
			}
		}
		if !slices.Equal(ours, theirs) {
			diffs = append(diffs, fmt.Sprintf("scheduler lines:\n ggload    %q\n llama.cpp %q", ours, theirs))
		}
	}
	if len(diffs) > 0 {
		return "differ", strings.Join(diffs, "\n")
	}
	if known {
		return "match", "compute"
	}
	return "match", ""
}

// memoryLines are the memory modules' size lines (buffer sizes left out:
// llama.cpp's no_alloc load prints 0.00 for them).
func memoryLines[L any](ls []L, text func(L) string, keep func(L) bool) []string {
	var out []string
	for _, l := range ls {
		s := strings.TrimRight(text(l), "\n")
		if !keep(l) || strings.Contains(s, " buffer size = ") {
			continue
		}
		for _, p := range []string{"llama_kv_cache", "llama_memory_recurrent", "llama_dsv4_comp_state", "llama_kv_cache_iswa", "llama_kv_cache_dsa", "llama_kv_cache_msa", "llama_kv_cache_dsv4", "operator():"} {
			if strings.HasPrefix(s, p+": ") || strings.HasPrefix(s, p+" ") {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func hasExperts(m *gguf.Model) bool {
	for _, w := range m.Weights {
		if strings.Contains(w.Name, "exps") {
			return true
		}
	}
	return false
}
