package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/google/go-cmp/cmp"
)

// A conformance case: one model, one set of parameters, planned by ggload
// and loaded by llama.cpp in the same process on the same devices.
type confCase struct {
	name   string
	model  string
	params func(p *place.Params)
}

func openLlama(t *testing.T, rt *ggml.Runtime) *llama.Lib {
	t.Helper()
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	return l
}

var layerLine = regexp.MustCompile(`^load_tensors: layer +(\d+) assigned to device (\S+), is_swa`)

// report is what both sides are compared on.
type report struct {
	layers    map[int]string
	overrides []string
	moved     string
	offload   []string
	sizeLines []string
	buffers   []string // "name size" of every buffer
	tensors   []string // "name buffer-type" of every placed tensor
}

// add files one report line (override, moved, offload or buffer size
// line) under its kind; other lines are ignored.
func (r *report) add(text string) {
	switch {
	case strings.HasPrefix(text, "tensor ") && strings.Contains(text, "buffer type overridden to"):
		r.overrides = append(r.overrides, text)
	case strings.HasPrefix(text, "done_getting_tensors: tensor '"):
		r.moved = text
	case strings.HasPrefix(text, "load_tensors: offload"):
		r.offload = append(r.offload, text)
	case strings.Contains(text, "model buffer size ="):
		r.sizeLines = append(r.sizeLines, text)
	}
}

func llamaReport(rt *ggml.Runtime, m *llama.Model, lines []llama.LogLine) report {
	r := report{layers: map[int]string{}}
	for _, ln := range lines {
		// RPC devices are reached through ggload's guards: llama.cpp names
		// them by the guards' loopback addresses
		ln.Text = rt.RPCName(ln.Text)
		switch {
		case layerLine.MatchString(ln.Text):
			sm := layerLine.FindStringSubmatch(ln.Text)
			var il int
			fmt.Sscan(sm[1], &il)
			r.layers[il] = sm[2]
		default:
			r.add(ln.Text)
		}
	}
	lib := testenv.Lib(rt)
	seen := map[bindings.Buffer]bool{}
	for _, tn := range m.Tensors() {
		b := tn.C.Buffer
		r.tensors = append(r.tensors, tn.Name+" "+rt.RPCName(lib.BuftName(lib.BufferGetType(b))))
		if !seen[b] {
			seen[b] = true
			r.buffers = append(r.buffers, fmt.Sprintf("%s %d", rt.RPCName(lib.BufferName(b)), lib.BufferGetSize(b)))
		}
	}
	slices.Sort(r.tensors)
	slices.Sort(r.buffers)
	return r
}

func ourReport(p *place.Plan) report {
	r := report{layers: map[int]string{}}
	for il, d := range p.LayerDevices {
		r.layers[il] = d.Name()
	}
	for _, ln := range p.Log {
		r.add(ln.Text)
	}
	for _, c := range p.Contexts {
		for _, b := range c.Buffers {
			r.buffers = append(r.buffers, fmt.Sprintf("%s %d", b.Name, b.Size))
		}
	}
	for _, tp := range p.Tensors {
		if tp.Context >= 0 && !tp.Shared {
			// a tensor in a mapped context lives in a buffer made from the
			// mapping, whose buffer type is that buffer's own (CPU_Mapped)
			bt := tp.BufferType.Name()
			if c := p.Contexts[tp.Context]; c.Mapped {
				bt = c.Buffers[0].Name
			}
			r.tensors = append(r.tensors, tp.Name+" "+bt)
		}
	}
	slices.Sort(r.tensors)
	slices.Sort(r.buffers)
	return r
}

func compareReports(t *testing.T, ours, theirs report) {
	t.Helper()
	for _, d := range diffReports(ours, theirs) {
		t.Error(d)
	}
}

