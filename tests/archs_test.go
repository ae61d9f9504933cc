package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// Every architecture of the pin: a tiny model synthesized with llama.cpp's
// own programs as the guide, planned by ggload and loaded by llama.cpp in
// the same process, under several configurations. Both must agree on
// every tensor's buffer and buffer type (duplicates as a multiset), on
// every buffer's size, and on llama.cpp's report lines.
//
// llama.cpp aborts the process on some bad inputs, so the loads run in a
// child process that writes each result as it goes; a crash is recorded
// against the case that was running and the child starts again after it.
//
//	go test -run TestArchitectures -v ./tests

// archConfig is one configuration every architecture is compared under.
type archConfig struct {
	name   string
	rpc    bool // needs an RPC server (RPC0)
	params func(p *place.Params, gpu string)
	// loaderTypes: the files written with the loader's types (where they
	// are not the converter's) are compared here too
	loaderTypes bool
}

var archConfigs = []archConfig{
	{"ngl99", false, func(p *place.Params, gpu string) { p.DeviceNames = []string{gpu}; p.NGPULayers = place.NLayers(99) }, true},
	{"ngl1", false, func(p *place.Params, gpu string) { p.DeviceNames = []string{gpu}; p.NGPULayers = place.NLayers(1) }, true},
	{"load-none", false, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.NGPULayers = place.NLayers(99)
		p.LoadMode = place.LoadNone
	}, false},
	{"ot-ffn-cpu", false, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{gpu}
		p.NGPULayers = place.NLayers(99)
		p.Overrides = []place.Override{{Pattern: "ffn", BufferType: "CPU"}}
	}, false},
	{"rpc-split", true, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{"RPC0", gpu}
		p.NGPULayers = place.NLayers(99)
		p.TensorSplit = []float32{1, 1}
	}, false},
	// a meta device over both, uneven: every tensor's slices are compared
	// with llama.cpp's own split states too
	{"sm-tensor", true, func(p *place.Params, gpu string) {
		p.DeviceNames = []string{"RPC0", gpu}
		p.NGPULayers = place.NLayers(99)
		p.SplitMode = place.SplitTensor
		p.TensorSplit = []float32{3, 1}
	}, false},
}

// archResult is one line of the child's results.
type archResult struct {
	Config string `json:"config"`
	Arch   string `json:"arch"`   // the model's archModel.Name
	Status string `json:"status"` // start, note, match, differ, ggload-refuses, llama-refuses, both-refuse, crash, graph-crash, skip
	Detail string `json:"detail,omitempty"`
}

const archChildEnv = "GGLOAD_ARCH_CHILD"

// archModel is what the child is told of a model: Name is the
// architecture, and "/loader-types" for a file with the loader's types.
type archModel struct {
	Arch, Name, Path string
	LoaderTypes      bool
	Embd             int64 // embedding_length, when not the synthesizer's default
}

// runs reports whether configuration c compares model f.
func (c archConfig) runs(f archModel) bool { return !f.LoaderTypes || c.loaderTypes }

