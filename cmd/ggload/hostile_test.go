package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/vocab"
)

// What run does with hostile input (issue cases): outputs that are
// inputs, endless prompts, errors mid-run, non-finite logits, bytes that
// are not UTF-8, adapters of types the kernels cannot take.

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// exitOf is a child's exit status (0 when it ended well).
func exitOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// An output file is never one of run's inputs, whatever names it: the
// model (mapped, where truncating it killed the run with SIGBUS and left
// it empty, or read), a LoRA adapter, a control vector, through a
// symbolic or a hard link; nor the other output.
func TestRunOutputsNeverInputs(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300})
	dir := t.TempDir()
	adapter := filepath.Join(dir, "lora.gguf")
	writeAdapter(t, path, adapter)
	cvec := filepath.Join(dir, "cvec.gguf")
	writeDirections(t, cvec, 1, 128)
	sym := filepath.Join(dir, "sym.f32")
	if err := os.Symlink(path, sym); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.f32")
	if err := os.Link(path, hard); err != nil {
		t.Fatal(err)
	}
	inputs := []string{path, adapter, cvec}
	sums := map[string][32]byte{}
	for _, p := range inputs {
		sums[p] = fileSum(t, p)
	}
	base := []string{"run", path, "-dev", "none", "--tokens", "1,2,3", "-n", "2"}
	same := filepath.Join(dir, "both.f32")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--logits-out", path}, "is the model " + path},
		{[]string{"--logits-out", path, "-lm", "none"}, "is the model"},
		{[]string{"--embd-out", path}, "is the model"},
		{[]string{"--logits-out", sym}, "is the model"},
		{[]string{"--logits-out", hard, "-lm", "none"}, "is the model"},
		{[]string{"--logits-out", adapter, "--lora", adapter}, "is the LoRA adapter " + adapter},
		{[]string{"--embd-out", cvec, "--control-vector", cvec}, "is the control vector " + cvec},
		{[]string{"--logits-out", same, "--embd-out", same}, "are the same file"},
	} {
		_, errOut, err := ggloadRun(t, nil, append(append([]string{}, base...), c.args...)...)
		if exitOf(err) != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want 1 and %q:\n%s", c.args, exitOf(err), c.want, errOut)
		}
	}
	for _, p := range inputs {
		if fileSum(t, p) != sums[p] {
			t.Errorf("%s was written", p)
		}
	}
	if _, err := os.Stat(same); err == nil {
		t.Errorf("%s was made", same)
	}
	// a device is written in place
	if _, errOut, err := ggloadRun(t, nil, append(append([]string{}, base...), "--logits-out", os.DevNull)...); err != nil {
		t.Errorf("--logits-out %s: %v\n%s", os.DevNull, err, errOut)
	}
}

