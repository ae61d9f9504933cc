package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) {
	// tests that need ggload as a process of its own (signals, exit
	// codes) run this binary as ggload
	if os.Getenv(asGgloadEnv) == "1" {
		if d, err := time.ParseDuration(os.Getenv(slowProgressEnv)); err == nil {
			onProgress = func(done, total uint64) { time.Sleep(d) }
		}
		main()
	}
	testenv.Main(m)
}

const (
	asGgloadEnv     = "GGLOAD_TEST_AS_GGLOAD"
	slowProgressEnv = "GGLOAD_TEST_SLOW_PROGRESS"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), err
}

func TestDevicesJSON(t *testing.T) {
	rt := testenv.Runtime(t)
	out, err := runCLI(t, "devices", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep devicesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Version != rt.Version() || len(rep.Devices) != len(rt.Devices()) {
		t.Fatalf("report %+v", rep)
	}
	var cpu *deviceInfo
	for i := range rep.Devices {
		if rep.Devices[i].Type == "CPU" {
			cpu = &rep.Devices[i]
		}
	}
	if cpu == nil || cpu.MemoryTotal == 0 || !cpu.Caps.BufferFromHostPtr || len(cpu.BufferTypes) == 0 || cpu.BufferTypes[0].Name != "CPU" || !cpu.BufferTypes[0].Host {
		t.Fatalf("CPU entry %+v", cpu)
	}
}

func TestDevicesText(t *testing.T) {
	testenv.Runtime(t)
	out, err := runCLI(t, "devices")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ggml 0.25.1", "CPU", "caps", "buffer type"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	if _, err := runCLI(t, "frobnicate"); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Fatalf("got %v", err)
	}
}

