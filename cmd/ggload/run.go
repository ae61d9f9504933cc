package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ggload/ggload/infer"
)

func init() {
	register(command{"run", "MODEL [options] -p TEXT | -cnv | --tokens ID,ID,...", "load a model and run it with llama.cpp's forward pass: a prompt of text, sampled as llama-completion samples, a conversation in its chat template, or token ids with greedy steps", runRun})
	optionSets["run"] = func() *optionSet {
		pf := defaultPlaceFlags()
		rf := newRunFlags()
		return runOptions(&pf, &rf)
	}
}

// maxRunThreads bounds -t: more CPU threads than this are refused.
const maxRunThreads = 1024

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
	s := newOptionSet("run", "Load MODEL with llama.cpp's options and run it. On a model with a chat template (or with -cnv), a conversation, as llama-completion -cnv holds one: the template applied turn by turn, the replies printed as they are generated, the user's turns read from the standard input (-no-cnv turns it off). With -p TEXT or -f FILE, as llama-completion -no-cnv: the prompt tokenized with the model's vocabulary, decoded, then tokens sampled by llama.cpp's sampler chain (its defaults and options) and printed until an end-of-generation token, -n tokens or a full context. With --tokens, the ids decoded as one prompt (one llama_decode, split into ubatches as llama.cpp splits it), then N greedy steps: the token of the greatest logit (the first of equal ones), fed back.",
		"ggload run MODEL -p TEXT [options]", "ggload run MODEL [-sys TEXT] [-p TEXT] [options]", "ggload run -hf <user>/<model>[:quant] -p TEXT [options]", "ggload run MODEL --tokens ID,ID,... [options]", "ggload run -m MODEL -f FILE [options]")
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
	s.add(&option{names: []string{"-n", "--predict", "--n-predict"}, value: "N", help: "tokens to generate (default: with --tokens 0, with a text prompt -1: until an end-of-generation token or a full context; -2, as any negative N, as -1)",
		set: func(v string) error {
			n, err := stoi(v)
			rf.steps, rf.stepsSet = int(n), true
			return err
		}})
	s.add(&option{names: []string{"-t", "--threads"}, value: "N", help: fmt.Sprintf("CPU threads, up to %d; 0 or less: every CPU online, %d here (default: the physical cores, %d here, as llama.cpp's tools count them; fewer while other processes keep the CPUs busy)", maxRunThreads, hardwareConcurrency(), mathThreads()),
		set: func(v string) error {
			n, err := stoi(v)
			if err != nil {
				return err
			}
			if n > maxRunThreads {
				return fmt.Errorf("%d threads: ggload takes up to %d", n, maxRunThreads)
			}
			if n <= 0 {
				n = int32(hardwareConcurrency()) // (common/arg.cpp: std::thread::hardware_concurrency())
			}
			rf.threads = int(n)
			return nil
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
	Token int32     `json:"token"`
	Logit jsonFloat `json:"logit"`
}

// jsonFloat is a float32 in JSON: a number, or where it is not finite (a
// model's logits can be NaN or infinite, which JSON's numbers cannot
// say) the string "NaN", "+Inf" or "-Inf".
type jsonFloat float32

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	switch v := float64(f); {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return json.Marshal(float32(f))
}

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case "NaN":
			*f = jsonFloat(math.NaN())
		case "+Inf":
			*f = jsonFloat(math.Inf(1))
		case "-Inf":
			*f = jsonFloat(math.Inf(-1))
		default:
			return fmt.Errorf("not a number: %q", s)
		}
		return nil
	}
	var v float32
	err := json.Unmarshal(b, &v)
	*f = jsonFloat(v)
	return err
}

