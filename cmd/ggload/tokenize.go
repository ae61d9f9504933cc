// Port of llama.cpp tools/tokenize/tokenize.cpp (v0.5.0).

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/ggload/ggload/vocab"
)

func init() {
	register(command{"tokenize", "MODEL [options]", "llama-tokenize: a prompt's tokens and their pieces, from the vocabulary alone", runTokenize})
	optionSets["tokenize"] = func() *optionSet { return tokenizeOptions(&tokenizeFlags{}) }
}

// tokenizeStdin is what --stdin reads.
var tokenizeStdin io.Reader = os.Stdin

// tokenizeFlags are llama-tokenize's options (tools/tokenize/tokenize.cpp
// and the common options it reads).
type tokenizeFlags struct {
	model        string
	prompt       string
	promptGiven  bool
	file         string
	stdin        bool
	ids          bool
	showCount    bool
	noBOS        bool
	parseSpecial bool
	escape       bool
	hub          hubFlags // -hf, -hff, -hft, --offline (hub.go)
}

func tokenizeOptions(f *tokenizeFlags) *optionSet {
	s := newOptionSet("tokenize", "Tokenize a prompt with MODEL's vocabulary as llama.cpp's llama-tokenize does, and print the same bytes: each token as \"ID -> 'PIECE'\", or the ids as a list. Only the vocabulary is read; no native library is needed.",
		"ggload tokenize MODEL -p PROMPT [options]", "ggload tokenize -m MODEL (-p PROMPT | -f FILE | --stdin) [options]", "ggload tokenize -hf <user>/<model>[:quant] -p PROMPT [options]")
	s.group("tokenize")
	s.add(&option{names: []string{"-m", "--model"}, value: "FNAME", help: "the model whose vocabulary tokenizes (or give it as MODEL)",
		set: func(v string) error { f.model = v; return nil }})
	f.hub.add(s)
	f.hub.addToken(s)
	s.add(&option{names: []string{"-p", "--prompt"}, value: "PROMPT", help: "the text to tokenize",
		set: func(v string) error { f.prompt, f.promptGiven = v, true; return nil }})
	s.add(&option{names: []string{"-f", "--file"}, value: "FNAME", help: "tokenize the file's bytes, exactly (it wins over -p)",
		set: func(v string) error { f.file = v; return nil }})
	s.add(&option{names: []string{"--stdin"}, help: "tokenize the standard input (it wins over -p and -f)",
		on: func(on bool) error { f.stdin = on; return nil }})
	s.add(&option{names: []string{"--ids"}, help: "print only the token ids, as a list: [1, 2, 3]",
		on: func(on bool) error { f.ids = on; return nil }})
	s.add(&option{names: []string{"--show-count"}, help: "print the number of tokens at the end",
		on: func(on bool) error { f.showCount = on; return nil }})
	s.add(&option{names: []string{"--no-bos"}, help: "do not add the BOS token, even where the vocabulary asks for it",
		on: func(on bool) error { f.noBOS = on; return nil }})
	s.add(&option{names: []string{"--no-parse-special"}, help: "treat special tokens' texts in the prompt as plain text (default: they are parsed)",
		on: func(on bool) error { f.parseSpecial = !on; return nil }})
	s.add(&option{names: []string{"-e", "--escape"}, neg: []string{"--no-escape"}, help: "process escapes (\\n, \\r, \\t, \\', \\\", \\\\, \\xNN) in the prompt (default: on)",
		on: func(on bool) error { f.escape = on; return nil }})
	s.add(&option{names: []string{"--log-disable"}, help: "llama.cpp's: silence its log (ggload's tokenize logs nothing)",
		on: func(bool) error { return nil }})
	return s
}

func runTokenize(ctx context.Context, args []string, stdout io.Writer) error {
	f := tokenizeFlags{parseSpecial: true, escape: true}
	s := tokenizeOptions(&f)
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	switch {
	case len(pos) > 1:
		return s.errorf("one MODEL, not %d: usage: %s", len(pos), s.usage[0])
	case len(pos) == 1 && f.model != "":
		return s.errorf("two models: -m %s and %s", f.model, pos[0])
	case len(pos) == 1:
		f.model = pos[0]
	case f.model == "" && f.hub.repo == "":
		return s.errorf("no MODEL given: usage: %s", s.usage[0])
	}
	if f.model, err = f.hub.local(ctx, s, f.model); err != nil {
		return err
	}
	// -p is escape-processed where llama.cpp's option parser does it,
	// after every option is read
	if f.escape {
		f.prompt = processEscapes(f.prompt)
	}
	if !f.stdin && f.file == "" && f.prompt == "" {
		return errors.New("error: must specify one of: --stdin, --file or --prompt")
	}
	var prompt string
	if f.file != "" {
		b, err := readPromptFile(f.file)
		if errors.Is(err, errPromptTooLarge) {
			return fmt.Errorf("error: %w", err)
		}
		if err != nil {
			return fmt.Errorf("error: could not open file '%s' for reading: %w", f.file, err)
		}
		prompt = string(b)
		if f.escape {
			prompt = processEscapes(prompt)
		}
	} else if !f.stdin {
		prompt = f.prompt
	}
	v, err := vocab.Open(f.model)
	if err != nil {
		return fmt.Errorf("error: could not load model from file '%s': %w", f.model, err)
	}
	if f.stdin {
		b, err := boundedRead(tokenizeStdin, maxPromptBytes, "the standard input")
		if err != nil {
			return fmt.Errorf("error: could not read the entire standard input: %w", err)
		}
		prompt = string(b)
		if f.escape {
			prompt = processEscapes(prompt)
		}
	}
	tokens, err := v.Tokenize(prompt, v.AddBOS() && !f.noBOS, f.parseSpecial)
	if err != nil {
		return err
	}
	// the output is llama-tokenize's, byte for byte, except to a
	// terminal, where control characters and bytes that are not UTF-8 are
	// escaped (a piece may hold sequences a terminal would act on)
	out := stdout
	if !isTerminalWriter(stdout) {
		out = unwrapped(stdout)
	}
	w := bufio.NewWriter(out)
	if f.ids {
		w.WriteByte('[')
	}
	var piece []byte
	for i, t := range tokens {
		if f.ids {
			if i > 0 {
				w.WriteString(", ")
			}
			w.WriteString(strconv.Itoa(int(t)))
			continue
		}
		fmt.Fprintf(w, "%6d -> '", t)
		if piece, err = v.AppendPiece(piece[:0], t, 0, true); err != nil {
			return err
		}
		// the piece is printed as a C string: up to its first NUL byte
		for _, b := range piece {
			if b == 0 {
				break
			}
			w.WriteByte(b)
		}
		w.WriteString("'\n")
	}
	if f.ids {
		w.WriteString("]\n")
	}
	if f.showCount {
		fmt.Fprintf(w, "Total number of tokens: %d\n", len(tokens))
	}
	return w.Flush()
}
