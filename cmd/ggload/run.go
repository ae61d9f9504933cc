package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ggload/ggload/infer"
)

func init() {
	register(command{"run", "MODEL [options] -p TEXT | --tokens ID,ID,...", "load a model and run it with llama.cpp's forward pass: a prompt of text, sampled as llama-completion samples, or of token ids with greedy steps", runRun})
	optionSets["run"] = func() *optionSet {
		pf := defaultPlaceFlags()
		rf := newRunFlags()
		return runOptions(&pf, &rf)
	}
}

// Ranges of run's own options.
const (
	maxRunThreads = 1024
	maxRunSteps   = 1 << 20
)

type runFlags struct {
	tokens    []int32
	steps     int
	stepsSet  bool
	text      textFlags
	threads   int
	allLogits bool
	logitsOut string
	embdOut   string
	asJSON    bool
}

func runOptions(pf *placeFlags, rf *runFlags) *optionSet {
	s := newOptionSet("run", "Load MODEL with llama.cpp's options and run it. With -p TEXT or -f FILE, as llama-completion -no-cnv: the prompt tokenized with the model's vocabulary, decoded, then tokens sampled by llama.cpp's sampler chain (its defaults and options) and printed until an end-of-generation token, -n tokens or a full context. With --tokens, the ids decoded as one prompt (one llama_decode, split into ubatches as llama.cpp splits it), then N greedy steps: the token of the greatest logit (the first of equal ones), fed back.",
		"ggload run MODEL -p TEXT [options]", "ggload run MODEL --tokens ID,ID,... [options]", "ggload run -m MODEL -f FILE [options]")
	pf.add(s)
	s.group("run")
	s.add(&option{names: []string{"--tokens"}, value: "ID,ID,...", help: "the prompt's token ids (text comes with the tokenizer)",
		set: func(v string) error {
			rf.tokens = rf.tokens[:0]
			for _, f := range strings.Split(v, ",") {
				n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
				if err != nil || n < 0 {
					return fmt.Errorf("want token ids: non-negative integers separated by commas")
				}
				rf.tokens = append(rf.tokens, int32(n))
			}
			return nil
		}})
	s.add(&option{names: []string{"-n", "--predict", "--n-predict"}, value: "N", help: fmt.Sprintf("tokens to generate, up to %d (default: with --tokens 0, with a text prompt -1: until an end-of-generation token or a full context; -2 as -1)", maxRunSteps),
		set: func(v string) error {
			n, err := intIn(v, -2, maxRunSteps)
			rf.steps, rf.stepsSet = int(n), true
			return err
		}})
	s.add(&option{names: []string{"-t", "--threads"}, value: "N", help: fmt.Sprintf("CPU threads, 1 to %d (default: the physical cores, %d here, as llama.cpp's tools count them)", maxRunThreads, mathThreads()),
		set: func(v string) error {
			n, err := intIn(v, 1, maxRunThreads)
			rf.threads = int(n)
			return err
		}})
	s.add(&option{names: []string{"--all-logits"}, help: "output every prompt position's logits, not only the last's", on: func(on bool) error { rf.allLogits = on; return nil }})
	s.add(&option{names: []string{"--logits-out"}, value: "FILE", help: "write the logits: one row of n_vocab little-endian float32 per output (the prompt's, then one per step)",
		set: func(v string) error {
			if v == "" {
				return fmt.Errorf("want a file name")
			}
			rf.logitsOut = v
			return nil
		}})
	s.add(&option{names: []string{"--embd-out"}, value: "FILE", help: "turn embeddings on (as llama-embedding does) and write the prompt's as little-endian float32: each sequence's pooled embedding, or where the context does not pool, one row per prompt token",
		set: func(v string) error {
			if v == "" {
				return fmt.Errorf("want a file name")
			}
			rf.embdOut = v
			return nil
		}})
	s.add(&option{names: []string{"--json"}, help: "print JSON: the tokens in and out (with a text prompt, their pieces and the text), each step's choice and its logit, the timings", on: func(on bool) error { rf.asJSON = on; return nil }})
	rf.text.add(s)
	return s
}

// runStep is one output's greedy choice.
type runStep struct {
	Token int32   `json:"token"`
	Logit float32 `json:"logit"`
}

