package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// A dense model of 19 layers on Vulkan0 (lavapipe, 2 GiB).
var cliDense = synth.Spec{Layers: 18, Embd: 256, FF: 512, Heads: 2, Vocab: 512}

func planJSONOf(t *testing.T, args ...string) planJSON {
	t.Helper()
	out, err := runCLI(t, append([]string{"plan", "--json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep planJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return rep
}

// -fit adjusts only what the user left unset: "--fit -ngl 3" keeps 3
// layers where fit wants fewer than all (it used to offload all 19), and
// without -ngl fit chooses.
func TestFitKeepsExplicitNGL(t *testing.T) {
	vk := testenv.Vulkan(t)
	path := writeSynth(t, cliDense)
	free, _ := vk.Memory()
	// a target that leaves room for fewer than 3 layers
	// what fit counts for 3 layers (weights, context, compute), as it
	// measures them where nothing needs to change
	three := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", "0", "-ngl", "3")
	if len(three.Fit.Devices) != 1 || three.Fit.Outcome != place.FitUnchanged {
		t.Fatalf("fit %+v", three.Fit)
	}
	need := three.Fit.Devices[0].Before
	target := strconv.FormatUint((free-need)>>20+1, 10)
	for _, args := range [][]string{
		{"--fit", "-ngl", "3"},           // ggload's earlier spelling
		{"-fit", "on", "-ngl", "3"},      // the pin's
		{"--fit=on", "--n-gpu-layers=3"}, // with =
	} {
		rep := planJSONOf(t, append([]string{path, "-dev", "Vulkan0", "-fitt", target}, args...)...)
		if rep.Plan.GPULayers != 3 || rep.Fit.Outcome != place.FitFailed || !strings.Contains(strings.Join(rep.Fit.Lines, "\n"), "n_gpu_layers already set by user to 3") {
			t.Fatalf("%v: %d layers offloaded, fit %s:\n%s", args, rep.Plan.GPULayers, rep.Fit.Outcome, strings.Join(rep.Fit.Lines, "\n"))
		}
	}
	rep := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", target)
	if rep.Fit.Outcome != place.FitAdjusted || rep.Plan.GPULayers <= 0 || rep.Plan.GPULayers >= 19 || len(rep.Fit.Changed) != 1 {
		t.Fatalf("fit chose %d layers (%s, %v):\n%s", rep.Plan.GPULayers, rep.Fit.Outcome, rep.Fit.Changed, strings.Join(rep.Fit.Lines, "\n"))
	}
	// -fit off and -ngl auto: everything, as llama.cpp without fit
	rep = planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", target, "-fit", "off")
	if rep.Plan.GPULayers != 19 || rep.Fit.Enabled {
		t.Fatalf("-fit off: %d layers, %+v", rep.Plan.GPULayers, rep.Fit)
	}
	// the text explains it line by line
	out, err := runCLI(t, "plan", path, "-dev", "Vulkan0", "-fitt", target)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fit (-fit on, adjusted", "misses it by", "filling layers back to front", "chose -c 4096 -ngl"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

// Every numeric option is checked against its range, and the error names
// the option, the range and the value.
func TestNumericRanges(t *testing.T) {
	model := filepath.Join(t.TempDir(), "never-opened.gguf")
	for _, c := range []struct {
		args  []string
		value string
		rng   string
	}{
		{[]string{"load", model, "--staging-size", "3"}, "3", "64KiB to 1GiB"},
		{[]string{"load", model, "--staging-size", "2GiB"}, "2GiB", "64KiB to 1GiB"},
		{[]string{"load", model, "--readers", "-3"}, "-3", "0 to 256"},
		{[]string{"load", model, "--staging-slots", "1000"}, "1000", "0 to 64"},
		{[]string{"plan", model, "-mg", "99"}, "99", "-1 to 15"},
		{[]string{"plan", model, "--main-gpu", "-2"}, "-2", "-1 to 15"},
		{[]string{"plan", model, "-ncmoe", "-1"}, "-1", "0 to 65536"},
		{[]string{"plan", model, "--n-cpu-ffn", "x"}, "x", "0 to 65536"},
		{[]string{"plan", model, "-fitt", "-5"}, "-5", "0 to 16777216"},
		{[]string{"plan", model, "-fitc", "-1"}, "-1", "0 to 2147483647"},
		{[]string{"plan", model, "-ngl", "99999999999"}, "99999999999", "number of layers"},
		{[]string{"plan", model, "-ts", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"}, "1,1,1", "at most 15"},
		{[]string{"plan", model, "--rpc-timeout", "1ns"}, "1ns", "100ms to 24h"},
	} {
		_, err := runCLI(t, c.args...)
		var ue *usageError
		flag := c.args[len(c.args)-2]
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), flag+" "+c.value) || !strings.Contains(err.Error(), c.rng) {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}

// A misspelled option, value or command gets a suggestion.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "m.gguf", "--lod-mode", "none"}, "did you mean --load-mode?"},
		{[]string{"plan", "m.gguf", "-ngll", "3"}, "did you mean -ngl?"},
		{[]string{"plan", "m.gguf", "--n-gpu-layer", "3"}, "did you mean --n-gpu-layers?"},
		{[]string{"plan", "m.gguf", "-lm", "dioo"}, "did you mean dio?"},
		{[]string{"plan", "m.gguf", "-sm", "layers"}, "did you mean layer?"},
		{[]string{"load", "m.gguf", "--stagin-size", "1MiB"}, "did you mean --staging-size?"},
		{[]string{"pln", "m.gguf"}, "did you mean plan?"},
		{[]string{"lod"}, "did you mean load?"},
		{[]string{"inspekt"}, "did you mean inspect?"},
		{[]string{"plan", "m.gguf", "--staging-size", "1MiB"}, "unknown option --staging-size: it is an option of ggload load"},
		{[]string{"devices", "--tensors"}, "it is an option of ggload load and ggload plan"},
		{[]string{"plan", "m.gguf", "-fit", "maybe"}, "-fit maybe: want on or off"},
	} {
		_, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v", c.args, err)
		}
	}
	// nothing near: no suggestion
	if _, err := runCLI(t, "plan", "m.gguf", "--frobnicate"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("--frobnicate: %v", err)
	}
}

// The usage lines name MODEL; a command without it says how to give it.
func TestUsageNamesModel(t *testing.T) {
	out, err := runCLI(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ggload plan     MODEL [options]", "ggload load     MODEL [options]", "ggload inspect  FILE"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	for _, cmd := range []string{"plan", "load"} {
		out, err := runCLI(t, cmd, "--help")
		if !errors.Is(err, errHelp) || !strings.HasPrefix(out, "usage: ggload "+cmd+" MODEL [options]\n       ggload "+cmd+" -m MODEL [options]") {
			t.Errorf("%s --help: %v\n%s", cmd, err, out)
		}
		if _, err := runCLI(t, cmd); err == nil || !strings.Contains(err.Error(), "usage: ggload "+cmd+" MODEL [options]") {
			t.Errorf("%s without MODEL: %v", cmd, err)
		}
	}
	// -m is MODEL too; both, different, is an error
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 256})
	if _, err := runCLI(t, "plan", "-m", path, "-dev", "none"); err != nil {
		t.Error(err)
	}
	if _, err := runCLI(t, "plan", "-m", path, "other.gguf"); err == nil || !strings.Contains(err.Error(), "two models") {
		t.Error(err)
	}
}

// --version prints ggload's version and the native pin, at the top and
// in every command.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"plan", "--version"}, {"load", "m.gguf", "--version"}, {"devices", "--version"}} {
		out, err := runCLI(t, args...)
		if err != nil && !errors.Is(err, errVersion) {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.HasPrefix(out, "ggload ") || !strings.Contains(out, "native pin: llama.cpp v0.5.0, ggml 0.25.1") {
			t.Errorf("%v:\n%s", args, out)
		}
	}
}

// llama.cpp's older --no-mmap and --mlock map to the load modes, with a
// note; with -lm they are refused.
func TestOlderLoadModeOptions(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 256})
	for _, c := range []struct {
		args []string
		mode string
	}{
		{[]string{"--no-mmap"}, "none"},
		{[]string{"--mlock"}, "mmap+mlock"},
		{[]string{"--no-mmap", "--mlock"}, "mlock"},
		{[]string{"-lm", "direct-io"}, "dio"},
		{[]string{"--load-mode", "mmap-mlock"}, "mmap+mlock"},
	} {
		rep := planJSONOf(t, append([]string{path, "-dev", "none"}, c.args...)...)
		if rep.Plan.LoadMode != c.mode {
			t.Errorf("%v: load mode %s", c.args, rep.Plan.LoadMode)
		}
		if strings.HasPrefix(c.args[0], "--no-mmap") || c.args[0] == "--mlock" {
			if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "llama.cpp's older spelling of -lm "+c.mode) {
				t.Errorf("%v: notes %q", c.args, rep.Notes)
			}
		}
	}
	if _, err := runCLI(t, "plan", path, "--no-mmap", "-lm", "mmap"); err == nil {
		t.Error("--no-mmap with -lm accepted")
	}
}