// Outputs are written beside their destination and renamed into place:
// a run that fails leaves the file there as it was, and no other.
func TestRunFailureLeavesOutputs(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300})
	dir := t.TempDir()
	out := filepath.Join(dir, "logits.f32")
	if err := os.WriteFile(out, []byte("the last run's"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a token past the vocabulary fails the prompt's decode, after the
	// output was opened
	_, errOut, err := ggloadRun(t, nil, "run", path, "-dev", "none", "--tokens", "1,300", "--logits-out", out)
	if exitOf(err) != 1 || !strings.Contains(errOut, "invalid token[1] = 300") {
		t.Fatalf("exit %d: %s", exitOf(err), errOut)
	}
	if b, _ := os.ReadFile(out); string(b) != "the last run's" {
		t.Errorf("a failed run left %q", b)
	}
	if _, err := runCLI(t, "run", path, "-dev", "none", "--tokens", "1,2", "--logits-out", out); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() != 300*4 || fi.Mode().Perm()&0o044 == 0 {
		t.Errorf("the run's output: %v, %v", fi, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files: a temporary file was left", len(entries))
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A prompt read from a file or the standard input is bounded, with an
// error naming the limit: /dev/zero no longer grows the process until Go
// dies out of memory.
func TestPromptInputBounded(t *testing.T) {
	testenv.Runtime(t)
	model := filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-llama-spm.gguf")
	if _, err := runCLI(t, "run", model, "-f", "/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than 64MiB, ggload's limit on a prompt") {
		t.Errorf("run -f /dev/zero: %v", err)
	}
	if _, err := runCLI(t, "tokenize", model, "-f", "/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than 64MiB") {
		t.Errorf("tokenize -f /dev/zero: %v", err)
	}
	defer func(r io.Reader) { tokenizeStdin = r }(tokenizeStdin)
	tokenizeStdin = zeros{}
	if _, err := runCLI(t, "tokenize", model, "--stdin"); err == nil || !strings.Contains(err.Error(), "the standard input is larger than 64MiB") {
		t.Errorf("tokenize --stdin of endless zeros: %v", err)
	}
	// within the limit, as before
	tokenizeStdin = strings.NewReader("Hello world")
	if out, err := runCLI(t, "tokenize", model, "--stdin", "--ids"); err != nil || !strings.HasPrefix(out, "[1, ") {
		t.Errorf("tokenize --stdin: %v %q", err, out)
	}
}

// A run that stops on an error prints what it did (text and --json),
// then the error, and exits 1: a full context after six steps.
func TestRunPrintsWhatItDidOnError(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Distinct: true})
	ids := make([]string, 250)
	for i := range ids {
		ids[i] = strconv.Itoa(1 + i)
	}
	args := []string{"run", path, "-dev", "none", "-c", "256", "--tokens", strings.Join(ids, ","), "-n", "10"}
	out, errOut, err := ggloadRun(t, nil, args...)
	if exitOf(err) != 1 || !strings.Contains(errOut, "stopped after 6 of 10 steps") || !strings.Contains(errOut, "failed to find a memory slot") {
		t.Fatalf("exit %d:\n%s", exitOf(err), errOut)
	}
	gen := ""
	for _, l := range strings.Split(out, "\n") {
		if g, ok := strings.CutPrefix(l, "ggload: generated: "); ok {
			gen = g
		}
	}
	if len(strings.Split(gen, ",")) != 6 || !strings.Contains(out, "ggload: generation: 6 tokens") {
		t.Errorf("the text report:\n%s", out)
	}
	out, errOut, err = ggloadRun(t, nil, append(args, "--json")...)
	var rep runReport
	if exitOf(err) != 1 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("--json: exit %d: %s\n%s", exitOf(err), out, errOut)
	}
	if len(rep.Generated) != 6 || len(rep.Steps) != 7 || !strings.Contains(rep.Error, "failed to find a memory slot") || rep.NVocab != 300 {
		t.Errorf("--json: %+v", rep)
	}
}

// --all-logits holds the logits once: the run's peak memory stays within
// the logits, the same run without them, and 10% (each run a child
// process, its peak resident memory the kernel's count).
func TestRunAllLogitsPeakMemory(t *testing.T) {
	testenv.Runtime(t)
	const n, nVocab = 512, 32000
	path := writeSynth(t, synth.Spec{Layers: 1, Embd: 64, FF: 128, Heads: 2, Vocab: nVocab})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa((i * 7919) % nVocab)
	}
	peak := func(extra ...string) int64 {
		t.Helper()
		args := append([]string{"run", path, "-dev", "none", "-t", "2", "-c", strconv.Itoa(n), "-b", strconv.Itoa(n), "-ub", "32",
			"--tokens", strings.Join(ids, ","), "--logits-out", os.DevNull}, extra...)
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), asGgloadEnv+"=1")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, errOut.String())
		}
		rss, ok := peakRSS(cmd.ProcessState)
		if !ok {
			t.Skip("no peak RSS of a child here")
		}
		return rss
	}
	without := peak()
	with := peak("--all-logits")
	logits := int64(n * nVocab * 4)
	limit := (without + logits) * 11 / 10
	t.Logf("peak RSS: %d MiB without --all-logits, %d MiB with (%d MiB of logits; limit %d MiB)", without>>20, with>>20, logits>>20, limit>>20)
	if with > limit {
		t.Errorf("--all-logits peaks at %d MiB, past the logits (%d MiB) + the run without them (%d MiB) + 10%%", with>>20, logits>>20, without>>20)
	}
	// (the run without peaks while it plans, before it decodes: the
	// logits may fit under that peak, but not under nothing)
	if with < logits {
		t.Errorf("--all-logits peaks at %d MiB: it cannot hold the %d MiB of logits", with>>20, logits>>20)
	}
}

