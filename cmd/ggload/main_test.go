package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/synth"
	"github.com/ggload/ggload/internal/testenv"
	"github.com/ggload/ggload/loader/gguf"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.KillAll()
	os.Exit(code)
}

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
}

func writeSynth(t *testing.T, spec synth.Spec) string {
	t.Helper()
	rt := testenv.Runtime(t)
	path, err := spec.Write(rt, filepath.Join(t.TempDir(), "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPlanCommand(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 4, Embd: 128, FF: 256, Heads: 2, Vocab: 256, Experts: 4, ExpertsUsed: 2})
	out, err := runCLI(t, "plan", path, "-ngl", "3", "--cpu-moe", "--tensors", "-v")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"layers       0-1 CPU, 2-3 ", "llama.cpp's report:", "offloading 2 repeating layers to GPU", "model buffer size", "per device:", "blk.3.ffn_up_exps.weight", "override"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	out, err = runCLI(t, "plan", "--json", "--fit", path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Plan struct {
			Layers  []string `json:"layer_devices"`
			Tensors []struct {
				Name, BufferType string
			} `json:"tensors"`
			Buffers []struct {
				Name string
				Size uint64
			} `json:"buffers"`
		} `json:"plan"`
		Fit []string `json:"fit"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Plan.Layers) != 5 || len(rep.Plan.Tensors) == 0 || len(rep.Plan.Buffers) == 0 || len(rep.Fit) == 0 {
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