// plan and inspect say whether the architecture is placed by llama.cpp's
// own tensor creation, replayed, or by the generic path; a model whose
// architecture (and keys) are renamed to one the pin does not know takes
// the generic path, and plan's log says so.
func TestPlacementPath(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 256, Tied: true})
	renamed := renameArch(t, path, "llama", "llamax")
	for _, c := range []struct {
		path, arch, placement, text string
	}{
		{path, "llama", "exact", "exact: llama.cpp v0.5.0's own tensor creation for 'llama', replayed"},
		{renamed, "llamax", "generic", "generic: llama.cpp v0.5.0 does not know 'llamax'; each tensor is placed by its name"},
	} {
		out, err := runCLI(t, "inspect", c.path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "placement    "+c.text) {
			t.Errorf("inspect %s:\n%s", c.arch, out)
		}
		out, err = runCLI(t, "inspect", "--json", c.path)
		if err != nil {
			t.Fatal(err)
		}
		var ins inspectReport
		if err := json.Unmarshal([]byte(out), &ins); err != nil {
			t.Fatal(err)
		}
		if ins.Architecture != c.arch || ins.Placement != c.placement || ins.Exact != (c.placement == "exact") || ins.PlacedBy != c.text {
			t.Errorf("inspect --json: %+v", ins)
		}
		out, err = runCLI(t, "plan", c.path, "-dev", "none")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "placement    "+c.text) {
			t.Errorf("plan %s:\n%s", c.arch, out)
		}
		rep := planJSONOf(t, c.path, "-dev", "none")
		if rep.Plan.Arch != c.arch || rep.Plan.Placement != c.placement || rep.Plan.Exact != (c.placement == "exact") {
			t.Errorf("plan --json: %s %s %v", rep.Plan.Arch, rep.Plan.Placement, rep.Plan.Exact)
		}
		level, line := "INFO", "own tensor creation, replayed"
		if c.placement == "generic" {
			level, line = "WARN", "(the generic path)"
		}
		found := false
		for _, l := range rep.Plan.Log {
			found = found || l.Level == level && l.Source == "ggload" && strings.Contains(l.Text, line)
		}
		if !found {
			t.Errorf("plan --json of %s: no %s line %q in %+v", c.arch, level, line, rep.Plan.Log)
		}
	}
}

