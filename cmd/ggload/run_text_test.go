package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// textModel writes a model of architecture arch, two layers, whose
// tokenizer is the pin's ggml-vocab-<name>.gguf, its weights random (a
// context of 256).
func textModel(t *testing.T, arch, name string) string {
	t.Helper()
	rt := testenv.Runtime(t)
	vf, err := gguf.Open(filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-"+name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	m, err := synth.NewArchModel(arch, vf, synth.ArchOptions{Layers: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	zero, filled := filepath.Join(dir, "zero.gguf"), filepath.Join(dir, name+".gguf")
	if err := m.WriteFile(zero); err != nil {
		t.Fatal(err)
	}
	if err := synth.FillFile(rt, zero, filled, 7); err != nil {
		t.Fatal(err)
	}
	return filled
}

// withKV copies the GGUF at src to a new file with kv set too.
func withKV(t *testing.T, src string, kv []gguf.KV) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for k, v := range f.Pairs() {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range kv {
		if err := w.Set(e.Key, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensorReader(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	dst := strings.TrimSuffix(src, ".gguf") + "-kv.gguf"
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// ggload run -p prints what llama-completion -no-cnv prints, byte for
// byte: the prompt's pieces, each sampled token's, " [end of text]" at an
// end-of-generation token, the final blank line; greedy, seeded with the
// default chain, and with each family of samplers and options, on a
// SentencePiece and a BPE vocabulary.
func TestRunTextMatchesLlamaCompletion(t *testing.T) {
	bin := cxx.Build(t, "llama-completion", []string{"tools/completion/completion.cpp", "tools/completion/main.cpp"})
	promptFile := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(promptFile, []byte("def main():\n\tprint(\"héllo\")  # ünïcode ✓\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"llama-spm", "llama-bpe", "t5"} {
		t.Run(name, func(t *testing.T) {
			var path string
			if name == "t5" {
				// an encoder-decoder: the prompt encoded, the text
				// generated from the decoder's start token
				path = textModel(t, "t5", "llama-spm")
			} else {
				path = textModel(t, "llama", name)
			}
			v, err := vocab.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			cases := [][]string{
				{"-p", "Hello world", "-n", "12", "--temp", "0"},
				{"-p", `The quick\nbrown fox\tjumps`, "-n", "24", "-s", "5"},
				{"-p", `<s> special\x41\x4a\x4 \x 9\x-1\x+f\q \x0x \'\"\\ end\`, "-n", "4", "-s", "8", "-sp"},
			}
			if name == "t5" {
				cases = cases[1:2]
			}
			if name == "llama-spm" {
				// a model's own sampling defaults (general.sampling.*),
				// taken where the options leave them, as
				// common_init_from_params takes them
				own := withKV(t, path, []gguf.KV{
					{Key: "general.sampling.sequence", Value: gguf.String("top_k;min_p;temperature")},
					{Key: "general.sampling.top_k", Value: gguf.Int32(6)},
					{Key: "general.sampling.min_p", Value: gguf.Float32(0.02)},
					{Key: "general.sampling.temp", Value: gguf.Float32(1.7)},
				})
				cases = append(cases,
					[]string{"-p", "Once upon a time", "-n", "24", "-s", "7", "--repeat-penalty", "1.3", "--presence-penalty", "0.4", "--frequency-penalty", "0.2", "--repeat-last-n", "16"},
					[]string{"-p", "A B C", "-n", "16", "-s", "9", "--mirostat", "2", "--mirostat-ent", "3"},
					[]string{"-p", "x", "-n", "16", "-s", "11", "--dry-multiplier", "0.8", "--xtc-probability", "0.5", "--xtc-threshold", "0.05", "--top-nsigma", "1.5"},
					[]string{"-p", "1 2 3", "-n", "16", "-s", "3", "--samplers", "top_k;typ_p;temperature", "--top-k", "8", "--typical", "0.6", "--dynatemp-range", "0.4"},
					[]string{"-f", promptFile, "-n", "8", "-s", "1", "--sampling-seq", "mt", "--min-p", "0.2", "--no-escape"},
					[]string{"-p", "stop here", "-n", "8", "-s", "2", "-l", fmt.Sprint(v.EOS()) + "+100"},
					[]string{"-p", "a", "-n", "-1", "-s", "4", "--top-k", "3"}, // to the full context
					[]string{"-m", own, "-p", "own defaults", "-n", "16", "-s", "21"},
					[]string{"-m", own, "-p", "own defaults", "-n", "16", "-s", "21", "--top-k", "2"})
			}
			for _, c := range cases {
				t.Run(strings.Join(c, " "), func(t *testing.T) {
					model := path
					if c[0] == "-m" {
						model, c = c[1], c[2:]
					}
					args := append([]string{"-m", model, "-t", "2", "-dev", "none", "-no-cnv"}, c...)
					want, err := cxx.Command(t, bin, args...).Output()
					if err != nil {
						t.Fatalf("llama-completion %s: %v", strings.Join(args, " "), err)
					}
					got, err := runCLI(t, append([]string{"run", model, "-t", "2", "-dev", "none"}, c...)...)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal([]byte(got), want) {
						t.Fatalf("ggload run printed\n%q\nllama-completion printed\n%q", got, want)
					}
					if c[0] != "-p" || c[1] != "Hello world" {
						return
					}
					// --json: the same tokens, with their pieces
					js, err := runCLI(t, append([]string{"run", model, "-t", "2", "-dev", "none", "--json"}, c...)...)
					if err != nil {
						t.Fatal(err)
					}
					var rep textReport
					if err := json.Unmarshal([]byte(js), &rep); err != nil {
						t.Fatalf("%v\n%s", err, js)
					}
					text := strings.Join(rep.PromptPieces, "") + rep.Text + "\n\n"
					if text != got || len(rep.Generated) != 12 || len(rep.GeneratedPieces) != 12 || rep.Stop != "n_predict" || rep.Prompt != "Hello world" {
						t.Fatalf("--json: %+v\nits text %q, printed %q", rep, text, got)
					}
				})
			}
		})
	}
}

// run's text options: -p and --tokens exclusive, bad sampling values
// refused as llama.cpp refuses them.
func TestRunTextOptions(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 1, Embd: 64, FF: 128, Heads: 2, Vocab: 64})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "hi", "--tokens", "1,2"}, "exclusive"},
		{[]string{"-p", "hi", "--repeat-penalty", "0"}, "repeat-penalty must be finite and greater than 0"},
		{[]string{"-p", "hi", "--repeat-last-n", "-1"}, "invalid repeat-last-n = -1"},
		{[]string{"-p", "hi", "-l", "12x"}, "invalid input format"},
		{[]string{"-p", "hi"}, "no vocabulary"},
	} {
		_, err := runCLI(t, append([]string{"run", path, "-dev", "none"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one saying %q", c.args, err, c.want)
		}
	}
}