func TestArchitectures(t *testing.T) {
	if dir := os.Getenv(archChildEnv); dir != "" {
		archChild(t, dir)
		return
	}
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	openLlama(t, rt)
	files := archFiles(t, rt, 0)
	work := t.TempDir()
	var models []archModel
	for _, f := range files {
		models = append(models, archModel{Arch: f.Arch, Name: f.Name, Path: f.Path, LoaderTypes: f.Types == synth.LoaderTypes})
	}
	list, err := json.Marshal(models)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "models.json"), list, 0o644); err != nil {
		t.Fatal(err)
	}
	results := runChildren(t, "TestArchitectures", archChildEnv, work)

	// one result per (config, architecture)
	final := map[[2]string]archResult{}
	for _, r := range results {
		if r.Status != "start" {
			final[[2]string{r.Config, r.Arch}] = r
		}
	}
	refusedBy := map[string]string{} // architecture → llama.cpp's reason, in every configuration
	for ci, c := range archConfigs {
		only := map[string]string{} // refused in this configuration alone
		var k, n int
		var skipped string
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
			case "skip":
				skipped = r.Detail
			case "both-refuse", "crash":
				why := r.Detail
				if r.Status == "crash" {
					why = "llama.cpp aborts and ggload refuses: " + why
				}
				if ci == 0 {
					refusedBy[f.Name] = why
				} else if _, ok := refusedBy[f.Name]; !ok {
					only[f.Name] = why
				}
			default:
				n++
				t.Errorf("%s/%s: %s\n%s", c.name, f.Name, r.Status, r.Detail)
			}
		}
		if skipped != "" {
			t.Logf("%-10s skipped: %s", c.name, skipped)
			continue
		}
		t.Logf("%-10s %d/%d architectures identical to llama.cpp", c.name, k, n)
		if len(only) > 0 {
			var list []string
			for a, why := range only {
				list = append(list, fmt.Sprintf("%s (%s)", a, why))
			}
			sort.Strings(list)
			t.Logf("%-10s %d more architectures refused by llama.cpp %s in this configuration: %s", c.name, len(only), arch.Pin, strings.Join(list, "; "))
		}
	}
	var refused []string
	for a, why := range refusedBy {
		refused = append(refused, fmt.Sprintf("%s (%s)", a, why))
	}
	sort.Strings(refused)
	t.Logf("%d architectures llama.cpp %s itself refuses: %s", len(refused), arch.Pin, strings.Join(refused, "; "))
	for _, f := range files {
		// (a graph the replay refuses is TestContextMemory's to judge)
		var ge *synth.GraphError
		if f.Err != nil && !errors.As(f.Err, &ge) && refusedBy[f.Name] == "" {
			t.Errorf("%s: the synthesizer could not build a model that llama.cpp refuses: %v", f.Name, f.Err)
		}
	}
}

var (
	archFilesMu   sync.Mutex
	archFilesDone = map[int64][]synth.ArchFile{}
)

// archFiles are the synthesized models of every architecture, with
// embedding_length embd (0: the synthesizer's default), their graphs
// mended by the replay; GGLOAD_ARCHS, a comma-separated list of
// architectures, keeps only those (to work on them).
func archFiles(t *testing.T, rt *ggml.Runtime, embd int64) []synth.ArchFile {
	t.Helper()
	// synthesized once per process (several tests take the same files)
	archFilesMu.Lock()
	defer archFilesMu.Unlock()
	if fs, ok := archFilesDone[embd]; ok {
		return fs
	}
	src := testenv.SourceTree(t)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "ggload", "archs", arch.Pin)
	if embd > 0 {
		dir = filepath.Join(dir, fmt.Sprintf("embd%d", embd))
	}
	o := synth.ArchOptions{Embd: embd, Graph: rt.Ops()}
	only := os.Getenv("GGLOAD_ARCHS")
	if only != "" {
		o.Only = func(a string) bool { return slices.Contains(strings.Split(only, ","), a) }
	}
	files, err := synth.ArchFiles(dir, src, o)
	if err != nil {
		t.Fatal(err)
	}
	archFilesDone[embd] = files
	return files
}

// runChildren runs test in a child process (env naming the work
// directory) until every case has a result, starting it again after a
// crash.
func runChildren(t *testing.T, test, env, work string) []archResult {
	for attempt := 0; attempt < 400; attempt++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1", "-test.timeout=20m")
		// (no backtrace on a native abort: ggml forks a debugger for it,
		// and the fork of a process with Go's threads can hang for good)
		cmd.Env = append(os.Environ(), env+"="+work, "GGML_NO_BACKTRACE=1")
		out, err := cmd.CombinedOutput()
		results := readArchResults(t, work)
		if err == nil {
			if !strings.Contains(string(out), "--- PASS: "+test) {
				t.Fatalf("the child did not pass:\n%s", tail(string(out), 40))
			}
			return results
		}
		// a crash: the last case started and not finished is its cause
		// (notes a case leaves on the way do not end it)
		n := len(results)
		if n > 0 && results[n-1].Status == "restart" {
			continue // the child asked for a fresh process (a server it lost)
		}
		for n > 0 && results[n-1].Status == "note" {
			n--
		}
		if n > 0 && results[n-1].Status == "start" {
			r := results[n-1]
			r.Status = "crash"
			switch r.Detail {
			case "planned":
				// ggload accepted what llama.cpp aborts on: loading it
				// would abort ggload's process too
				r.Status = "ggload-accepts-crash"
			case "graph":
				r.Status = "graph-crash"
			case "ggload ran":
				// ggload ran what llama.cpp aborts on
				r.Status = "ggload-runs-crash"
			case "ggload runs":
				// ggload itself ended the process
				r.Status = "ggload-crash"
			}
			r.Detail = crashLine(string(out))
			appendArchResult(t, work, r)
			continue
		}
		t.Fatalf("the child failed (%v) outside any case:\n%s", err, tail(string(out), 60))
	}
	t.Fatal("the child crashed 400 times")
	return nil
}