// renameArch writes a copy of the model whose general.architecture and
// keys "from.*" are renamed to "to".
func renameArch(t *testing.T, path, from, to string) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		key, v := kv.Key, kv.Value
		if key == gguf.KeyArchitecture {
			v = gguf.String(to)
		} else if rest, ok := strings.CutPrefix(key, from+"."); ok {
			key = to + "." + rest
		}
		if err := w.Set(key, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensorReader(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), to+".gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The buffers of plan --json add up to the model: each buffer counts its
// own tensors (they used to repeat their context's count).
func TestPlanBuffersAddUp(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 8, Embd: 256, FF: 512, Heads: 2, Vocab: 256, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ8_0})
	m := testenv.OpenModel(t, path)
	for _, args := range [][]string{{"-dev", "none"}, {"-dev", "none", "-nr"}, {"-ngl", "4"}} {
		rep := planJSONOf(t, append([]string{path}, args...)...)
		n, nb := 0, uint64(0)
		for _, b := range rep.Plan.Buffers {
			if b.Tensors == 0 || b.Bytes > b.Size {
				t.Errorf("%v: buffer %+v", args, b)
			}
			n += b.Tensors
			nb += b.Bytes
		}
		tot := rep.Plan.Totals
		if n != len(m.Weights)+tot.Duplicates-tot.Unused || nb != m.NBytes+tot.DuplicateB-tot.UnusedB || n != tot.BufferTensors || tot.FileTensors != len(m.Weights) {
			t.Fatalf("%v: %d buffers hold %d tensors (%d bytes); the model has %d (%d bytes); totals %+v", args, len(rep.Plan.Buffers), n, nb, len(m.Weights), m.NBytes, tot)
		}
		// the text's buffer lines say the same
		out, err := runCLI(t, append([]string{"plan", path}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		_, section, _ := strings.Cut(out, "\nbuffers (")
		section, _, _ = strings.Cut(section, "\n\n")
		lines := strings.Split(section, "\n")[1:]
		sum := 0
		for _, l := range lines {
			f := strings.Fields(l)
			k, err := strconv.Atoi(f[3])
			if err != nil || f[4] != "tensors" {
				t.Fatalf("buffer line %q", l)
			}
			sum += k
		}
		if len(lines) != len(rep.Plan.Buffers) || sum != n {
			t.Fatalf("%v: the text's %d buffer lines hold %d tensors:\n%s", args, len(lines), sum, section)
		}
	}
}

// -sm tensor over two RPC servers: the meta device's buffer has a share on
// each, the usage per device is those shares, and every sliced tensor's
// lengths add up to its shape along the axis, the first server taking
// about a quarter by -ts 1,3.
func TestPlanSplitTensor(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	eps := testenv.RPC(t, 2)
	path := writeSynth(t, cliDense)
	args := []string{path, "-sm", "tensor", "-dev", "RPC0,RPC1", "-ts", "1,3", "-fit", "off", "--rpc", strings.Join(eps, ",")}
	rep := planJSONOf(t, args...)
	if len(rep.Plan.TensorDevices) != 2 || rep.Plan.TensorDevices[0] != "RPC0" {
		t.Fatalf("tensor split devices %v", rep.Plan.TensorDevices)
	}
	parts := map[string]uint64{}
	for _, b := range rep.Plan.Buffers {
		for _, p := range b.Parts {
			parts[p.Device] += p.Size
			if p.Size > b.Size {
				t.Errorf("buffer %s of %d bytes has a share of %d on %s", b.Name, b.Size, p.Size, p.Device)
			}
		}
	}
	for _, u := range rep.Plan.Usage {
		if strings.HasPrefix(u.Device, "RPC") && u.Allocated != parts[u.Device] {
			t.Errorf("%s: usage %d, shares %d", u.Device, u.Allocated, parts[u.Device])
		}
	}
	if parts["RPC0"] == 0 || parts["RPC0"]*2 > parts["RPC1"] {
		t.Errorf("shares RPC0 %d, RPC1 %d: want RPC1 to hold far more", parts["RPC0"], parts["RPC1"])
	}
	split := 0
	for _, tn := range rep.Plan.Tensors {
		if tn.Split == nil || tn.Split.Axis == "mirrored" {
			continue
		}
		var axis int
		if _, err := fmt.Sscanf(tn.Split.Axis, "axis %d", &axis); err != nil {
			t.Fatalf("%s: axis %q", tn.Name, tn.Split.Axis)
		}
		var sum int64
		for _, sg := range tn.Split.Segments {
			for _, v := range sg.Lengths {
				sum += v * sg.Repeat
			}
		}
		if shape := append(tn.Shape, 1, 1, 1); sum != shape[axis] {
			t.Errorf("%s: slices add up to %d along axis %d of %v", tn.Name, sum, axis, tn.Shape)
		}
		split++
	}
	if split == 0 {
		t.Fatal("no tensor sliced")
	}
	out, err := runCLI(t, append([]string{"plan"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "meta device over RPC0, RPC1") {
		t.Fatalf("the text does not name the meta device's devices:\n%s", out)
	}
}

// The picture of "will it fit": one bar per device and one for the host
// (weights, context, compute), 80 columns at most, the target marked;
// JSON carries the same numbers.
func TestMemoryPicture(t *testing.T) {
	rows := []memRow{
		{Name: "Vulkan0", Weights: 600 << 20, Context: 200 << 20, Compute: 100 << 20, Free: 2 << 30, Total: 2 << 30, Target: 1 << 30, Fits: true, LeavesTarget: true},
		{Name: "RPC0[127.0.0.1:50052]", Weights: 3 << 30, Free: 2 << 30, Total: 4 << 30, Target: 1 << 30},
		{Name: "CUDA0", Weights: 1500 << 20, Free: 2 << 30, Total: 2 << 30, Target: 1 << 30, Fits: true},
		{Name: "host", Host: true, Weights: 100 << 20, Mapped: 17 << 30, Free: 30 << 30, Total: 32 << 30, Fits: true, LeavesTarget: true},
	}
	var out bytes.Buffer
	drawMemory(&out, rows, 80)
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 1+len(rows) {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	for i, want := range []string{"|", "over by 1.00G", "fits, not -fitt", "+17.0G mapped"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("row %d lacks %q: %q", i, want, lines[i+1])
		}
	}
	bar := lines[1][strings.Index(lines[1], "[")+1 : strings.Index(lines[1], "]")]
	if strings.Count(bar, "#") == 0 || strings.Count(bar, "=") == 0 || strings.Count(bar, "+") == 0 ||
		strings.Index(bar, "#") > strings.Index(bar, "=") || strings.Index(bar, "=") > strings.Index(bar, "+") || strings.Index(bar, "|") != len(bar)/2 {
		t.Errorf("Vulkan0's bar %q: weights, context, compute, then the target at half", bar)
	}
	// from a real plan: the rows are its usage, in JSON as well
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 256})
	rep := planJSONOf(t, path, "-ngl", "2", "-fitt", "1000")
	if len(rep.Memory) != len(rep.Plan.Usage) && len(rep.Memory) != len(rep.Plan.Usage)+1 {
		t.Fatalf("memory %+v usage %+v", rep.Memory, rep.Plan.Usage)
	}
	host := rep.Memory[len(rep.Memory)-1]
	if !host.Host || host.Free == 0 {
		t.Fatalf("host row %+v", host)
	}
	for _, r := range rep.Memory {
		for _, u := range rep.Plan.Usage {
			if u.Device == r.Name || r.Host && u.Device == "CPU" {
				if r.Weights != u.Allocated || r.Host && r.Mapped != u.Mapped {
					t.Errorf("row %+v, usage %+v", r, u)
				}
			}
		}
		if !r.Host && r.Target != 1000<<20 {
			t.Errorf("row %+v: target", r)
		}
	}
	// not a terminal: no picture in the text
	out2, err := runCLI(t, "plan", path)
	if err != nil || strings.Contains(out2, "will it fit?") {
		t.Errorf("picture drawn off a terminal: %v", err)
	}
}

// Exit statuses: 130 after SIGINT, 143 after SIGTERM, 2 for a command line
// ggload cannot take, 1 for other errors.
func TestExitCodes(t *testing.T) {
	var sink bytes.Buffer
	for _, c := range []struct {
		err  error
		sig  any
		code int
	}{
		{nil, nil, 0},
		{errHelp, nil, 0},
		{errors.New("boom"), nil, 1},
		{&usageError{"plan", "bad"}, nil, 2},
		{context.Canceled, os.Interrupt, 130},
		{nil, os.Interrupt, 130},
		{context.Canceled, syscall.SIGTERM, 143},
	} {
		if got := exitCode(c.err, c.sig, &sink); got != c.code {
			t.Errorf("%v %v: %d, want %d", c.err, c.sig, got, c.code)
		}
	}
}

// Ctrl-C during a load: the load stops, everything it made is freed, and
// ggload exits 130 (it used to exit 1).
func TestInterruptExits130(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a process cannot be sent SIGINT on Windows")
	}
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 8, Embd: 256, FF: 512, Heads: 2, Vocab: 256})
	cmd := exec.Command(os.Args[0], "load", path, "-dev", "none", "-lm", "none", "--readers", "1", "--progress", "on")
	cmd.Env = append(os.Environ(), asGgloadEnv+"=1", slowProgressEnv+"=20ms")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// the first progress report: the load has begun
	r := bufio.NewReader(stderr)
	var seen bytes.Buffer
	for !strings.Contains(seen.String(), "%") {
		b, err := r.ReadByte()
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("no progress before %v: %s", err, seen.String())
		}
		seen.WriteByte(b)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := readAll(r)
	seen.Write(rest)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("ggload did not stop")
	}
	st := cmd.ProcessState
	if !st.Exited() || st.ExitCode() != 130 {
		t.Fatalf("exit %v (want status 130): %s", st, seen.String())
	}
	if !strings.Contains(seen.String(), "ggload: interrupted:") || !strings.Contains(seen.String(), "load canceled") {
		t.Fatalf("stderr: %s", seen.String())
	}
	if strings.Contains(stdout.String(), "ggload: loaded") {
		t.Fatalf("the load finished:\n%s", stdout.String())
	}
}