// runReport is run --json.
type runReport struct {
	Model     string    `json:"model"`
	Prompt    []int32   `json:"prompt"`
	Generated []int32   `json:"generated"`
	Steps     []runStep `json:"steps"` // the prompt's last output's argmax first, then each step's
	NVocab    int       `json:"n_vocab"`
	Threads   int       `json:"threads"`
	// Error is what ended the run early ("" when it ran to its end); the
	// rest is what it did until then
	Error   string `json:"error,omitempty"`
	Timings struct {
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
	pf.hub.mmproj = false // llama-completion takes no projector
	rf := newRunFlags()
	s := runOptions(&pf, &rf)
	path, done, err := pf.parseModel(ctx, s, args, stdout)
	if done {
		return err
	}
	for _, n := range s.notes {
		fmt.Fprintln(os.Stderr, "ggload: "+n)
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
	if err := checkOutputs(rf.outputs(), runInputs(&pf, pd, "")); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	ic, release, err := runContext(ctx, pd, &pf, rf.threads)
	if err != nil {
		return err
	}
	defer release()
	var logits, embd *outFile
	if rf.logitsOut != "" {
		if logits, err = createOut("--logits-out", rf.logitsOut); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		defer logits.abort()
	}
	if rf.embdOut != "" {
		if embd, err = createOut("--embd-out", rf.embdOut); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		defer embd.abort()
	}
	rep := runReport{Model: path, Prompt: rf.tokens, Generated: []int32{}, Threads: rf.threads}
	if rep.Threads == 0 {
		rep.Threads = mathThreads()
	}
	nf := nonFinite{pf: &pf}
	err = runTokens(ic, &rf, &rep, logits, embd, &nf)
	if err == nil {
		for _, o := range []*outFile{logits, embd} {
			if err == nil && o != nil {
				err = o.commit()
			}
		}
	}
	rep.Memory = ic.Allocations() // (with a control vector, the compute buffers as the first decode reserved them again)
	nf.warn(os.Stderr)
	if err != nil {
		rep.Error = err.Error()
	}
	// what was done is printed, then the error, if any
	if rf.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(rep); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		writeRunReport(stdout, &rep, rf.steps)
	}
	switch {
	case err != nil && len(rep.Steps) > 0:
		return fmt.Errorf("run: stopped after %d of %d steps: %w", len(rep.Generated), rf.steps, err)
	case err != nil:
		return err
	}
	return nil
}

// outputs are the files run writes, by option.
func (rf *runFlags) outputs() map[string]string {
	out := map[string]string{}
	if rf.logitsOut != "" {
		out["--logits-out"] = rf.logitsOut
	}
	if rf.embdOut != "" {
		out["--embd-out"] = rf.embdOut
	}
	return out
}

// runInputs are the files run reads, by what they are: the model's (every
// split), the draft model's, the adapters' and control vectors', the
// prompt's.
func runInputs(pf *placeFlags, pd *planned, prompt string) map[string][]string {
	in := map[string][]string{"the model": pd.m.Paths}
	if pd.draftModel != nil {
		in["the draft model"] = pd.draftModel.Paths
	}
	for _, l := range pf.lora.files {
		in["the LoRA adapter"] = append(in["the LoRA adapter"], l.path)
	}
	for _, c := range pf.cvec.files {
		in["the control vector"] = append(in["the control vector"], c.Path)
	}
	if prompt != "" {
		in["the prompt file"] = []string{prompt}
	}
	return in
}

// runTokens decodes the prompt of --tokens and takes the greedy steps,
// filling rep as it goes (so that an error leaves what was done) and
// writing the logits and embeddings asked for.
func runTokens(ic *infer.Context, rf *runFlags, rep *runReport, logits, embd *outFile, nf *nonFinite) error {
	var out io.Writer = io.Discard
	if logits != nil {
		out = logits
	}
	batch := infer.Batch{Tokens: rf.tokens}
	if rf.allLogits {
		batch.Logits = make([]bool, len(rf.tokens))
		for i := range batch.Logits {
			batch.Logits[i] = true
		}
	}
	t0 := time.Now()
	err := ic.Decode(batch)
	promptTime := time.Since(t0)
	promptGraphs := ic.Timings()
	rt := &rep.Timings
	defer func() {
		tm := ic.Timings()
		rt.Graphs, rt.GraphsReused, rt.GraphsKept, rt.GraphBuildS = tm.Graphs, tm.Reused, tm.Kept, tm.Build.Seconds()
		if n := len(rep.Generated); n > 0 {
			rt.GenerationTokS = float64(n) / max(rt.GenerationS, 1e-9)
			rt.GraphBuildPerTok = (tm.Build - promptGraphs.Build).Seconds() / float64(n)
		}
	}()
	if err != nil {
		return err
	}
	rt.PromptS = promptTime.Seconds()
	rt.PromptTokensS = float64(len(rf.tokens)) / max(promptTime.Seconds(), 1e-9)
	if embd != nil {
		if err := writeEmbeddings(embd, ic, len(rf.tokens)); err != nil {
			return err
		}
	}
	first := len(rf.tokens) - 1
	if rf.allLogits {
		first = 0
	}
	// (one row's memory, and one row's bytes, for every row)
	var row, last []float32
	var buf []byte
	for i := first; i < len(rf.tokens); i++ {
		row, err = ic.AppendLogits(row[:0], i)
		if err != nil && embd != nil && rf.steps == 0 && ic.NVocab() == 0 {
			break // an embedding model: no logits
		}
		if err != nil {
			return err
		}
		nf.check(row, fmt.Sprintf("the prompt's token %d", i))
		if buf, err = writeRow(out, row, buf); err != nil {
			return fmt.Errorf("--logits-out: %w", err)
		}
		last = row
	}
	rep.NVocab = len(last)
	t1 := time.Now()
	defer func() { rt.GenerationS = time.Since(t1).Seconds() }()
	for step := 0; last != nil; step++ {
		next := int32(infer.Argmax(last))
		rep.Steps = append(rep.Steps, runStep{next, jsonFloat(last[next])})
		if step == rf.steps {
			break
		}
		if err := ic.Decode(infer.Batch{Tokens: []int32{next}}); err != nil {
			return err
		}
		rep.Generated = append(rep.Generated, next)
		if last, err = ic.AppendLogits(last[:0], -1); err != nil {
			return err
		}
		nf.check(last, fmt.Sprintf("step %d", step+1))
		if buf, err = writeRow(out, last, buf); err != nil {
			return fmt.Errorf("--logits-out: %w", err)
		}
	}
	return nil
}

// runContext loads the planned model and makes run's context on it, with
// the control vector and the LoRA adapters of the options applied as
// common_init_from_params applies them; done frees them all, in turn.
func runContext(ctx context.Context, pd *planned, pf *placeFlags, threads int) (ic *infer.Context, done func(), err error) {
	if err := pd.plan.ContextErr; err != nil {
		// (a draft model alone: run makes no target model's context)
		return nil, nil, fmt.Errorf("run: %w", err)
	}
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
func writeEmbeddings(w io.Writer, ic *infer.Context, n int) error {
	var buf []byte
	if e, err := ic.Embeddings(0); err == nil {
		_, err = writeRow(w, e, buf)
		return err
	}
	for i := range n {
		e, err := ic.EmbeddingsIth(i)
		if err != nil {
			return err
		}
		if buf, err = writeRow(w, e, buf); err != nil {
			return fmt.Errorf("--embd-out: %w", err)
		}
	}
	return nil
}

// writeRow writes one row of floats as little-endian float32, through buf
// (returned, to be given again).
func writeRow(w io.Writer, row []float32, buf []byte) ([]byte, error) {
	buf = slices.Grow(buf[:0], 4*len(row))
	for _, v := range row {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	_, err := w.Write(buf)
	return buf, err
}

func writeRunReport(w io.Writer, rep *runReport, steps int) {
	for _, m := range rep.Memory {
		fmt.Fprintf(w, "ggload: context: %-9s %12s %10.2f MiB\n", m.What, m.BufferType, float64(m.Bytes)/(1<<20))
	}
	t := rep.Timings
	switch {
	case len(rep.Steps) == 0 && rep.Error != "":
		return // (the prompt did not decode: the error says why)
	case len(rep.Steps) == 0:
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
			len(rep.Generated), t.GenerationS, t.GenerationTokS, t.GraphBuildPerTok*1000, t.Graphs, t.GraphsReused)
	}
}

// hardwareConcurrency is std::thread::hardware_concurrency() as
// libstdc++ on glibc answers it (get_nprocs): the CPUs online, whatever
// the process's affinity; else every logical CPU. llama.cpp's -t takes it
// for 0 or less.
var hardwareConcurrency = sync.OnceValue(func() int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if n := countCPUList(strings.TrimSpace(string(b))); n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
})

// countCPUList counts the CPUs of a kernel CPU list ("0-3,8,10-11").
func countCPUList(s string) int {
	n := 0
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}