// runReport is run --json.
type runReport struct {
	Model     string    `json:"model"`
	Prompt    []int32   `json:"prompt"`
	Generated []int32   `json:"generated"`
	Steps     []runStep `json:"steps"` // the prompt's last output's argmax first, then each step's
	NVocab    int       `json:"n_vocab"`
	Threads   int       `json:"threads"`
	Timings   struct {
		PromptS          float64 `json:"prompt_s"`
		PromptTokensS    float64 `json:"prompt_tokens_per_s"`
		GenerationS      float64 `json:"generation_s"`
		GenerationTokS   float64 `json:"generation_tokens_per_s"`
		Graphs           int     `json:"graphs"`        // built
		GraphsReused     int     `json:"graphs_reused"` // ubatches that reused the graph before them
		GraphsKept       int     `json:"graphs_kept"`   // ubatches that took the graph kept from before that
		GraphBuildS      float64 `json:"graph_build_s"`
		GraphBuildPerTok float64 `json:"graph_build_s_per_token"`
	} `json:"timings"`
	Memory []infer.Allocation `json:"context_memory"`
}

func runRun(ctx context.Context, args []string, stdout io.Writer) error {
	pf := defaultPlaceFlags()
	rf := newRunFlags()
	s := runOptions(&pf, &rf)
	path, done, err := pf.parseModel(ctx, s, args, stdout)
	if done {
		return err
	}
	if pf.mmproj.given() {
		return s.errorf("-mm/-mmu: run encodes no image or audio, so it has no use for a multimodal projector (plan and load place and load one)")
	}
	if rf.text.given() || rf.text.chat.wanted() && len(rf.tokens) == 0 {
		if len(rf.tokens) > 0 {
			return s.errorf("-p/-f and --tokens are exclusive: give the prompt as text or as token ids")
		}
		if rf.embdOut != "" || rf.allLogits {
			return s.errorf("--embd-out and --all-logits take --tokens")
		}
		return runText(ctx, &pf, &rf, path, stdout)
	}
	if len(rf.tokens) == 0 {
		return s.errorf("-p, -f or --tokens: a prompt is required")
	}
	if rf.steps < 0 {
		return s.errorf("-n %d: with --tokens, -n counts greedy steps from 0", rf.steps)
	}
	if rf.embdOut != "" {
		pf.context.Embeddings = true
	}
	pd, err := planModel(ctx, &pf, path)
	if err != nil {
		return err
	}
	defer pd.Close()
	if err := pd.refused(); err != nil {
		return err
	}
	ic, release, err := runContext(ctx, pd, &pf, rf.threads)
	if err != nil {
		return err
	}
	defer release()
	var out io.Writer = io.Discard
	var outFile *os.File
	if rf.logitsOut != "" {
		if outFile, err = os.Create(rf.logitsOut); err != nil {
			return fmt.Errorf("run: --logits-out: %w", err)
		}
		defer outFile.Close()
		out = outFile
	}
	rep := runReport{Model: path, Prompt: rf.tokens, Generated: []int32{}, Memory: ic.Memory, Threads: rf.threads}
	if rep.Threads == 0 {
		rep.Threads = 4
	}
	batch := infer.Batch{Tokens: rf.tokens}
	if rf.allLogits {
		batch.Logits = make([]bool, len(rf.tokens))
		for i := range batch.Logits {
			batch.Logits[i] = true
		}
	}
	t0 := time.Now()
	if err := ic.Decode(batch); err != nil {
		return err
	}
	promptTime := time.Since(t0)
	promptGraphs := ic.Timings()
	if rf.embdOut != "" {
		if err := writeEmbeddings(rf.embdOut, ic, len(rf.tokens)); err != nil {
			return err
		}
	}
	first := len(rf.tokens) - 1
	if rf.allLogits {
		first = 0
	}
	var last []float32
	for i := first; i < len(rf.tokens); i++ {
		lg, err := ic.Logits(i)
		if err != nil && rf.embdOut != "" && rf.steps == 0 && ic.NVocab() == 0 {
			break // an embedding model: no logits
		}
		if err != nil {
			return err
		}
		if err := writeRow(out, lg); err != nil {
			return fmt.Errorf("run: --logits-out: %w", err)
		}
		last = lg
	}
	rep.NVocab = len(last)
	t1 := time.Now()
	for step := 0; last != nil; step++ {
		next := int32(infer.Argmax(last))
		rep.Steps = append(rep.Steps, runStep{next, last[next]})
		if step == rf.steps {
			break
		}
		rep.Generated = append(rep.Generated, next)
		if err := ic.Decode(infer.Batch{Tokens: []int32{next}}); err != nil {
			return err
		}
		if last, err = ic.Logits(-1); err != nil {
			return err
		}
		if err := writeRow(out, last); err != nil {
			return fmt.Errorf("run: --logits-out: %w", err)
		}
	}
	genTime := time.Since(t1)
	if outFile != nil {
		if err := outFile.Close(); err != nil {
			return fmt.Errorf("run: --logits-out: %w", err)
		}
	}
	tm := ic.Timings()
	rt := &rep.Timings
	rt.PromptS, rt.GenerationS = promptTime.Seconds(), genTime.Seconds()
	rt.PromptTokensS = float64(len(rf.tokens)) / max(promptTime.Seconds(), 1e-9)
	if rf.steps > 0 {
		rt.GenerationTokS = float64(rf.steps) / max(genTime.Seconds(), 1e-9)
		rt.GraphBuildPerTok = (tm.Build - promptGraphs.Build).Seconds() / float64(rf.steps)
	}
	rt.Graphs, rt.GraphsReused, rt.GraphsKept, rt.GraphBuildS = tm.Graphs, tm.Reused, tm.Kept, tm.Build.Seconds()
	rep.Memory = ic.Memory // (with a control vector, the compute buffers as the first decode reserved them again)
	if rf.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeRunReport(stdout, &rep, rf.steps)
	return nil
}

