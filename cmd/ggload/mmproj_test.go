package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/mtmd"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// mmprojCLIFiles synthesizes a gemma3 projector (clip the judge) and two
// text models: one whose input embeddings are as wide as the projector's,
// one of another width.
func mmprojCLIFiles(t *testing.T, o *mtmd.Oracle) (proj, model, other string, width int64) {
	t.Helper()
	pin, err := synth.ReadProjectorPin(testenv.SourceTree(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := synth.NewProjector(pin, "gemma3", dir, o.Judge, synth.ProjectorOptions{ProjDim: 64, Distinct: true}); err != nil {
		t.Fatal(err)
	}
	proj = filepath.Join(dir, synth.ProjectorFileName("gemma3"))
	f, err := gguf.Open(proj)
	if err != nil {
		t.Fatal(err)
	}
	h, err := place.ReadMmprojHeader(proj, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	width = h.Contexts[0].Embd
	spec := func(embd int64) synth.Spec {
		return synth.Spec{Layers: 1, Embd: embd, FF: 64, Heads: 2, Vocab: 300, Weights: ggml.TypeF16, Embeddings: ggml.TypeF16}
	}
	return proj, writeSynth(t, spec(width)), writeSynth(t, spec(width+2)), width
}

// mmprojJSON is what plan and load --json say of the projector.
type mmprojJSON struct {
	Memory   []memRow        `json:"memory"`
	Adapters []adapterReport `json:"adapters"`
}

// -mm on plan and load: the projector's tensors and buffers in --json are
// where libmtmd's clip puts them, with -mmdev none, --no-mmproj-offload
// and the default device; the memory rows count its weights on its
// device; load reads it in three load modes and --verify reads it back;
// the pin's environment variables set the options; run refuses -mm; a
// projector for another model is refused naming the file and both widths.
func TestMmprojCLI(t *testing.T) {
	o := mtmd.Start(t)
	proj, model, other, width := mmprojCLIFiles(t, o)
	rt := testenv.Runtime(t)

	configs := []struct {
		args []string
		load mtmd.Load
	}{
		{[]string{"-mmdev", "none"}, mtmd.Load{}},
		{[]string{"--no-mmproj-offload"}, mtmd.Load{}},
		{nil, mtmd.Load{UseGPU: true}},
	}
	for _, c := range configs {
		args := append([]string{"plan", model, "-mm", proj, "--json"}, c.args...)
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var got mmprojJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		r, err := o.Load(proj, c.load)
		if err != nil || r.Err != "" || r.Crashed {
			t.Fatalf("the oracle: %v %s", err, r.Err)
		}
		if len(got.Adapters) != 1 || got.Adapters[0].Kind != "mmproj" || got.Adapters[0].Path != proj {
			t.Fatalf("%v: adapters %+v", c.args, got.Adapters)
		}
		a := got.Adapters[0]
		if len(a.Tensors) != len(r.Tensors) {
			t.Fatalf("%v: %d tensors in --json, clip loads %d", c.args, len(a.Tensors), len(r.Tensors))
		}
		dev := ""
		for i, tt := range r.Tensors {
			at := a.Tensors[i]
			if at.Name != tt.Name || at.BufferType != tt.BufferType || tt.Device != "-" && at.Device != tt.Device {
				t.Errorf("%v: tensor %d: --json %+v, clip %+v", c.args, i, at, tt)
			}
			dev = at.Device
		}
		if len(a.Buffers) != len(r.Buffers) {
			t.Fatalf("%v: buffers %+v, clip's %+v", c.args, a.Buffers, r.Buffers)
		}
		for i, b := range r.Buffers {
			ab := a.Buffers[i]
			if ab.Name != b.Name || ab.BufferType != b.BufferType || ab.Size != uint64(b.Size) {
				t.Errorf("%v: buffer %+v, clip's %+v", c.args, ab, b)
			}
		}
		// clip counts the weights on the device it runs on
		if w := r.Contexts[0].Weights; w[dev] == 0 {
			t.Errorf("%v: --json says %s, clip counts its weights on %v", c.args, dev, w)
		}
		var counted uint64
		for _, row := range got.Memory {
			if row.Projector > 0 && (row.Name == dev || row.Host && dev == rt.CPUDevice().Name()) {
				counted += row.Projector
			}
		}
		if counted != a.Buffers[0].Size {
			t.Errorf("%v: the memory rows count %d bytes of projector on %s, its buffer is %d: %+v", c.args, counted, dev, a.Buffers[0].Size, got.Memory)
		}
	}

	// plan's text: clip's lines and the buffer
	out, err := runCLI(t, "plan", model, "-mm", proj, "--no-mmproj-offload")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"multimodal projector " + proj, "clip_ctx: CLIP using CPU backend", "load_hparams: projector:          gemma3", "clip_model_loader: has vision encoder", "CPU buffer size ="} {
		if !strings.Contains(out, want) {
			t.Errorf("plan's text lacks %q:\n%s", want, out)
		}
	}

	// load in three load modes, --verify
	n := 0
	if r, err := o.Load(proj, mtmd.Load{}); err == nil {
		n = len(r.Tensors)
	}
	for _, lm := range []string{"none", "mmap", "dio"} {
		out, err := runCLI(t, "load", model, "-mm", proj, "-lm", lm, "--verify")
		if err != nil {
			t.Fatalf("load -lm %s: %v", lm, err)
		}
		if want := fmt.Sprintf("ggload: verified: %d projector tensors read back", n); !strings.Contains(out, want) {
			t.Errorf("load -lm %s: no %q:\n%s", lm, want, out)
		}
	}
	out, err = runCLI(t, "load", model, "-mm", proj, "--verify", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var lj mmprojJSON
	if err := json.Unmarshal([]byte(out), &lj); err != nil {
		t.Fatal(err)
	}
	if len(lj.Adapters) != 1 || lj.Adapters[0].Verified != n || len(lj.Adapters[0].Tensors) != n {
		t.Errorf("load --json --verify: %+v, want %d tensors verified", lj.Adapters, n)
	}

	// the environment: LLAMA_ARG_MMPROJ and MTMD_BACKEND_DEVICE
	t.Run("env", func(t *testing.T) {
		t.Setenv("LLAMA_ARG_MMPROJ", proj)
		t.Setenv("MTMD_BACKEND_DEVICE", "none")
		out, err := runCLI(t, "plan", model)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "multimodal projector "+proj) || !strings.Contains(out, "CLIP using CPU backend") {
			t.Errorf("LLAMA_ARG_MMPROJ and MTMD_BACKEND_DEVICE=none:\n%s", out)
		}
	})

	// -mmu downloads as -mu does: into llama.cpp's cache, or to -mm's path
	t.Run("mmu", func(t *testing.T) {
		url, certFile, _ := servedModel(t, proj, "")
		cache := t.TempDir()
		env := []string{"SSL_CERT_FILE=" + certFile, "LLAMA_CACHE=" + cache}
		local := filepath.Join(cache, filepath.Base(proj))
		to := filepath.Join(t.TempDir(), "given.gguf")
		for _, c := range []struct {
			args  []string
			where string
		}{{[]string{"-mmu", url}, local}, {[]string{"-mmu", url, "-mm", to}, to}} {
			args := append([]string{"load", model, "--verify", "-mmdev", "none"}, c.args...)
			out, errOut, err := ggloadRun(t, env, args...)
			if err != nil || !strings.Contains(out, "multimodal projector "+c.where) || !strings.Contains(out, "projector tensors read back") {
				t.Fatalf("%v: %v\n%s%s", args, err, out, errOut)
			}
			got, err := os.ReadFile(c.where)
			if want, _ := os.ReadFile(proj); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%v: the download at %s differs from the file (%v)", args, c.where, err)
			}
		}
	})

	// refusals
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"plan", other, "-mm", proj}, []string{proj, fmt.Sprint(width), fmt.Sprint(width + 2)}},
		{[]string{"plan", model, "-mm", proj, "-mmdev", "A,B"}, []string{"only one device may be specified for mmproj"}},
		{[]string{"plan", model, "-mm", proj, "-mmdev", "NoSuchDevice0"}, []string{"-mmdev", "NoSuchDevice0"}},
		{[]string{"run", model, "-mm", proj, "--tokens", "1"}, []string{"-mm", "no image or audio"}},
		{[]string{"plan", model, "-mmu", "ftp://x/y.gguf"}, []string{"ftp"}},
	} {
		_, err := runCLI(t, c.args...)
		if err == nil {
			t.Errorf("%v accepted", c.args)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not say %q", c.args, err, w)
			}
		}
	}
}
