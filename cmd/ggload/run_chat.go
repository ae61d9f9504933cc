// Port of llama.cpp tools/completion/completion.cpp (v0.5.0), its
// conversation mode, and console::readline_simple of common/console.cpp.

package main

// Conversation mode of run, as llama-completion's (-cnv): the model's
// chat template applied turn by turn (common_chat_format_single), the
// reply printed as it is generated, the next user message read from the
// standard input.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/vocab"
)

// chatStdin is what conversation mode reads the user's turns from.
var chatStdin io.Reader = os.Stdin

// chatFlags are llama-completion's conversation options.
type chatFlags struct {
	mode         int // -1 auto (on when the model has a template), 0 off, 1 on
	system       string
	singleTurn   bool
	template     string
	templateFile string
	noJinja      bool
	pure         bool
}

func (cf *chatFlags) add(s *optionSet) {
	s.group("conversation (llama-completion's -cnv: the model's chat template, turn by turn)")
	s.add(&option{names: []string{"-cnv", "--conversation"}, neg: []string{"-no-cnv", "--no-conversation"},
		help: "conversation mode: the prompt (if any) and each line read from the standard input become user messages in the chat template, and the replies are printed as they are generated (default: on where the model has a chat template)",
		on: func(on bool) error {
			cf.mode = 0
			if on {
				cf.mode = 1
			}
			return nil
		}})
	s.add(&option{names: []string{"-sys", "--system-prompt"}, value: "PROMPT", help: "the system message",
		set: func(v string) error { cf.system = v; return nil }})
	s.add(&option{names: []string{"-sysf", "--system-prompt-file"}, value: "FNAME", help: "the system message, from a file (one final newline dropped)",
		set: func(v string) error {
			b, err := readPromptFile(v)
			if err != nil {
				return err
			}
			cf.system = strings.TrimSuffix(string(b), "\n")
			return nil
		}})
	s.add(&option{names: []string{"-st", "--single-turn"}, help: "one turn only: with -p, no input is read",
		on: func(on bool) error { cf.singleTurn = on; return nil }})
	s.add(&option{names: []string{"--chat-template"}, env: "LLAMA_ARG_CHAT_TEMPLATE", value: "JINJA_TEMPLATE", help: "the chat template: a Jinja source, or a built-in's name (chatml, llama3, ...; by name under --no-jinja)",
		set: func(v string) error { cf.template = v; return nil }})
	s.add(&option{names: []string{"--chat-template-file"}, env: "LLAMA_ARG_CHAT_TEMPLATE_FILE", value: "JINJA_TEMPLATE_FILE", help: "the chat template, from a file",
		set: func(v string) error {
			b, err := readPromptFile(v)
			if err != nil {
				return err
			}
			cf.template, cf.templateFile = string(b), v
			return nil
		}})
	s.add(&option{names: []string{"--jinja"}, env: "LLAMA_ARG_JINJA", neg: []string{"--no-jinja"}, help: "use llama.cpp's Jinja engine for the chat template (default); --no-jinja uses llama.cpp's built-in formats",
		on: func(on bool) error { cf.noJinja = !on; return nil }})
	s.add(&option{names: []string{"--skip-chat-parsing"}, env: "LLAMA_ARG_SKIP_CHAT_PARSING", neg: []string{"--no-skip-chat-parsing"}, help: "render the conversation without separating reasoning or tools",
		on: func(on bool) error { cf.pure = on; return nil }})
	s.add(&option{names: []string{"--simple-io"}, help: "llama.cpp's basic line input: what ggload always reads",
		on: func(bool) error { return nil }})
	for _, u := range []struct {
		names []string
		value string
	}{{[]string{"-i", "--interactive"}, ""}, {[]string{"-if", "--interactive-first"}, ""}} {
		s.add(&option{names: u.names, value: u.value, unsupported: "llama-completion's interactive mode without a chat template is not part of ggload: use -cnv"})
	}
}

// wanted says whether conversation mode was asked for, so that run may
// start without a prompt: -cnv, or -sys where -no-cnv is not given.
func (cf *chatFlags) wanted() bool { return cf.mode == 1 || cf.mode == -1 && cf.system != "" }

// templates are the chat templates conversation mode applies (the
// model's, or --chat-template's), and whether the mode is on: -cnv, or by
// default where the model has a template of its own or one is given
// (common_chat_templates_was_explicit), as llama-completion decides. With
// --json it is off unless -cnv asks for it.
func (cf *chatFlags) templates(pd *planned, v *vocab.Vocab, asJSON bool) (*chat.Templates, bool, error) {
	if cf.mode == 0 || cf.mode == -1 && asJSON {
		return nil, false, nil
	}
	tm, err := chat.FromModel(pd.m, v, chat.Options{Template: cf.template, Name: cf.templateFile})
	if err != nil {
		return nil, false, fmt.Errorf("run: %w", err)
	}
	if cf.mode == -1 && !tm.WasExplicit() {
		return nil, false, nil
	}
	if !tm.WasExplicit() {
		fmt.Fprintln(os.Stderr, "ggload: run: the model has no chat template: conversation mode uses llama.cpp's fallback (chatml), which may not be what the model was trained on")
	}
	return tm, true, nil
}