func readAll(r *bufio.Reader) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

// --override-kv's list is split as common/arg.cpp splits it: quoted
// fields keep their commas.
func TestParseCSVRow(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"a,b", []string{"a", "b"}},
		{`"a,b",c`, []string{"a,b", "c"}},
		{`x"y,"z""w"`, []string{`x"y`, `z"w`}},
		{"", []string{""}},
	} {
		if got := parseCSVRow(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}

// Where the only Vulkan device is a software one that ggml hides,
// --list-devices and devices say how to show it.
func TestHiddenSoftwareDeviceHint(t *testing.T) {
	if d := testenv.Vulkan(t); d.Type() != ggml.DeviceGPU || !strings.Contains(d.Description(), "llvmpipe") {
		t.Skipf("%s (%s) is not lavapipe: ggml shows it without being asked", d.Name(), d.Description())
	}
	for _, args := range [][]string{{"--list-devices"}, {"devices"}} {
		cmd := exec.Command(os.Args[0], args...)
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "GGML_VK_VISIBLE_DEVICES=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		cmd.Env = append(cmd.Env, asGgloadEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if !strings.Contains(string(out), "GGML_VK_VISIBLE_DEVICES=0 makes it Vulkan0") {
			t.Errorf("%v: no hint:\n%s", args, out)
		}
	}
}