// runContext loads the planned model and makes run's context on it, with
// the control vector and the LoRA adapters of the options applied as
// common_init_from_params applies them; done frees them all, in turn.
func runContext(ctx context.Context, pd *planned, pf *placeFlags, threads int) (ic *infer.Context, done func(), err error) {
	lm, err := loadPlan(ctx, pd.plan, pf, &loadFlags{progress: "off"})
	if err != nil {
		return nil, nil, err
	}
	if ic, err = infer.New(lm, infer.Params{Threads: threads}); err != nil {
		lm.Close()
		return nil, nil, err
	}
	detach := func() {}
	if err = pf.cvec.apply(ic); err == nil {
		detach, err = pf.lora.attach(ctx, lm, ic) // (lora.go)
	}
	if err != nil {
		ic.Close()
		lm.Close()
		return nil, nil, err
	}
	return ic, func() {
		detach()
		ic.Close()
		lm.Close()
	}, nil
}

// writeEmbeddings writes the prompt's embeddings as llama-embedding takes
// them: sequence 0's pooled embedding, else each token's.
func writeEmbeddings(path string, ic *infer.Context, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("run: --embd-out: %w", err)
	}
	rows := [][]float32{}
	if e, err := ic.Embeddings(0); err == nil {
		rows = append(rows, e)
	} else {
		for i := range n {
			e, err := ic.EmbeddingsIth(i)
			if err != nil {
				f.Close()
				return err
			}
			rows = append(rows, e)
		}
	}
	for _, r := range rows {
		if err := writeRow(f, r); err != nil {
			f.Close()
			return fmt.Errorf("run: --embd-out: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("run: --embd-out: %w", err)
	}
	return nil
}

// writeRow writes one row of logits as little-endian float32.
func writeRow(w io.Writer, row []float32) error {
	b := make([]byte, 4*len(row))
	for i, v := range row {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	_, err := w.Write(b)
	return err
}

func writeRunReport(w io.Writer, rep *runReport, steps int) {
	for _, m := range rep.Memory {
		fmt.Fprintf(w, "ggload: context: %-9s %12s %10.2f MiB\n", m.What, m.BufferType, float64(m.Bytes)/(1<<20))
	}
	t := rep.Timings
	if len(rep.Steps) == 0 {
		fmt.Fprintf(w, "ggload: prompt: %d tokens in %.3f s (%.1f tokens/s), no logits (embeddings written)\n", len(rep.Prompt), t.PromptS, t.PromptTokensS)
		return
	}
	fmt.Fprintf(w, "ggload: prompt: %d tokens in %.3f s (%.1f tokens/s), argmax %d (logit %g)\n",
		len(rep.Prompt), t.PromptS, t.PromptTokensS, rep.Steps[0].Token, rep.Steps[0].Logit)
	if steps > 0 {
		ids := make([]string, len(rep.Generated))
		for i, g := range rep.Generated {
			ids[i] = strconv.Itoa(int(g))
		}
		fmt.Fprintf(w, "ggload: generated: %s\n", strings.Join(ids, ","))
		fmt.Fprintf(w, "ggload: generation: %d tokens in %.3f s (%.1f tokens/s), graph build %.3f ms per token (%d graphs built, %d reused)\n",
			steps, t.GenerationS, t.GenerationTokS, t.GraphBuildPerTok*1000, t.Graphs, t.GraphsReused)
	}
}