// writeAdapterOf writes a LoRA adapter of rank 4 for the model's
// attention query and FFN up matrices, its tensors of type typ: zeros,
// or for f32 small values with poison first.
func writeAdapterOf(t *testing.T, model, path string, typ ggml.Type, poison float32) {
	t.Helper()
	m, err := gguf.OpenModel(model)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := gguf.NewWriter()
	for k, v := range map[string]gguf.Value{"general.type": gguf.String("adapter"), gguf.KeyArchitecture: gguf.String(m.Architecture()),
		"adapter.type": gguf.String("lora")} {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	tr, _ := typ.Traits()
	data := func(n int64) []byte {
		b := make([]byte, n*tr.TypeSize)
		if typ == ggml.TypeF32 {
			for i := range n {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(0.01))
			}
			binary.LittleEndian.PutUint32(b, math.Float32bits(poison))
		}
		return b
	}
	for _, wt := range m.Weights {
		if !strings.Contains(wt.Name, "attn_q") && !strings.Contains(wt.Name, "ffn_up") {
			continue
		}
		ne := wt.Shape
		if err := w.AddTensorBytes(wt.Name+".lora_a", typ, []int64{ne[0], 4}, data(ne[0]*4)); err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensorBytes(wt.Name+".lora_b", typ, []int64{4, ne[1]}, data(ne[1]*4)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// An adapter whose tensors the matrix product cannot take (the integer
// types and f64: ggml's CPU has no dot product for them, and llama.cpp
// dies computing them, exit 139) is refused at planning, naming the file,
// the tensor and the type; f32, f16 and bf16 adapters are taken.
func TestLoRATypesRefused(t *testing.T) {
	rt := testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300})
	dir := t.TempDir()
	for _, typ := range []ggml.Type{ggml.TypeI8, ggml.TypeI16, ggml.TypeI32, ggml.TypeI64, ggml.TypeF64} {
		adapter := filepath.Join(dir, typ.String()+".gguf")
		writeAdapterOf(t, path, adapter, typ, 0)
		_, err := runCLI(t, "run", path, "-dev", "none", "--tokens", "1,2,3", "--lora", adapter)
		if !errors.Is(err, place.ErrBadLoRA) || !strings.Contains(err.Error(), adapter) || !strings.Contains(err.Error(), ".lora_a' is "+typ.String()) {
			t.Errorf("a %s adapter: %v", typ, err)
		}
	}
	// the rule is ggml's own table of the CPU's kernels, read from the
	// backend that runs; a negative control
	for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeF16, ggml.TypeBF16} {
		if has, known := rt.CPUMatMulKernel(typ); !has || !known {
			t.Errorf("the CPU's table has no dot product for %s (%v)", typ, known)
		}
		adapter := filepath.Join(dir, typ.String()+".gguf")
		writeAdapterOf(t, path, adapter, typ, 0)
		if _, err := runCLI(t, "run", path, "-dev", "none", "--tokens", "1,2,3", "-n", "1", "--lora", adapter); err != nil {
			t.Errorf("a %s adapter: %v", typ, err)
		}
	}
	if has, known := rt.CPUMatMulKernel(ggml.TypeI32); has || !known {
		t.Errorf("i32: dot product %v, table read %v", has, known)
	}
}