// Every malformed --rpc endpoint is a command line ggload cannot take
// (exit status 2), refused before anything is dialled.
func TestMalformedEndpoints(t *testing.T) {
	var sink bytes.Buffer
	for _, ep := range []string{"", ",,", "host", "host:", ":50052", "host:abc", "host:99999", "a b:1", "[::1]", "1.2.3.4:0", "h:1,x"} {
		_, err := runCLI(t, "devices", "--rpc", ep)
		if code := exitCode(err, nil, &sink); code != 2 {
			t.Errorf("--rpc %q: exit status %d (%v), want 2", ep, code, err)
		}
	}
	for _, ep := range []string{"h:1", "10.0.0.2:50052", "[::1]:50052", "rpc-host.example:65535"} {
		if err := ggml.CheckRPCEndpoint(ep); err != nil {
			t.Errorf("%q: %v", ep, err)
		}
	}
}

// The help names every place the native libraries are looked for, the
// user cache the scripts install into among them.
func TestHelpNamesLibrarySearch(t *testing.T) {
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Skip(err)
	}
	out, err := runCLI(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GGLOAD_LIB_DIR", "native/lib/<platform>", cache, "beside the executable"} {
		if !strings.Contains(out, want) {
			t.Errorf("the help does not name %q:\n%s", want, out)
		}
	}
}