func readArchResults(t *testing.T, work string) []archResult {
	f, err := os.Open(filepath.Join(work, "results.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []archResult
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r archResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("results: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func appendArchResult(t testing.TB, work string, r archResult) {
	f, err := os.OpenFile(filepath.Join(work, "results.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// crashLine picks the native assertion or signal from a crashed child.
func crashLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "GGML_ASSERT") || strings.Contains(l, "GGML_ABORT") || strings.Contains(l, "terminate called") {
			if i := strings.Index(l, "GGML_"); i >= 0 && strings.Contains(l, ": GGML_") {
				return strings.TrimSpace(l[i:])
			}
			return strings.TrimSpace(l)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "SIG") || strings.HasPrefix(l, "fatal error") || strings.HasPrefix(l, "panic:") {
			return strings.TrimSpace(l)
		}
	}
	return tail(out, 3)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// childState is what a comparing child starts from: the runtime, the
// GPU, libllama, the models written for it, and the cases that already
// have a result (config, architecture).
func childState(t *testing.T, work string) (*ggml.Runtime, string, *llama.Lib, []archModel, map[[2]string]bool) {
	rt := testenv.Runtime(t)
	gpu := testenv.Vulkan(t).Name()
	l := openLlama(t, rt)
	b, err := os.ReadFile(filepath.Join(work, "models.json"))
	if err != nil {
		t.Fatal(err)
	}
	var files []archModel
	if err := json.Unmarshal(b, &files); err != nil {
		t.Fatal(err)
	}
	done := map[[2]string]bool{}
	for _, r := range readArchResults(t, work) {
		if r.Status != "start" && r.Status != "note" && r.Status != "restart" {
			done[[2]string{r.Config, r.Arch}] = true
		}
	}
	return rt, gpu, l, files, done
}

// archChild compares every case that has no result yet.
func archChild(t *testing.T, work string) {
	rt, gpu, l, files, done := childState(t, work)
	for _, c := range archConfigs {
		if c.rpc {
			pending := false
			for _, f := range files {
				pending = pending || c.runs(f) && !done[[2]string{c.name, f.Name}]
			}
			if !pending {
				continue
			}
			if ok, why := testenv.HaveRPCServer(); !ok {
				msg := why
				if testenv.Required("rpc") {
					t.Fatalf("rpc is required (GGLOAD_REQUIRE) but missing: %s", msg)
				}
				for _, f := range files {
					if c.runs(f) {
						appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: "skip", Detail: msg})
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
			status, detail := compareArch(t, rt, l, f.Path, c, gpu, func(planned error) {
				// what ggload decided, on record before llama.cpp loads
				// (and perhaps aborts)
				if planned == nil {
					appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: "start", Detail: "planned"})
				}
			})
			appendArchResult(t, work, archResult{Config: c.name, Arch: f.Name, Status: status, Detail: detail})
		}
	}
}

// compareArch plans one model under one configuration and loads it with
// llama.cpp.
func compareArch(t *testing.T, rt *ggml.Runtime, l *llama.Lib, path string, c archConfig, gpu string, planned func(error)) (string, string) {
	params := place.Params{}
	c.params(&params, gpu)
	m, err := gguf.OpenModel(path)
	if err != nil {
		return "ggload-refuses", err.Error()
	}
	defer m.Close()
	plan, ourErr := place.New(context.Background(), rt, m, params)
	planned(ourErr)
	lm, lines, theirErr := l.LoadModel(llamaLoad(t, rt, path, params))
	if theirErr == nil {
		defer lm.Free()
	}
	switch {
	case ourErr != nil && theirErr != nil:
		return "both-refuse", strings.TrimPrefix(theirErr.Error(), "llama: ")
	case ourErr != nil:
		return "ggload-refuses", ourErr.Error()
	case theirErr != nil:
		return "llama-refuses", theirErr.Error()
	}
	ours, theirs := ourReport(plan), llamaReport(rt, lm, lines)
	if len(theirs.tensors) == 0 || len(theirs.buffers) == 0 {
		return "differ", "llama.cpp's report has no tensors or no buffers: nothing was compared"
	}
	diffs := append(deviceDiff(rt, plan, lm), diffReports(ours, theirs)...)
	if plan.TensorDevices != nil {
		diffs = append(diffs, splitDiff(plan, lm)...)
	}
	if len(diffs) > 0 {
		return "differ", strings.Join(diffs, "\n")
	}
	if plan.TensorDevices != nil {
		// ggload loads it too: the meta buffer takes every tensor (its
		// asserts pass) and gives every tensor back whole
		lm.Free()
		mdl, err := loader.Load(context.Background(), plan, loader.Options{})
		if err != nil {
			return "differ", "ggload's load: " + err.Error()
		}
		defer mdl.Close()
		v, err := mdl.Verify()
		if err != nil {
			return "differ", "ggload's load: " + err.Error()
		}
		if v.Tensors == 0 {
			return "differ", "ggload's load: no tensor verified"
		}
	}
	return "match", ""
}

// splitDiff compares how the meta device lays out every tensor on it with
// llama.cpp's own answer for the same tensor of its model.
func splitDiff(plan *place.Plan, lm *llama.Model) []string {
	theirs := map[string]*bindings.Tensor{}
	for _, tn := range lm.Tensors() {
		if _, ok := theirs[tn.Name]; !ok {
			theirs[tn.Name] = tn.C
		}
	}
	var out []string
	n := 0
	for t := range plan.Placements() {
		if t.Split == nil {
			continue
		}
		c, ok := theirs[t.Name]
		if !ok {
			out = append(out, fmt.Sprintf("split: llama.cpp has no tensor %s", t.Name))
			continue
		}
		s, err := lm.SplitState(c, len(plan.TensorDevices))
		if err != nil {
			return append(out, err.Error())
		}
		if s.String() != t.Split.String() {
			out = append(out, fmt.Sprintf("split of %s: ours %s, llama.cpp %s", t.Name, t.Split, s))
		}
		n++
	}
	if n == 0 {
		out = append(out, "split mode tensor: no tensor on the meta device, nothing compared")
	}
	return out
}

// planBoth synthesizes a tiny model of architecture a, plans it under
// configuration c and loads it with llama.cpp (freed when the test ends).
func planBoth(t *testing.T, rt *ggml.Runtime, l *llama.Lib, a string, c archConfig, gpu string) (*place.Plan, *llama.Model, []llama.LogLine) {
	t.Helper()
	vf, err := gguf.Open(filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	am, err := synth.NewArchModel(a, vf, synth.ArchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), a+".gguf")
	if err := am.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	params := place.Params{}
	c.params(&params, gpu)
	plan, err := place.New(context.Background(), rt, testenv.OpenModel(t, path), params)
	if err != nil {
		t.Fatal(err)
	}
	lm, lines, err := l.LoadModel(llamaLoad(t, rt, path, params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lm.Free)
	return plan, lm, lines
}

// The comparison finds a single tensor on another buffer type, a buffer
// of another size and a missing duplicate (a negative control of
// TestArchitectures).
func TestArchitectureReportsDiffer(t *testing.T) {
	rt := testenv.Runtime(t)
	gpu := testenv.Vulkan(t).Name()
	l := openLlama(t, rt)
	plan, lm, lines := planBoth(t, rt, l, "bloom", archConfigs[0], gpu) // a tied output: token_embd twice
	theirs := llamaReport(rt, lm, lines)
	if d := diffReports(ourReport(plan), theirs); len(d) != 0 {
		t.Fatalf("the unchanged plan differs: %v", d)
	}
	dups := 0
	for _, tn := range theirs.tensors {
		if strings.HasPrefix(tn, "token_embd.weight ") {
			dups++
		}
	}
	if dups != 2 {
		t.Fatalf("llama.cpp has token_embd.weight %d times, want 2 (input and tied output)", dups)
	}
	tamper := []struct {
		name string
		f    func(r *report)
	}{
		{"a tensor's buffer type", func(r *report) { r.tensors[len(r.tensors)/2] += "x" }},
		{"a buffer's size", func(r *report) { r.buffers[0] += "1" }},
		{"a duplicate dropped", func(r *report) {
			for i, tn := range r.tensors {
				if strings.HasPrefix(tn, "token_embd.weight ") {
					r.tensors = append(r.tensors[:i], r.tensors[i+1:]...)
					return
				}
			}
		}},
		{"a layer's device", func(r *report) { r.layers[0] = "CPU" }},
	}
	for _, tc := range tamper {
		ours := ourReport(plan)
		tc.f(&ours)
		if len(diffReports(ours, theirs)) == 0 {
			t.Errorf("%s changed: no difference found", tc.name)
		}
	}
}

// The split comparison finds one tensor's slices moved from one device to
// the other (a negative control of the sm-tensor configuration).
func TestSplitStatesDiffer(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	rt := testenv.Runtime(t)
	gpu := testenv.Vulkan(t).Name()
	testenv.RPC(t, 1)
	l := openLlama(t, rt)
	c := archConfigs[len(archConfigs)-1]
	if c.name != "sm-tensor" {
		t.Fatal("the last configuration is not split mode tensor")
	}
	plan, lm, _ := planBoth(t, rt, l, "llama", c, gpu)
	if d := splitDiff(plan, lm); len(d) != 0 {
		t.Fatalf("the unchanged plan differs: %v", d)
	}
	for tp := range plan.Placements() {
		if tp.Split != nil && tp.Split.Axis.IsDim() && tp.Split.Segments[0].Lengths[0] > 0 {
			sg := tp.Split.Segments[0]
			sg.Lengths = []int64{sg.Lengths[0] - 1, sg.Lengths[1] + 1}
			tp.Split.Segments = []ggml.SplitSegment{sg}
			if d := splitDiff(plan, lm); len(d) != 1 || !strings.Contains(d[0], tp.Name) {
				t.Fatalf("%s's slices moved: %v", tp.Name, d)
			}
			return
		}
	}
	t.Fatal("no tensor sliced")
}

// A file from a later llama.cpp (an architecture the pin does not know)
// is placed by tensor names: for architectures whose tensors the names
// say enough about, that is llama.cpp's own placement, tied output (the
// token embedding used again as the output) and rope tensors used by
// every layer included.
func TestGenericPathMatchesLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	gpu := testenv.Vulkan(t).Name()
	l := openLlama(t, rt)
	src := testenv.SourceTree(t)
	vf, err := gguf.Open(filepath.Join(src, "models", "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	// llama and bloom synthesize without output.weight: both tie it
	for _, a := range []string{"llama", "bloom", "qwen3", "gemma2", "stablelm"} {
		t.Run(a, func(t *testing.T) {
			am, err := synth.NewArchModel(a, vf, synth.ArchOptions{Layers: 6})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			orig := filepath.Join(dir, a+".gguf")
			if err := am.WriteFile(orig); err != nil {
				t.Fatal(err)
			}
			// the same model under a name llama.cpp does not know
			renamed := *am
			renamed.KV = nil
			for _, kv := range am.KV {
				switch {
				case kv.Key == "general.architecture":
					kv.Value = gguf.String("later-" + a)
				case strings.HasPrefix(kv.Key, a+"."):
					kv.Key = "later-" + kv.Key
				}
				renamed.KV = append(renamed.KV, kv)
			}
			later := filepath.Join(dir, "later.gguf")
			if err := renamed.WriteFile(later); err != nil {
				t.Fatal(err)
			}
			for _, c := range archConfigs[:4] {
				params := place.Params{}
				c.params(&params, gpu)
				m := testenv.OpenModel(t, later)
				plan, err := place.New(context.Background(), rt, m, params)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if plan.Exact {
					t.Fatalf("%s: later-%s placed as a known architecture", c.name, a)
				}
				lm, lines, err := l.LoadModel(llamaLoad(t, rt, orig, params))
				if err != nil {
					t.Fatal(err)
				}
				ours, theirs := ourReport(plan), llamaReport(rt, lm, lines)
				lm.Free()
				// the generic path creates in file order, not in the
				// architecture's: the first moved tensor it names can
				// differ, and the override lines come in another order
				ours.moved, theirs.moved = "", ""
				slices.Sort(ours.overrides)
				slices.Sort(theirs.overrides)
				for _, d := range diffReports(ours, theirs) {
					t.Errorf("%s: %s", c.name, d)
				}
			}
		})
	}
}