// runChat is llama-completion's main loop in conversation mode, on a
// model run has planned and a sampler it has made.
func runChat(ctx context.Context, pd *planned, pf *placeFlags, rf *runFlags, v *vocab.Vocab, smpl *sample.Sampler,
	tm *chat.Templates, stdout io.Writer) error {
	tf, cf := &rf.text, &rf.text.chat
	if rf.asJSON {
		return fmt.Errorf("run: --json takes -no-cnv: conversation mode prints the conversation")
	}
	switch arch := pd.m.Architecture(); {
	case arch == "t5" || arch == "t5encoder" || arch == "eagle3" || arch == "dflash":
		return fmt.Errorf("run: conversation mode takes a model that generates from its own decoder (this is %s): use -no-cnv", arch)
	case v.AddEOS():
		return fmt.Errorf("run: the vocabulary adds EOS to every prompt, which llama-completion refuses for a model without an encoder (it asserts)")
	}
	jinja := !cf.noJinja
	var prompt string
	if tf.given() {
		p, err := tf.promptText()
		if err != nil {
			return err
		}
		prompt = p
	}
	var msgs []chat.Message
	add := func(role, content string) (string, error) {
		m := chat.Message{Role: role, Content: content}
		s, err := tm.FormatSingle(msgs, m, role == "user", jinja, time.Time{})
		msgs = append(msgs, m)
		return s, err
	}
	userPrompt := prompt
	waiting := false
	if cf.system != "" {
		if _, err := add("system", cf.system); err != nil {
			return err
		}
	}
	if userPrompt != "" {
		if _, err := add("user", userPrompt); err != nil {
			return err
		}
	} else {
		waiting = true
	}
	prompt = ""
	if cf.system != "" || userPrompt != "" {
		p, err := tm.Apply(&chat.Inputs{Messages: msgs, NoGenerationPrompt: userPrompt == "", Legacy: !jinja, ForcePureContent: cf.pure})
		if err != nil {
			return err
		}
		prompt = p.Prompt
	}
	embdInp, err := v.Tokenize(prompt, true, true)
	if err != nil {
		return fmt.Errorf("run: tokenizing the prompt: %w", err)
	}
	if !waiting && len(embdInp) == 0 {
		if !(v.AddBOS() && !jinja) {
			return fmt.Errorf("run: input is empty")
		}
		embdInp = []int32{v.BOS()}
	}
	nCtx, nBatch := 0, len(embdInp)
	if cm := pd.plan.Context; cm != nil {
		nCtx, nBatch = int(cm.NCtx), int(cm.NBatch)
	}
	if nBatch <= 0 {
		nBatch = max(len(embdInp), 1)
	}
	if nCtx > 0 && len(embdInp) > nCtx-4 {
		return fmt.Errorf("run: the prompt is too long (%d tokens, max %d)", len(embdInp), nCtx-4)
	}
	ic, release, err := runContext(ctx, pd, pf, rf.threads)
	if err != nil {
		return err
	}
	defer release()

	nPredict := -1
	if rf.stepsSet {
		nPredict = rf.steps
	}
	interactive := true
	isInteracting := true
	if cf.singleTurn && userPrompt != "" {
		interactive, isInteracting = false, false
	}
	text := stdout
	if !isTerminalWriter(stdout) {
		text = unwrapped(stdout)
	}
	emit := func(s string) error {
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		_, err := io.WriteString(text, s)
		return err
	}
	piece := func(t int32, special bool) (string, error) {
		b, err := v.AppendPiece(nil, t, 0, special)
		return string(b), err
	}
	in := bufio.NewReader(chatStdin)
	var lineErr error
	// readLine is console::readline in its simple form: a line, and
	// whether input goes on (a line ending in '\' toggles it; one ending
	// in '/' returns control without its newline)
	readLine := func(multiline bool) (string, bool) {
		var line []byte
		for {
			frag, err := in.ReadSlice('\n')
			if len(line)+len(frag) > maxPromptBytes {
				lineErr = fmt.Errorf("run: a line of the standard input is larger than %s, %w", sizeString(maxPromptBytes), errPromptTooLarge)
				return "", false
			}
			line = append(line, frag...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if len(line) == 0 {
			return "", false
		}
		s := strings.TrimSuffix(string(line), "\n")
		if s != "" {
			switch s[len(s)-1] {
			case '/':
				return s[:len(s)-1], false
			case '\\':
				s = s[:len(s)-1]
				multiline = !multiline
			}
		}
		return s + "\n", multiline
	}

	var embd []int32
	var assistant strings.Builder
	last := int32(-1) // common_sampler_last: the last token accepted since the last reset
	nPast, nConsumed, nRemain := 0, 0, nPredict
	inputEcho, display := true, true
	generated, t0 := 0, time.Now()
	var logits []float32
	nf := nonFinite{pf: pf}
	defer nf.warn(os.Stderr)
	for (nRemain != 0) || interactive {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(embd) > 0 {
			if nCtx > 0 && len(embd) > nCtx-4 {
				skipped := len(embd) - (nCtx - 4)
				embd = embd[:nCtx-4]
				fmt.Fprintf(os.Stderr, "<<input too long: skipped %d token%s>>", skipped, map[bool]string{true: "", false: "s"}[skipped == 1])
			}
			if nCtx > 0 && nPast+len(embd) >= nCtx {
				fmt.Fprintf(os.Stderr, "\n\nmain: context full and context shift is disabled => stopping\n")
				break
			}
			for i := 0; i < len(embd); i += nBatch {
				if err := ic.Decode(infer.Batch{Tokens: embd[i:min(i+nBatch, len(embd))]}); err != nil {
					return err
				}
			}
			nPast += len(embd)
		}
		embd = embd[:0]
		if len(embdInp) <= nConsumed && !isInteracting {
			if logits, err = ic.AppendLogits(logits[:0], -1); err != nil {
				return err
			}
			nf.check(logits, fmt.Sprintf("step %d", generated+1))
			id, err := smpl.Sample(logits)
			if err != nil {
				return fmt.Errorf("run: %w", err)
			}
			smpl.Accept(id)
			last = id
			embd = append(embd, id)
			generated++
			if !waiting && !v.IsEOG(id) {
				p, err := piece(id, false)
				if err != nil {
					return err
				}
				assistant.WriteString(p)
			}
			inputEcho = true
			nRemain--
		} else {
			for len(embdInp) > nConsumed {
				embd = append(embd, embdInp[nConsumed])
				smpl.Accept(embdInp[nConsumed])
				last = embdInp[nConsumed]
				nConsumed++
				if len(embd) == nBatch {
					break
				}
			}
		}
		if inputEcho && display {
			for _, id := range embd {
				p, err := piece(id, tf.special)
				if err != nil {
					return err
				}
				if err := emit(p); err != nil {
					return err
				}
			}
		}
		if inputEcho && len(embdInp) == nConsumed {
			display = true
		}
		if len(embdInp) <= nConsumed {
			if !waiting && last >= 0 && v.IsEOG(last) && interactive {
				if _, err := add("assistant", assistant.String()); err != nil {
					return err
				}
				isInteracting = true
				if err := emit("\n"); err != nil {
					return err
				}
			}
			if !waiting && prompt != "" {
				prompt = ""
				isInteracting = false
			}
			if (nPast > 0 || waiting) && isInteracting {
				if err := emit("\n> "); err != nil {
					return err
				}
				var buf strings.Builder
				for more := true; more; {
					var line string
					line, more = readLine(false)
					buf.WriteString(line)
				}
				buffer := buf.String()
				if lineErr != nil {
					return lineErr
				}
				if buffer == "" {
					if err := emit("EOF by user\n"); err != nil {
						return err
					}
					break
				}
				buffer = strings.TrimSuffix(buffer, "\n")
				if buffer != "" {
					if tf.escape {
						buffer = processEscapes(buffer)
					}
					user, err := add("user", buffer)
					if err != nil {
						return err
					}
					toks, err := v.Tokenize(user, false, true)
					if err != nil {
						return err
					}
					embdInp = append(embdInp, toks...)
					assistant.Reset()
					nRemain -= len(toks)
				}
				inputEcho = false
			}
			if nPast > 0 || waiting {
				if isInteracting {
					smpl.Reset()
					last = -1
				}
				isInteracting = false
				if waiting && cf.singleTurn {
					interactive = false
				}
				waiting = false
			}
		}
		if len(embd) > 0 && v.IsEOG(embd[len(embd)-1]) && !interactive {
			if err := emit(" [end of text]\n"); err != nil {
				return err
			}
			break
		}
		if interactive && nRemain <= 0 && nPredict >= 0 {
			nRemain = nPredict
			isInteracting = true
		}
	}
	if err := emit("\n\n"); err != nil {
		return err
	}
	el := time.Since(t0)
	fmt.Fprintf(os.Stderr, "ggload: conversation: %d messages, %d tokens generated in %.3f s; sampler: %s\n",
		len(msgs), generated, el.Seconds(), smpl.String())
	return nil
}