func writeTestModel(t *testing.T) string {
	t.Helper()
	w := gguf.NewWriter()
	if err := w.Set(gguf.KeyArchitecture, gguf.String("llama")); err != nil {
		t.Fatal(err)
	}
	toks, _ := gguf.Array([]string{"a", "b", "c"})
	if err := w.Set("tokenizer.ggml.tokens", toks); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"blk.10.attn_q.weight", "blk.2.attn_q.weight", "token_embd.weight"} {
		if err := w.AddTensorBytes(n, ggml.TypeF32, []int64{4, 2}, make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestInspect(t *testing.T) {
	path := writeTestModel(t)
	out, err := runCLI(t, "inspect", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GGUF v3", "architecture llama", "arr[str,3]", "blk.2.attn_q.weight", "[4, 2]"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Index(out, "blk.2.attn_q") > strings.Index(out, "blk.10.attn_q") {
		t.Error("tensors not in layer order")
	}
	out, err = runCLI(t, "inspect", "--json", "--full", path)
	if err != nil {
		t.Fatal(err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tensors) != 3 || rep.KV[1].Length != 3 || rep.Bytes != 96 {
		t.Fatalf("%+v", rep)
	}
	if vals, ok := rep.KV[1].Value.([]any); !ok || len(vals) != 3 || vals[2] != "c" {
		t.Fatalf("full array %v", rep.KV[1].Value)
	}
	if _, err := runCLI(t, "inspect", filepath.Join(t.TempDir(), "none.gguf")); err == nil {
		t.Fatal("missing file accepted")
	}
	// a file that is not split, with another argument: refused, not ignored
	if _, err := runCLI(t, "inspect", path, filepath.Join(t.TempDir(), "nonexistent.gguf")); err == nil || !strings.Contains(err.Error(), "is not split, but 2 files were given") {
		t.Fatalf("an extra argument: %v", err)
	}
}

func writeSynth(t *testing.T, spec synth.Spec) string {
	t.Helper()
	return testenv.ModelFile(t, testenv.Runtime(t), spec)
}

func TestPlanCommand(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 4, Embd: 128, FF: 256, Heads: 2, Vocab: 256, Experts: 4, ExpertsUsed: 2})
	out, err := runCLI(t, "plan", path, "-ngl", "3", "--cpu-moe", "--tensors", "-v")
	if err != nil {
		t.Fatal(err)
	}
	wants := []string{"llama.cpp's report", "model buffer size", "per device:", "blk.3.ffn_up_exps.weight", "override", "fit (-fit on", "placement    exact"}
	if len(testenv.GPUs(t)) > 0 || len(testenv.Runtime(t).RPCEndpoints()) > 0 {
		wants = append(wants, "layers       0-1 CPU, 2-3 ", "offloading 2 repeating layers to GPU")
	} else {
		wants = append(wants, "layers       0-3 CPU, output CPU")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	out, err = runCLI(t, "plan", "--json", "--fit", path)
	if err != nil {
		t.Fatal(err)
	}
	var rep planJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Plan.Layers) != 5 || len(rep.Plan.Tensors) == 0 || len(rep.Plan.Buffers) == 0 || !rep.Fit.Enabled || len(rep.Fit.Lines) == 0 || len(rep.Memory) == 0 {
		t.Fatalf("%+v", rep)
	}
	for _, bad := range [][]string{
		{"plan", path, "-ngl", "many"},
		{"plan", path, "-sm", "diagonal"},
		{"plan", path, "--load-mode", "teleport"},
		{"plan", path, "-ot", "noequals"},
		{"plan", path, "-ts", "1,x"},
		{"plan"},
	} {
		if _, err := runCLI(t, bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// planJSON is what plan --json prints, as far as the tests read it.
type planJSON struct {
	Plan struct {
		Arch      string   `json:"architecture"`
		Exact     bool     `json:"exact"`
		Placement string   `json:"placement"`
		Layers    []string `json:"layer_devices"`
		GPULayers int      `json:"act_gpu_layers"`
		LoadMode  string   `json:"load_mode"`
		Tensors   []struct {
			Name, BufferType string
			Shape            []int64 `json:"shape"`
			Split            *struct {
				Axis     string `json:"axis"`
				Segments []struct {
					Lengths []int64 `json:"lengths"`
					Repeat  int64   `json:"repeat"`
				} `json:"segments"`
			} `json:"split"`
		} `json:"tensors"`
		TensorDevices []string `json:"tensor_split_devices"`
		Buffers       []struct {
			Name    string
			Size    uint64
			Tensors int    `json:"tensors"`
			Bytes   uint64 `json:"tensor_bytes"`
			Parts   []struct {
				Device string `json:"device"`
				Size   uint64 `json:"size"`
			} `json:"parts"`
		} `json:"buffers"`
		Usage []struct {
			Device    string `json:"device"`
			Allocated uint64 `json:"allocated"`
			Mapped    uint64 `json:"mapped"`
			Free      uint64 `json:"free"`
		} `json:"usage"`
		Log []struct {
			Level, Text, Source string
		} `json:"log"`
		Totals struct {
			FileTensors   int    `json:"file_tensors"`
			FileBytes     uint64 `json:"file_bytes"`
			BufferTensors int    `json:"buffer_tensors"`
			BufferBytes   uint64 `json:"buffer_tensor_bytes"`
			Unused        int    `json:"unused_tensors"`
			Duplicates    int    `json:"duplicate_tensors"`
			DuplicateB    uint64 `json:"duplicate_bytes"`
			UnusedB       uint64 `json:"unused_bytes"`
		} `json:"totals"`
	} `json:"plan"`
	Fit    fitReport `json:"fit"`
	Memory []memRow  `json:"memory"`
	Notes  []string  `json:"notes"`
}

func TestLoadCommand(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 3, Embd: 256, FF: 512, Heads: 2, Vocab: 256, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ8_0})
	out, err := runCLI(t, "load", path, "--load-mode", "none", "--device", "none", "--check-tensors", "--tensors", "--verify")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"print_info: file type   = ", "model buffer size =", "ggload: loaded ", "GB/s", "blk.2.ffn_up.weight", "read", "ggload: verified: "} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	out, err = runCLI(t, "load", path, "--json", "-lm", "mmap", "--staging-size", "64KiB")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Load struct {
			LoadMode string `json:"load_mode"`
			Tensors  []struct {
				Name, Type, Buffer, BufferType, Device string
				Bytes                                  int64
			} `json:"tensors"`
			Buffers []struct {
				Name, BufferType, Device string
				Size                     uint64
				Tensors                  int    `json:"tensors"`
				Bytes                    uint64 `json:"tensor_bytes"`
			} `json:"buffers"`
			Timings struct {
				Total float64 `json:"total_s"`
			} `json:"timings"`
		} `json:"load"`
		Totals struct {
			FileTensors   int    `json:"file_tensors"`
			FileBytes     uint64 `json:"file_bytes"`
			BufferTensors int    `json:"buffer_tensors"`
			BufferBytes   uint64 `json:"buffer_tensor_bytes"`
		} `json:"totals"`
		Fit    fitReport `json:"fit"`
		Memory []memRow  `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(rep.Load.Tensors) != len(m.Weights) || len(rep.Load.Buffers) == 0 || rep.Load.Timings.Total <= 0 || rep.Load.LoadMode != "mmap" || len(rep.Memory) == 0 || !rep.Fit.Enabled {
		t.Fatalf("%+v", rep)
	}
	for _, tn := range rep.Load.Tensors {
		if tn.Buffer == "" || tn.Device == "" || tn.Bytes <= 0 {
			t.Fatalf("tensor %+v", tn)
		}
	}
	// the loaded buffers add up to the model (no duplicates here)
	n, nb := 0, uint64(0)
	for _, b := range rep.Load.Buffers {
		n += b.Tensors
		nb += b.Bytes
	}
	if n != len(m.Weights) || nb != m.NBytes || rep.Totals.BufferTensors != n || rep.Totals.FileTensors != len(m.Weights) {
		t.Fatalf("buffers hold %d tensors, %d bytes; the model %d, %d; totals %+v", n, nb, len(m.Weights), m.NBytes, rep.Totals)
	}
	for _, bad := range [][]string{
		{"load", path, "--staging-size", "lots"},
		{"load", path, "--device", "Nowhere0"},
		{"load", filepath.Join(t.TempDir(), "missing.gguf")},
		{"load"},
	} {
		if _, err := runCLI(t, bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// The demo writes its model once into the user cache directory, loads it
// on every device and reads every tensor back.
func TestDemo(t *testing.T) {
	rt := testenv.Runtime(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out, err := runCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ggload demo:", "== CPU ==", "summary:", "identical to the file", "the lines above are llama.cpp's, word for word", "== run ==", "weights are random"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// the demo ends by running its model: words of its vocabulary
	if m := regexp.MustCompile(`\$ ggload run .*\n ` + demoPrompt + `(( [A-Za-z]+)+)\n`).FindStringSubmatch(out); m == nil || len(strings.Fields(m[1])) != 24 {
		t.Errorf("the demo's run -p did not print 24 words after its prompt:\n%s", out)
	}
	for _, d := range rt.Devices() {
		if d.Type() == ggml.DeviceGPU && !strings.Contains(out, "== "+d.Name()+" ==") {
			t.Errorf("device %s not in the demo", d.Name())
		}
	}
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || !strings.HasPrefix(path, os.Getenv("XDG_CACHE_HOME")) {
		t.Fatalf("demo model %s: %v", path, err)
	}
	if _, err := runCLI(t); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(path); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("the demo model was written again")
	}
}