// diffReports lists every difference between ggload's report and
// llama.cpp's; per-tensor buffer types are compared as multisets (a
// duplicated tensor appears once per context it is in).
func diffReports(ours, theirs report) []string {
	var out []string
	eq := func(what string, a, b any) {
		if d := cmp.Diff(b, a); d != "" {
			out = append(out, fmt.Sprintf("%s differ (-llama.cpp +ggload):\n%s", what, d))
		}
	}
	eq("layer devices", ours.layers, theirs.layers)
	eq("override lines", ours.overrides, theirs.overrides)
	eq("moved summary", ours.moved, theirs.moved)
	eq("offload lines", ours.offload, theirs.offload)
	eq("buffer size lines", ours.sizeLines, theirs.sizeLines)
	eq("buffers (exact sizes)", ours.buffers, theirs.buffers)
	eq("per-tensor buffer types", ours.tensors, theirs.tensors)
	return out
}

// llamaLoad is the libllama load that matches ggload's parameters.
func llamaLoad(t testing.TB, rt *ggml.Runtime, path string, params place.Params) llama.Load {
	t.Helper()
	ld, err := llama.LoadFor(rt, path, params)
	if err != nil {
		t.Fatal(err)
	}
	return ld
}

// deviceDiff compares the model's device list.
func deviceDiff(rt *ggml.Runtime, plan *place.Plan, lm *llama.Model) []string {
	var theirDevs []string
	for _, d := range lm.Devices() {
		theirDevs = append(theirDevs, testenv.Lib(rt).DevName(d))
	}
	var ourDevs []string
	for _, d := range plan.Devices {
		ourDevs = append(ourDevs, d.Name())
	}
	if !slices.Equal(ourDevs, theirDevs) {
		return []string{fmt.Sprintf("devices: ours %v, llama.cpp %v", ourDevs, theirDevs)}
	}
	return nil
}

var confModels = map[string]synth.Spec{
	"dense4":    {Layers: 4, Embd: 256, FF: 512, Heads: 4, Vocab: 512, RopeFreqs: true, Seed: 1},
	"tied7":     {Layers: 7, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Tied: true, Weights: ggml.TypeQ4_0, Seed: 2},
	"moe4":      {Layers: 4, Embd: 256, FF: 256, Heads: 4, Vocab: 256, Experts: 4, ExpertsUsed: 2, Tied: true, Seed: 3},
	"dense12q4": {Layers: 12, Embd: 256, FF: 512, Heads: 4, HeadsKV: 2, Vocab: 1024, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ6_K, Seed: 4},
	// split files, as llama-gguf-split writes them: each file's own
	// mapping and buffers
	"split3": {Layers: 12, Embd: 256, FF: 512, Heads: 4, HeadsKV: 2, Vocab: 1024, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ6_K, Seed: 5, Splits: 3},
}

func TestConformanceWithLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	eps := testenv.RPC(t, 2)
	l := openLlama(t, rt)
	dir := t.TempDir()
	paths := map[string]string{}
	for name, spec := range confModels {
		p, err := spec.Write(rt, filepath.Join(dir, name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	rpc0 := "RPC0[" + eps[0] + "]"
	_ = vk
	cases := []confCase{
		{"all-layers", "dense4", nil},
		{"ngl0", "dense4", func(p *place.Params) { p.NGPULayers = place.NLayers(0) }},
		{"ngl2", "dense12q4", func(p *place.Params) { p.NGPULayers = place.NLayers(2) }},
		{"ngl-n-layer", "dense12q4", func(p *place.Params) { p.NGPULayers = place.NLayers(12) }},
		{"ngl-over", "tied7", func(p *place.Params) { p.NGPULayers = place.NLayers(99) }},
		{"ts-even", "dense12q4", func(p *place.Params) { p.TensorSplit = []float32{1, 1, 1} }},
		{"ts-vulkan-heavy", "dense12q4", func(p *place.Params) { p.TensorSplit = []float32{1, 0, 3} }},
		{"ts-partial", "tied7", func(p *place.Params) { p.TensorSplit = []float32{2, 1, 1}; p.NGPULayers = place.NLayers(5) }},
		{"sm-none-mg2", "dense4", func(p *place.Params) { p.SplitMode = place.SplitNone; p.MainGPU = 2 }},
		{"sm-none-mg0", "tied7", func(p *place.Params) { p.SplitMode = place.SplitNone; p.MainGPU = 0 }},
		{"sm-none-no-gpu", "dense4", func(p *place.Params) { p.SplitMode = place.SplitNone; p.MainGPU = -1 }},
		{"ot-layer-cpu", "dense12q4", func(p *place.Params) {
			p.Overrides = []place.Override{{Pattern: `blk\.1[01]\.`, BufferType: "CPU"}}
		}},
		{"ot-experts-cpu", "moe4", func(p *place.Params) { p.CPUMoE = true }},
		{"ot-n-cpu-moe", "moe4", func(p *place.Params) { p.NCPUMoE = 2; p.TensorSplit = []float32{1, 1, 1} }},
		{"ot-to-vulkan", "dense4", func(p *place.Params) {
			p.Overrides = []place.Override{{Pattern: `attn_q`, BufferType: "Vulkan0"}, {Pattern: `ffn_up`, BufferType: rpc0}}
		}},
		{"moe-ts", "moe4", func(p *place.Params) { p.TensorSplit = []float32{0, 1, 1} }},
		{"no-host", "tied7", func(p *place.Params) { p.NoHost = true; p.NGPULayers = place.NLayers(3) }},
		{"no-extra-bufts", "dense4", func(p *place.Params) { p.NoExtraBufts = true; p.NGPULayers = place.NLayers(1) }},
		{"devices-vulkan-only", "tied7", func(p *place.Params) { p.DeviceNames = []string{"Vulkan0"} }},
		{"devices-explicit-order", "dense12q4", func(p *place.Params) {
			p.DeviceNames = []string{"Vulkan0", "RPC1"}
			p.TensorSplit = []float32{1, 2}
		}},
		{"split-files", "split3", nil},
		{"split-files-ngl5", "split3", func(p *place.Params) { p.NGPULayers = place.NLayers(5); p.DeviceNames = []string{"Vulkan0"} }},
		{"split-files-ot", "split3", func(p *place.Params) {
			p.Overrides = []place.Override{{Pattern: `blk\.[4-7]\.ffn`, BufferType: "CPU"}}
		}},
		{"split-files-rpc", "split3", func(p *place.Params) { p.DeviceNames = []string{"RPC0", "RPC1"}; p.NGPULayers = place.NLayers(7) }},
	}
	for _, c := range cases {
		for _, mode := range []place.LoadMode{place.LoadMmap, place.LoadNone} {
			t.Run(c.name+"/"+mode.String(), func(t *testing.T) {
				params := place.Params{}
				params.LoadMode = mode
				if c.params != nil {
					c.params(&params)
				}
				m, err := gguf.OpenModel(paths[c.model])
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				plan, err := place.New(context.Background(), rt, m, params)
				if err != nil {
					t.Fatal(err)
				}
				lm, lines, err := l.LoadModel(llamaLoad(t, rt, paths[c.model], params))
				if err != nil {
					t.Fatal(err)
				}
				defer lm.Free()
				for _, d := range deviceDiff(rt, plan, lm) {
					t.Error(d)
				}
				compareReports(t, ourReport(plan), llamaReport(rt, lm, lines))
			})
		}
	}
}

// The per-context mapped ranges (--map-ranges own) are not llama.cpp's
// buffers under a partial offload, and the comparison says so (a
// negative control of the buffer comparison above).
func TestOwnRangesDifferFromLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	l := openLlama(t, rt)
	path, err := confModels["dense12q4"].Write(rt, filepath.Join(t.TempDir(), "m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	params := place.Params{DeviceNames: []string{"Vulkan0"}, NGPULayers: place.NLayers(3), LoadMode: place.LoadMmap}
	lm, lines, err := l.LoadModel(llamaLoad(t, rt, path, params))
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	theirs := llamaReport(rt, lm, lines)
	for _, r := range []place.MapRanges{place.MapSpan, place.MapOwnRanges} {
		params.MapRanges = r
		plan, err := place.New(context.Background(), rt, testenv.OpenModel(t, path), params)
		if err != nil {
			t.Fatal(err)
		}
		d := diffReports(ourReport(plan), theirs)
		if (len(d) == 0) != (r == place.MapSpan) {
			t.Errorf("mapped ranges %s: %d differences from llama.cpp %v", r, len(d), d)
		}
	}
}

// Metadata overrides are read as llama.cpp reads them: one of the key's
// kind replaces the file's value (here, too few layers: both refuse, in
// llama.cpp's words), one of another kind is warned about and ignored,
// and both say so in the same lines.
func TestKVOverridesMatchLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	l := openLlama(t, rt)
	path, err := confModels["dense4"].Write(rt, filepath.Join(t.TempDir(), "m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		overrides []string
		refused   string // llama.cpp's reason, "" when both load
	}{
		{[]string{"llama.block_count=int:3"}, "done_getting_tensors: wrong number of tensors; expected 40, got 31"},
		{[]string{"llama.block_count=float:3", "llama.context_length=int:64", "llama.attention.layer_norm_rms_epsilon=float:0.001"}, ""},
	} {
		params := place.Params{NGPULayers: place.NLayers(2)}
		for _, s := range c.overrides {
			o, err := place.ParseKVOverride(s)
			if err != nil {
				t.Fatal(err)
			}
			params.KVOverrides = append(params.KVOverrides, o)
		}
		plan, ourErr := place.New(context.Background(), rt, testenv.OpenModel(t, path), params)
		lm, lines, theirErr := l.LoadModel(llamaLoad(t, rt, path, params))
		if c.refused != "" {
			if ourErr == nil || theirErr == nil || !strings.Contains(ourErr.Error(), c.refused) || !strings.Contains(theirErr.Error(), c.refused) {
				t.Errorf("%v: ggload %v; llama.cpp %v; want both to refuse with %q", c.overrides, ourErr, theirErr, c.refused)
			}
			if theirErr == nil {
				lm.Free()
			}
			continue
		}
		if ourErr != nil || theirErr != nil {
			t.Fatalf("%v: ggload %v; llama.cpp %v", c.overrides, ourErr, theirErr)
		}
		compareReports(t, ourReport(plan), llamaReport(rt, lm, lines))
		lm.Free()
		var ours, theirs []string
		for _, ln := range plan.Log {
			if strings.HasPrefix(ln.Text, "validate_override: ") {
				ours = append(ours, ln.Text)
			}
		}
		for _, ln := range lines {
			if strings.HasPrefix(ln.Text, "validate_override: ") {
				theirs = append(theirs, strings.TrimRight(ln.Text, "\n"))
			}
		}
		if len(ours) != 3 || !slices.Equal(ours, theirs) {
			t.Errorf("override lines:\n ggload    %q\n llama.cpp %q", ours, theirs)
		}
	}
}

// The zero place.Params are llama_model_default_params of the pin.
func TestZeroParamsAreLlamaDefaults(t *testing.T) {
	rt := testenv.Runtime(t)
	d := openLlama(t, rt).ModelDefaultParams()
	var p place.Params
	got := []int{p.NGPULayers.Llama(), p.SplitMode.Llama(), p.LoadMode.Llama(), p.Lazy.Llama(), p.MainGPU}
	want := []int{int(d.NGPULayers), int(d.SplitMode), int(d.LoadMode), int(d.LazyMode), int(d.MainGPU)}
	if !slices.Equal(got, want) {
		t.Errorf("ngl, split, load, lazy, main gpu: zero Params %v, llama.cpp %v", got, want)
	}
	if p.NoExtraBufts == d.UseExtraBufts || p.NoHost != d.NoHost || p.LoadMTP != d.LoadMTP {
		t.Errorf("extra bufts %v, no host %v, mtp %v; llama.cpp %+v", !p.NoExtraBufts, p.NoHost, p.LoadMTP, d)
	}
}
