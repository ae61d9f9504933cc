package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/vocab"
)

// textFlags are run's options for a prompt of text, as llama-completion
// takes them (-no-cnv: no chat template).
type textFlags struct {
	prompt   string
	file     string
	set      bool // -p given
	escape   bool
	special  bool
	sampling sampleFlags
	chat     chatFlags // conversation mode (run_chat.go)
}

func newRunFlags() runFlags {
	return runFlags{text: textFlags{escape: true, sampling: newSampleFlags(), chat: chatFlags{mode: -1}}}
}

func (tf *textFlags) given() bool { return tf.set || tf.file != "" }

func (tf *textFlags) add(s *optionSet) {
	s.group("text (llama.cpp's tokenizer and samplers: the generated text, as llama-completion -no-cnv prints it)")
	s.add(&option{names: []string{"-p", "--prompt"}, value: "PROMPT", help: "the prompt, as text: tokenized with the model's vocabulary (BOS as it says, special tokens parsed)",
		set: func(v string) error { tf.prompt, tf.set = v, true; return nil }})
	s.add(&option{names: []string{"-f", "--file"}, value: "FNAME", help: "a file holding the prompt (one final newline dropped, as llama.cpp drops it)",
		set: func(v string) error {
			if v == "" {
				return fmt.Errorf("want a file name")
			}
			tf.file = v
			return nil
		}})
	s.add(&option{names: []string{"-e", "--escape"}, neg: []string{"--no-escape"}, help: "process escapes (\\n, \\r, \\t, \\', \\\", \\\\, \\xHH) in the prompt (default: true)",
		on: func(on bool) error { tf.escape = on; return nil }})
	s.add(&option{names: []string{"-sp", "--special"}, help: "print special tokens' text too (default: false)", on: func(on bool) error { tf.special = on; return nil }})
	tf.chat.add(s)
	tf.sampling.add(s)
}

// promptText is the prompt as llama.cpp's argument parsing leaves it.
func (tf *textFlags) promptText() (string, error) {
	p := tf.prompt
	if tf.file != "" {
		b, err := readPromptFile(tf.file)
		if err != nil {
			return "", fmt.Errorf("run: -f: %w", err)
		}
		p = strings.TrimSuffix(string(b), "\n")
	}
	if tf.escape {
		p = processEscapes(p)
	}
	return p, nil
}

// processEscapes is string_process_escapes of llama.cpp's common library:
// \n \r \t \' \" \\ and \xHH (two hex digits) become their characters; any
// other backslash stays as it is.
func processEscapes(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			out = append(out, s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case '\'', '"', '\\':
			out = append(out, c)
		case 'x':
			if i+2 < len(s) {
				if v, ok := strtolHex2(s[i+1 : i+3]); ok {
					out = append(out, byte(v))
					i += 2
					continue
				}
			}
			out = append(out, '\\', c)
		default:
			out = append(out, '\\', c)
		}
	}
	return string(out)
}

// strtolHex2 is strtol(x, &end, 16) on two characters, true where it
// reads both: two hex digits, or a space or sign before one.
func strtolHex2(x string) (int, bool) {
	hex := func(c byte) (int, bool) {
		switch {
		case c >= '0' && c <= '9':
			return int(c - '0'), true
		case c >= 'a' && c <= 'f':
			return int(c-'a') + 10, true
		case c >= 'A' && c <= 'F':
			return int(c-'A') + 10, true
		}
		return 0, false
	}
	if h, ok := hex(x[0]); ok {
		l, ok := hex(x[1])
		return h*16 + l, ok
	}
	l, ok := hex(x[1])
	switch {
	case !ok:
		return 0, false
	case x[0] == '-':
		return -l, true
	case x[0] == '+' || x[0] == ' ' || x[0] >= '\t' && x[0] <= '\r':
		return l, true
	}
	return 0, false
}

// textReport is run --json with a text prompt. JSON's strings are UTF-8:
// the text and the pieces, which may hold other bytes (a piece can be one
// byte of a character), are given as strings (each byte that is not
// UTF-8 as U+FFFD) and, byte for byte, in base64 (the _bytes fields).
type textReport struct {
	Model                string   `json:"model"`
	Prompt               string   `json:"prompt"`
	PromptBytes          []byte   `json:"prompt_bytes"`
	PromptTokens         []int32  `json:"prompt_tokens"`
	PromptPieces         []string `json:"prompt_pieces"`
	PromptPiecesBytes    [][]byte `json:"prompt_pieces_bytes"`
	Generated            []int32  `json:"generated"`
	GeneratedPieces      []string `json:"generated_pieces"`
	GeneratedPiecesBytes [][]byte `json:"generated_pieces_bytes"`
	Text                 string   `json:"text"` // the generated pieces, joined
	TextBytes            []byte   `json:"text_bytes"`
	Stop                 string   `json:"stop"`            // "eog", "n_predict", "context" or "error"
	Error                string   `json:"error,omitempty"` // what ended the run early
	Sampler              string   `json:"sampler"`
	Seed                 uint32   `json:"seed"`
	Timings              struct {
		PromptS        float64 `json:"prompt_s"`
		GenerationS    float64 `json:"generation_s"`
		GenerationTokS float64 `json:"generation_tokens_per_s"`
	} `json:"timings"`
}