// The context options reach the plan: its context, its memory breakdown
// (the compute buffers' included) and the table llama.cpp prints.
func TestContextOptions(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 4, Embd: 256, FF: 512, Heads: 4, HeadsKV: 2, Vocab: 256})
	out, err := runCLI(t, "plan", path, "-dev", "none", "-c", "1000", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on", "-ub", "128", "--json")
	if err != nil {
		t.Fatal(err)
	}
	type jContext struct {
		NCtx      uint32 `json:"n_ctx"`
		NCtxSeq   uint32 `json:"n_ctx_seq"`
		NSeq      uint32 `json:"n_seq"`
		NUBatch   uint32 `json:"n_ubatch"`
		TypeK     string `json:"type_k"`
		FlashAttn string `json:"flash_attn"`
		Caches    []struct {
			Bytes uint64 `json:"bytes"`
		}
	}
	var top struct {
		Plan struct {
			Context         jContext `json:"context"`
			MemoryBreakdown []struct {
				BufferType string  `json:"buffer_type"`
				Context    uint64  `json:"context"`
				Compute    *uint64 `json:"compute"`
			} `json:"memory_breakdown"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatal(err)
	}
	j := top.Plan
	c := j.Context
	// n_ctx 1000 pads to 1024, two sequences of 512
	if c.NCtx != 1024 || c.NCtxSeq != 512 || c.NSeq != 2 || c.NUBatch != 128 || c.TypeK != "q8_0" || c.FlashAttn != "enabled" || len(c.Caches) != 1 {
		t.Fatalf("context %+v", c)
	}
	// K and V: 4 layers × [64·2 heads, 512 cells, 2 streams] of q8_0 (34 bytes per 32)
	want := uint64(4 * 2 * 128 / 32 * 34 * 512 * 2)
	if c.Caches[0].Bytes != want || len(j.MemoryBreakdown) != 1 || j.MemoryBreakdown[0].Context != want || j.MemoryBreakdown[0].Compute == nil || *j.MemoryBreakdown[0].Compute == 0 {
		t.Fatalf("cache %d bytes, want %d; breakdown %+v", c.Caches[0].Bytes, want, j.MemoryBreakdown)
	}
	text, err := runCLI(t, "plan", path, "-dev", "none", "-c", "1000")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"common_memory_breakdown_print: | memory breakdown [MiB]", "common_memory_breakdown_print: |   - Host", "llama_kv_cache: size =", "sched_reserve:        CPU compute buffer size ="} {
		if !strings.Contains(text, w) {
			t.Errorf("no %q in\n%s", w, text)
		}
	}
	for _, bad := range [][]string{{"-ctk", "q3_k"}, {"-fa", "maybe"}, {"-b", "0"}, {"-c", "99999999999"}} {
		if _, err := runCLI(t, append([]string{"plan", path}, bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// refused by llama.cpp's own checks, with its words: the weights are
	// planned, the context is not
	out, err = runCLI(t, "plan", path, "-dev", "none", "-ctv", "q8_0", "-fa", "off")
	var refused *refusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "quantized V cache requires flash_attn to be enabled") {
		t.Fatalf("a context llama.cpp refuses ends with %v", err)
	}
	if !strings.Contains(out, "no context: ") || !strings.Contains(out, "quantized V cache requires flash_attn to be enabled") || strings.Contains(out, "memory breakdown") {
		t.Errorf("a context llama.cpp refuses:\n%s", out)
	}
}

// A plan or load whose context llama.cpp would refuse exits 1 with
// llama.cpp's reason (as its tools do when llama_init_from_model fails);
// the report, and --json's document, still carry what was worked out.
func TestRefusedContextExits1(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 256})
	for _, args := range [][]string{
		{"plan", path, "-dev", "none", "-np", "100000"},
		{"plan", path, "-dev", "none", "-np", "100000", "--json"},
		{"load", path, "-dev", "none", "-np", "100000"},
		{"load", path, "-dev", "none", "-np", "100000", "--json"},
		{"plan", path, "-dev", "none", "-ctv", "q8_0", "-fa", "off", "--json"},
	} {
		out, err := runCLI(t, args...)
		var refused *refusedError
		if !errors.As(err, &refused) {
			t.Errorf("%v: ends with %v, want llama.cpp's refusal", args, err)
			continue
		}
		if code := exitCode(err, nil, io.Discard); code != 1 {
			t.Errorf("%v: exit status %d", args, code)
		}
		if slices.Contains(args, "-np") && !strings.Contains(err.Error(), "n_seq_max must be <= 256") {
			t.Errorf("%v: %v does not give llama.cpp's reason", args, err)
		}
		if slices.Contains(args, "--json") {
			var doc map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["fit"] == nil {
				t.Errorf("%v: the JSON document is gone (%v):\n%s", args, err, out)
			}
		} else if args[0] == "plan" && !strings.Contains(out, "no context: ") || !strings.Contains(out, "model buffer size") {
			t.Errorf("%v: the report is gone:\n%s", args, out)
		}
	}
	// a context llama.cpp makes ends well
	if _, err := runCLI(t, "plan", path, "-dev", "none", "-np", "4"); err != nil {
		t.Fatal(err)
	}
}

// -fit shrinks an unset context first (down to -fitc), and --json says
// what llama.cpp's fit leaves: status, n_ctx, n_gpu_layers; -c 0 given
// explicitly keeps the full context, as in llama.cpp.
func TestFitShrinksContextJSON(t *testing.T) {
	vk := testenv.Vulkan(t)
	path := writeSynth(t, cliDense) // trained on 4096 tokens
	free, _ := vk.Memory()
	full := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", "0")
	least := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", "0", "-c", "256")
	hi, lo := full.Fit.Devices[0].Before, least.Fit.Devices[0].Before
	if full.Fit.NCtx != 4096 || least.Fit.NCtx != 256 || hi <= lo {
		t.Fatalf("n_ctx %d, %d: %d and %d bytes", full.Fit.NCtx, least.Fit.NCtx, hi, lo)
	}
	target := strconv.FormatUint((free-(lo+(hi-lo)/2))>>20, 10)
	rep := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", target, "-fitc", "256")
	f := rep.Fit
	if f.Status != "success" || f.Outcome != place.FitAdjusted || f.NCtx <= 256 || f.NCtx >= 4096 || f.NCtx%256 != 0 || f.NGPULayers != -1 || len(f.Overrides) != 0 || len(f.Changed) != 1 || f.Changed[0] != "n_ctx" {
		t.Fatalf("fit %+v:\n%s", f, strings.Join(f.Lines, "\n"))
	}
	rep = planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", target, "-fitc", "256", "-c", "0")
	if f = rep.Fit; f.NCtx != 4096 || f.Changed[0] != "n_gpu_layers" || !strings.Contains(strings.Join(f.Lines, "\n"), "the full context of 4096 was asked for (-c 0)") {
		t.Fatalf("-c 0: fit %+v:\n%s", f, strings.Join(f.Lines, "\n"))
	}
}

// -md: the draft model counts in -fit (its context follows the main
// one's), so the same target leaves a smaller context; plan shows the
// draft's memory, and --json carries its plan.
func TestFitWithDraftModel(t *testing.T) {
	vk := testenv.Vulkan(t)
	path := writeSynth(t, cliDense) // trained on 4096 tokens
	free, _ := vk.Memory()
	full := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", "0")
	least := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", "0", "-c", "256")
	hi, lo := full.Fit.Devices[0].Before, least.Fit.Devices[0].Before
	target := strconv.FormatUint((free-(lo+(hi-lo)*3/4))>>20, 10)
	alone := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", target, "-fitc", "256")
	with := planJSONOf(t, path, "-dev", "Vulkan0", "-fitt", target, "-fitc", "256", "-md", path, "-ngld", "all")
	lines := strings.Join(with.Fit.Lines, "\n")
	if with.Fit.NCtx >= alone.Fit.NCtx || !strings.Contains(lines, "the extra model at -c 4096") {
		t.Fatalf("n_ctx %d alone, %d with -md:\n%s", alone.Fit.NCtx, with.Fit.NCtx, lines)
	}
	out, err := runCLI(t, "plan", path, "-dev", "Vulkan0", "-fitt", target, "-fitc", "256", "-md", path)
	if err != nil || !strings.Contains(out, "draft model "+path+" (-md), beside it at -c "+strconv.Itoa(int(with.Fit.NCtx))) {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := runCLI(t, "plan", path, "-md", filepath.Join(t.TempDir(), "missing.gguf")); err == nil || !strings.Contains(err.Error(), "-md") {
		t.Fatalf("a missing draft: %v", err)
	}
}

// The draft model's own options, as llama.cpp spells them: -cmoed and
// -ncmoed keep its experts on the CPU (all, or the first N layers'),
// -ctkd and -ctvd set its cache types; the main model keeps its own.
func TestDraftModelOptions(t *testing.T) {
	testenv.Vulkan(t)
	path := writeSynth(t, synth.Spec{Layers: 4, Embd: 128, FF: 256, Heads: 2, Vocab: 256, Experts: 4, ExpertsUsed: 2})
	type jsonPlan struct {
		Tensors []struct {
			Name       string `json:"name"`
			BufferType string `json:"buffer_type"`
		} `json:"tensors"`
		Context struct {
			TypeK string `json:"type_k"`
			TypeV string `json:"type_v"`
		} `json:"context"`
	}
	plans := func(args ...string) (main, draft jsonPlan) {
		t.Helper()
		out, err := runCLI(t, append([]string{"plan", path, "--json", "-dev", "Vulkan0", "-ngl", "all", "-ngld", "all", "-fit", "off", "-md", path}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Plan  jsonPlan `json:"plan"`
			Draft jsonPlan `json:"draft"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return rep.Plan, rep.Draft
	}
	onCPU := func(p jsonPlan) (n int, first []string) {
		for _, tn := range p.Tensors {
			if strings.Contains(tn.Name, "_exps") && strings.HasPrefix(tn.BufferType, "CPU") {
				n++
				if strings.HasPrefix(tn.Name, "blk.0.") {
					first = append(first, tn.Name)
				}
			}
		}
		return n, first
	}
	main, draft := plans("-cmoed")
	if n, _ := onCPU(main); n != 0 {
		t.Errorf("-cmoed moved %d of the main model's experts to the CPU", n)
	}
	if n, _ := onCPU(draft); n != 4*3 {
		t.Errorf("-cmoed: %d of the draft's 12 expert tensors on the CPU", n)
	}
	_, draft = plans("-ncmoed", "1")
	if n, first := onCPU(draft); n != 3 || len(first) != 3 {
		t.Errorf("-ncmoed 1: %d expert tensors on the CPU (%v), want layer 0's 3", n, first)
	}
	main, draft = plans("-ctkd", "q8_0", "-ctvd", "q8_0", "-fa", "on")
	if draft.Context.TypeK != "q8_0" || draft.Context.TypeV != "q8_0" || main.Context.TypeK != "f16" {
		t.Errorf("-ctkd/-ctvd q8_0: draft K %s V %s, main K %s", draft.Context.TypeK, draft.Context.TypeV, main.Context.TypeK)
	}
	if _, err := runCLI(t, "plan", path, "-md", path, "-ctkd", "q3_k"); err == nil || !strings.Contains(err.Error(), "-ctkd") {
		t.Errorf("-ctkd q3_k: %v", err)
	}
	if _, err := runCLI(t, "plan", path, "-md", path, "-ncmoed", "-1"); err == nil || !strings.Contains(err.Error(), "-ncmoed") {
		t.Errorf("-ncmoed -1: %v", err)
	}
}