// Logits that are not finite (a LoRA adapter or a control vector holding
// NaN or infinities) are said, naming the adapter and its tensor, or the
// vector: llama.cpp chose token 0 from them again and again without a word.
func TestRunWarnsNonFiniteLogits(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300})
	dir := t.TempDir()
	adapter := filepath.Join(dir, "inf.gguf")
	writeAdapterOf(t, path, adapter, ggml.TypeF32, float32(math.Inf(1)))
	_, errOut, err := ggloadRun(t, nil, "run", path, "-dev", "none", "--tokens", "1,2,3", "-n", "2", "--lora", adapter)
	if err != nil || !strings.Contains(errOut, "rows of logits hold values that are not finite") ||
		!strings.Contains(errOut, "the LoRA adapter "+adapter) || !strings.Contains(errOut, "blk.0.attn_q.weight.lora_a") {
		t.Errorf("a LoRA adapter with an infinity: %v\n%s", err, errOut)
	}
	cvec := filepath.Join(dir, "nan.gguf")
	w := gguf.NewWriter()
	b := make([]byte, 4*128)
	binary.LittleEndian.PutUint32(b[8:], math.Float32bits(float32(math.NaN())))
	if err := w.AddTensorBytes("direction.1", ggml.TypeF32, []int64{128}, b); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(cvec); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := ggloadRun(t, nil, "run", path, "-dev", "none", "--tokens", "1,2,3", "-n", "2", "--control-vector", cvec, "--json")
	var rep runReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || !strings.Contains(errOut, "the control vector "+cvec) ||
		!strings.Contains(errOut, "its scaled directions hold values that are not finite") {
		t.Errorf("a control vector with a NaN: %v\n%s\n%s", err, out, errOut)
	}
	if len(rep.Steps) == 0 || !math.IsNaN(float64(rep.Steps[0].Logit)) || !strings.Contains(out, `"logit": "NaN"`) {
		t.Errorf("--json of a NaN logit: %s", out)
	}
	// finite logits: no word
	if _, errOut, err := ggloadRun(t, nil, "run", path, "-dev", "none", "--tokens", "1,2,3", "-n", "2"); err != nil || strings.Contains(errOut, "not finite") {
		t.Errorf("finite logits: %v\n%s", err, errOut)
	}
}

// --json gives the text and the pieces byte for byte in base64 beside the
// strings, where a byte that is not UTF-8 is U+FFFD: a byte token (<0xFF>,
// forced by -l) comes back whole.
func TestRunJSONKeepsBytes(t *testing.T) {
	path := textModel(t, "llama", "llama-spm")
	v, err := vocab.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ff := int32(-1)
	for id := range v.NTokens() {
		if p, err := v.AppendPiece(nil, int32(id), 0, false); err == nil && bytes.Equal(p, []byte{0xff}) {
			ff = int32(id)
			break
		}
	}
	if ff < 0 {
		t.Fatal("no <0xFF> token")
	}
	out, err := runCLI(t, "run", path, "-dev", "none", "-p", "Hi", "-n", "2", "--temp", "0", "-l", fmt.Sprintf("%d+1000", ff), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep textReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rep.TextBytes, []byte{0xff, 0xff}) || len(rep.GeneratedPiecesBytes) != 2 || !bytes.Equal(rep.GeneratedPiecesBytes[0], []byte{0xff}) ||
		rep.Text != "\ufffd\ufffd" || len(rep.PromptPiecesBytes) != len(rep.PromptTokens) || string(rep.PromptBytes) != "Hi" {
		t.Errorf("--json: text %q (bytes %x), pieces %x", rep.Text, rep.TextBytes, rep.GeneratedPiecesBytes)
	}
}