// runText is run with a prompt of text: llama-completion -no-cnv on the
// zero context parameters plus the options: the prompt tokenized as
// common_tokenize(ctx, prompt, true, true), accepted by the sampler,
// decoded in batches of -b tokens; then each step samples the last logits,
// accepts the token, prints its piece, and stops at an end-of-generation
// token (printing " [end of text]"), after -n tokens, or when the next
// token would not fit the context (llama.cpp's context shift is off by
// default). Text goes to stdout as llama-completion prints it; with
// --json, a report instead.
func runText(ctx context.Context, pf *placeFlags, rf *runFlags, path string, stdout io.Writer) error {
	tf := &rf.text
	prompt, err := tf.promptText()
	if err != nil {
		return err
	}
	steps := rf.steps
	if !rf.stepsSet {
		steps = -1
	}
	pd, err := planModel(ctx, pf, path)
	if err != nil {
		return err
	}
	defer pd.Close()
	if err := pd.refused(); err != nil {
		return err
	}
	v, err := vocab.Load(pd.m)
	if err != nil {
		return err
	}
	if v.Type() == vocab.TypeNone {
		return fmt.Errorf("run: %s has no vocabulary (tokenizer.ggml.model is \"none\"): give the prompt as --tokens", path)
	}
	smpl, err := sample.New(v, tf.sampling.params(pd.m, tf.escape))
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if tm, on, err := tf.chat.templates(pd, v, rf.asJSON); err != nil {
		return err
	} else if on {
		return runChat(ctx, pd, pf, rf, v, smpl, tm, stdout)
	} else if !tf.given() {
		return fmt.Errorf("run: %s has no chat template for conversation mode (-cnv or --chat-template gives one): give a prompt with -p or -f", path)
	}
	toks, err := v.Tokenize(prompt, true, true)
	if err != nil {
		return fmt.Errorf("run: tokenizing the prompt: %w", err)
	}
	if len(toks) == 0 {
		if !v.AddBOS() {
			return fmt.Errorf("run: the prompt is empty")
		}
		toks = []int32{v.BOS()}
	}
	// an encoder-decoder (T5): the prompt through the encoder, then the
	// decoder from its start token, as llama-completion does
	arch := pd.m.Architecture()
	switch arch {
	case "t5encoder", "eagle3", "dflash":
		return fmt.Errorf("run: %s: a %s model has no decoder of its own to generate text with", path, arch)
	case "t5":
	default:
		if v.AddEOS() {
			return fmt.Errorf("run: %s: the vocabulary adds EOS to every prompt, which llama-completion refuses for a model without an encoder (it asserts)", path)
		}
	}
	encoded := arch == "t5"
	nCtx, nBatch := 0, len(toks)
	if cm := pd.plan.Context; cm != nil {
		nCtx, nBatch = int(cm.NCtx), int(cm.NBatch)
	}
	if nCtx > 0 && len(toks) > nCtx-4 {
		return fmt.Errorf("run: the prompt is too long (%d tokens, max %d)", len(toks), nCtx-4)
	}
	ic, release, err := runContext(ctx, pd, pf, rf.threads)
	if err != nil {
		return err
	}
	defer release()

	rep := textReport{Model: path, Prompt: prompt, PromptBytes: []byte(prompt), Generated: []int32{}, PromptPieces: []string{}, PromptPiecesBytes: [][]byte{},
		GeneratedPieces: []string{}, GeneratedPiecesBytes: [][]byte{}, TextBytes: []byte{}, Sampler: smpl.String(), Seed: smpl.Seed()}
	// the text goes out as llama-completion writes it, byte for byte,
	// except to a terminal, where control characters and bytes that are
	// not UTF-8 are escaped (a model's text may hold sequences a terminal
	// would act on)
	text := stdout
	if !isTerminalWriter(stdout) {
		text = unwrapped(stdout)
	}
	// (each piece as printf's "%s" prints it: up to a NUL byte)
	emit := func(s []byte) error {
		if rf.asJSON {
			return nil
		}
		if i := bytes.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		_, err := text.Write(s)
		return err
	}
	g := textGen{ic: ic, v: v, smpl: smpl, special: tf.special, emit: emit, nCtx: nCtx, nBatch: nBatch, nf: nonFinite{pf: pf}, rep: &rep}
	if encoded {
		start := v.BOS()
		if u, err := pd.m.Uint(arch + ".decoder_start_token_id"); err == nil && u <= math.MaxInt32 {
			start = int32(u)
		}
		g.encode, g.start = toks, start
	}
	err = g.run(toks, steps)
	g.nf.warn(os.Stderr)
	if rf.asJSON {
		if err != nil {
			rep.Stop, rep.Error = "error", err.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(rep); jerr != nil && err == nil {
			return jerr
		}
		return err
	}
	if err != nil {
		return err // (what was generated is out already)
	}
	if err := emit([]byte("\n\n")); err != nil {
		return err
	}
	tm := ic.Timings()
	fmt.Fprintf(os.Stderr, "ggload: prompt: %d tokens in %.3f s; generated %d tokens in %.3f s (%.1f tokens/s); graphs: %d built, %d reused, %d kept; sampler: %s\n",
		len(rep.PromptTokens), rep.Timings.PromptS, len(rep.Generated), rep.Timings.GenerationS, rep.Timings.GenerationTokS, tm.Graphs, tm.Reused, tm.Kept, rep.Sampler)
	return nil
}

// textGen is run's generation from a text prompt, as llama-completion's
// loop goes: the prompt's pieces printed and accepted by the sampler, the
// prompt decoded in batches of n_batch, then each step samples, accepts,
// prints, and decodes the token, until an end-of-generation token, -n
// tokens or a full context. It fills rep as it goes: an error leaves what
// was done.
type textGen struct {
	ic      *infer.Context
	v       *vocab.Vocab
	smpl    *sample.Sampler
	special bool
	emit    func([]byte) error
	nCtx    int
	nBatch  int
	// encode is an encoder-decoder's prompt (T5), for the encoder; the
	// decoder then starts from start
	encode []int32
	start  int32
	nf     nonFinite
	rep    *textReport
}

// piece is a token's text, as the report and the output take it.
func (g *textGen) piece(t int32) ([]byte, error) {
	b, err := g.v.AppendPiece(nil, t, 0, g.special)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	return b, nil
}

func (g *textGen) run(toks []int32, steps int) error {
	rep := g.rep
	if g.encode != nil {
		if err := g.ic.Encode(infer.Batch{Tokens: g.encode}); err != nil {
			return err
		}
		toks = []int32{g.start}
	}
	rep.PromptTokens = toks
	for _, t := range toks {
		g.smpl.AcceptPrompt(t)
		p, err := g.piece(t)
		if err != nil {
			return err
		}
		rep.PromptPieces = append(rep.PromptPieces, string(p))
		rep.PromptPiecesBytes = append(rep.PromptPiecesBytes, p)
		if err := g.emit(p); err != nil {
			return err
		}
	}
	t0 := time.Now()
	nBatch := g.nBatch
	if nBatch <= 0 {
		nBatch = len(toks)
	}
	for i := 0; i < len(toks); i += nBatch {
		if err := g.ic.Decode(infer.Batch{Tokens: toks[i:min(i+nBatch, len(toks))]}); err != nil {
			return err
		}
	}
	rep.Timings.PromptS = time.Since(t0).Seconds()
	t1 := time.Now()
	defer func() {
		rep.Text = string(rep.TextBytes)
		gen := time.Since(t1)
		rep.Timings.GenerationS = gen.Seconds()
		if n := len(rep.Generated); n > 0 {
			rep.Timings.GenerationTokS = float64(n) / max(gen.Seconds(), 1e-9)
		}
	}()
	nPast := len(toks)
	rep.Stop = "n_predict"
	var logits []float32
	for remain := steps; remain != 0; {
		var err error
		if logits, err = g.ic.AppendLogits(logits[:0], -1); err != nil {
			return err
		}
		g.nf.check(logits, fmt.Sprintf("step %d", len(rep.Generated)+1))
		id, err := g.smpl.Sample(logits)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if err := g.smpl.Accept(id); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		remain--
		p, err := g.piece(id)
		if err != nil {
			return err
		}
		rep.Generated = append(rep.Generated, id)
		rep.GeneratedPieces = append(rep.GeneratedPieces, string(p))
		rep.GeneratedPiecesBytes = append(rep.GeneratedPiecesBytes, p)
		rep.TextBytes = append(rep.TextBytes, p...)
		if err := g.emit(p); err != nil {
			return err
		}
		if g.v.IsEOG(id) {
			rep.Stop = "eog"
			return g.emit([]byte(" [end of text]\n"))
		}
		if remain == 0 {
			return nil
		}
		if g.nCtx > 0 && nPast+1 >= g.nCtx {
			rep.Stop = "context"
			fmt.Fprintf(os.Stderr, "\n\nggload: run: context full (%d tokens) and llama.cpp's context shift is off: stopping\n", g.nCtx)
			return nil
		}
		if err := g.ic.Decode(infer.Batch{Tokens: []int32{id}}); err != nil {
			return err
		}
		nPast++
	}
	return nil
}
