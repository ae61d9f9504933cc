package ggload

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"

	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
)

// GenerateOptions are one request's options. The zero value is
// llama-server's defaults: its sampling (Options.Serve.Sampling, else
// llama.cpp's under the model's own general.sampling.*), no limit on
// the tokens but the slot's context, the server's stop strings.
type GenerateOptions struct {
	// Sampling is the request's sampler chain and seed, as sample.Params
	// says (a zero field: its default, a zero meant as zero: named in
	// Explicit). Zero: the engine's defaults. Otherwise it replaces them,
	// the model's general.sampling.* under the fields it leaves unset, as
	// ggload run and llama.cpp's tools take them. A grammar or a JSON
	// schema constrains the text (in Chat, it goes to the template, as a
	// chat request's json_schema or grammar does).
	Sampling sample.Params
	// NPredict is the most tokens to generate (n_predict); 0: the
	// server's default (Options.Serve.NPredict), -1: no limit.
	NPredict int
	// Stop are stop strings (the text ends before the first one); nil:
	// the server's (Options.Serve.Stop).
	Stop []string
}

// errStopped ends a request whose caller stopped ranging over it.
var errStopped = errors.New("ggload: the caller stopped reading")

// options are the engine's request options of these.
func (m *Model) options(g *GenerateOptions) (serve.Options, error) {
	o := m.e.Defaults()
	if !reflect.ValueOf(g.Sampling).IsZero() {
		sp := g.Sampling
		sp.FromModel(m.gm)
		o.Sampling = sp.Resolved()
		// a grammar or a schema that does not parse or convert is the
		// caller's error, named as such, not a failed request
		if sp.Grammar != "" || sp.JSONSchema != "" {
			if _, err := sample.New(m.e.Vocab(), o.Sampling); err != nil {
				return o, fmt.Errorf("GenerateOptions.Sampling: %w", err)
			}
		}
	}
	switch {
	case g.NPredict < -1:
		return o, fmt.Errorf("GenerateOptions.NPredict %d: want -1 (no limit), 0 (the server's default) or more", g.NPredict)
	case g.NPredict != 0:
		o.NPredict = g.NPredict
	}
	if g.Stop != nil {
		o.Stop = append([]string(nil), g.Stop...)
	}
	o.Stream = true
	return o, nil
}

// Generate streams the text the model generates after prompt, piece by
// piece, as llama-server's /completion streams it (the prompt tokenized
// with the model's BOS and its special tokens' text parsed; a stop
// string's text withheld). The sequence ends when the generation stops
// (end of generation, NPredict, a stop string, the slot's context); an
// error is the sequence's last item. Stopping the loop early, or ctx
// ending, cancels the request and frees its slot.
func (m *Model) Generate(ctx context.Context, prompt string, g GenerateOptions) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if _, err := m.complete(ctx, prompt, g, yield); err != nil && !errors.Is(err, errStopped) {
			yield("", m.fail("generate", err))
		}
	}
}

// complete runs one completion of prompt, each piece of text handed to
// yield (nil: none), and returns its result.
func (m *Model) complete(ctx context.Context, prompt string, g GenerateOptions, yield func(string, error) bool) (*serve.Result, error) {
	o, err := m.options(&g)
	if err != nil {
		return nil, err
	}
	toks, err := m.e.Vocab().Tokenize(prompt, true, true)
	if err != nil {
		return nil, fmt.Errorf("the prompt: %w", err)
	}
	return m.run(ctx, toks, o, yield)
}

// run runs a completion of the prompt's tokens on the engine, each
// token's text to yield.
func (m *Model) run(ctx context.Context, toks []int32, o serve.Options, yield func(string, error) bool) (*serve.Result, error) {
	if len(toks) == 0 {
		return nil, errors.New("the prompt is empty")
	}
	return m.e.Complete(ctx, toks, o, func(ev serve.Event) error {
		if ev.Token == nil || ev.Token.Text == "" || yield == nil {
			return nil
		}
		if !yield(ev.Token.Text, nil) {
			return errStopped
		}
		return nil
	})
}