// The context's sizes: -c off a multiple of 256 is padded, and run and
// plan say so; negative sizes are refused where they are given, naming
// only what was given; the library names the fields, with their values.
func TestContextSizeMessages(t *testing.T) {
	rt := testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", "-1"}, "-c -1: a negative context size: llama.cpp reads it as 4294967295 tokens"},
		{[]string{"-np", "-3"}, "-np -3: n_seq_max must be <= 256: llama.cpp reads a negative -np as 4294967293 sequences"},
		{[]string{"-b", "-5"}, "-b -5: a logical batch of a negative size"},
		{[]string{"-ub", "-5"}, "-ub -5: a physical batch of a negative size"},
	} {
		_, err := runCLI(t, append([]string{"run", path, "--tokens", "1"}, c.args...)...)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "-b 0") || strings.Contains(err.Error(), "-ub 0") {
			t.Errorf("%v: %v", c.args, err)
		}
	}
	_, errOut, err := ggloadRun(t, nil, "run", path, "-dev", "none", "--tokens", "1", "-c", "16")
	if err != nil || !strings.Contains(errOut, "note: -c 16: llama.cpp rounds the context up to a multiple of 256: 256 tokens") {
		t.Errorf("run -c 16: %v\n%s", err, errOut)
	}
	if out, err := runCLI(t, "plan", path, "-dev", "none", "-c", "300"); err != nil || !strings.Contains(out, "note: -c 300: llama.cpp rounds the context up to a multiple of 256: 512 tokens") {
		t.Errorf("plan -c 300: %v", err)
	}
	m := testenv.OpenModel(t, path)
	p, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NParallel: -3}})
	if err != nil {
		t.Fatal(err)
	}
	if e := p.ContextErr; e == nil || !strings.Contains(e.Error(), "-np -3: n_seq_max must be <= 256") || strings.Contains(e.Error(), "-b ") {
		t.Errorf("place: %v", e)
	}
	p, err = place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: -1, NUBatch: -2}})
	if err != nil {
		t.Fatal(err)
	}
	if e := p.ContextErr; e == nil || !strings.Contains(e.Error(), "-c -1, -ub -2: sizes from 0 to") || strings.Contains(e.Error(), "-b ") || strings.Contains(e.Error(), "-np") {
		t.Errorf("place: %v", e)
	}
}

// run --json's keys are snake_case, context_memory's too.
func TestRunJSONSnakeCase(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300})
	out, err := runCLI(t, "run", path, "-dev", "none", "--tokens", "1,2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Memory []map[string]any `json:"context_memory"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Memory) == 0 {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, m := range doc.Memory {
		for _, k := range []string{"what", "buffer_type", "bytes"} {
			if _, ok := m[k]; !ok {
				t.Errorf("context_memory entry %v has no %q", m, k)
			}
		}
	}
	if strings.Contains(out, `"What"`) || strings.Contains(out, `"BufferType"`) {
		t.Errorf("Go field names in --json:\n%s", out)
	}
}

// The draft models of speculative decoding (EAGLE-3, DFlash, the Gemma 4
// assistant) plan and load as llama.cpp loads them: the weights placed,
// the report saying their context is made beside their target model's,
// exit 0; as -md beside a target too. run, which makes no target's
// context, refuses them saying so.
func TestDraftArchitecturesPlanAndLoad(t *testing.T) {
	testenv.Runtime(t)
	vf, err := synth.Vocab(64)
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	dir := t.TempDir()
	target := writeSynth(t, synth.Spec{Layers: 2, Embd: 64, FF: 128, Heads: 2, Vocab: 64})
	for _, a := range []string{"eagle3", "dflash", "gemma4-assistant"} {
		m, err := synth.NewArchModel(a, vf, synth.ArchOptions{Layers: 2})
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		path := filepath.Join(dir, a+".gguf")
		if err := m.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"plan", "load"} {
			out, err := runCLI(t, cmd, path, "-dev", "none")
			if err != nil || !strings.Contains(out, "model buffer size") || !strings.Contains(out, "is a draft model: its context is made beside its target model's") {
				t.Errorf("%s %s: %v\n%s", cmd, a, err, out)
			}
		}
		if _, err := runCLI(t, "plan", target, "-dev", "none", "-md", path); err != nil {
			t.Errorf("plan -md %s: %v", a, err)
		}
		if _, err := runCLI(t, "run", path, "-dev", "none", "--tokens", "1"); err == nil || !errors.Is(err, place.ErrNeedsTarget) {
			t.Errorf("run %s: %v", a, err)
		}
	}
}
