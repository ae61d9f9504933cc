package sample

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/vocab"
)

// GrammarType is common_grammar_type: where a grammar comes from, which
// says whether GenerationPrompt is fed to it.
type GrammarType int

// The grammar types.
const (
	GrammarUser         GrammarType = iota // a user's GBNF (--grammar, the server's "grammar"): never prefilled
	GrammarOutputFormat                    // from a JSON schema (--json-schema, "json_schema"): prefilled
	GrammarToolCalls                       // a chat format's tool-call grammar: prefilled
)

// TriggerType is common_grammar_trigger_type.
type TriggerType int

// The trigger types, with common_grammar_trigger_type's values.
const (
	TriggerToken       TriggerType = iota // a token (Token)
	TriggerWord                           // a word, anywhere in the text (Value)
	TriggerPattern                        // a regular expression, searched for (Value)
	TriggerPatternFull                    // a regular expression the whole text must match (Value)
)

// GrammarTrigger is common_grammar_trigger: what wakes a lazy grammar.
type GrammarTrigger struct {
	Type  TriggerType
	Value string
	Token vocab.Token
}

// grammarOf is common_sampler_init's grammar: the grammar sampler of the
// parameters' grammar (or JSON schema), lazy with its triggers where
// GrammarLazy is set, and fed the generation prompt's tokens where its
// type asks for it. Nil where the parameters have no grammar.
func grammarOf(v *vocab.Vocab, p Params) (*grammar.Grammar, error) {
	text, typ := p.Grammar, p.GrammarType
	if p.JSONSchema != "" {
		if p.Grammar != "" {
			return nil, errors.New("sample: a grammar and a JSON schema, where one is wanted")
		}
		schema, err := ojson.ParseString(p.JSONSchema)
		if err != nil {
			return nil, fmt.Errorf("sample: json_schema: %w", err)
		}
		if text, err = grammar.FromJSONSchema(schema, false); err != nil {
			return nil, fmt.Errorf("sample: json_schema: %w", err)
		}
		typ = GrammarOutputFormat
	}
	if text == "" {
		return nil, nil
	}
	if strings.HasPrefix(text, "%llguidance") {
		return nil, errors.New("sample: an llguidance grammar (%llguidance), which llama.cpp's libraries of the pin are built without")
	}
	var patterns []string
	var tokens []vocab.Token
	for _, tr := range p.GrammarTriggers {
		switch tr.Type {
		case TriggerWord:
			patterns = append(patterns, grammar.RegexEscape(tr.Value))
		case TriggerPattern:
			patterns = append(patterns, tr.Value)
		case TriggerPatternFull:
			anchored := "^$"
			if pat := tr.Value; pat != "" {
				anchored = pat
				if pat[0] != '^' {
					anchored = "^" + anchored
				}
				if pat[len(pat)-1] != '$' {
					anchored += "$"
				}
			}
			patterns = append(patterns, anchored)
		case TriggerToken:
			tokens = append(tokens, tr.Token)
		default:
			return nil, fmt.Errorf("sample: unknown grammar trigger type %d", tr.Type)
		}
	}
	var g *grammar.Grammar
	var err error
	if p.GrammarLazy {
		g, err = grammar.NewLazy(v, text, "root", true, patterns, tokens)
	} else {
		g, err = grammar.New(v, text, "root")
	}
	if err != nil {
		return nil, fmt.Errorf("sample: failed to parse grammar: %w", err)
	}
	// the generation prompt's tokens, which the template already put in
	// the prompt, advance an output-format or tool-call grammar
	if p.GenerationPrompt != "" && !p.GrammarLazy && typ != GrammarUser {
		toks, err := v.Tokenize(p.GenerationPrompt, false, true)
		if err != nil {
			return nil, fmt.Errorf("sample: the generation prompt: %w", err)
		}
		for i, t := range toks {
			piece, err := v.AppendPiece(nil, t, 0, true)
			if err != nil {
				return nil, err
			}
			// some tokenizers add a space before the first special token
			if i == 0 && len(piece) > 0 && isCSpace(piece[0]) && !isCSpace(p.GenerationPrompt[0]) {
				continue
			}
			if err := g.Accept(t); err != nil {
				return nil, fmt.Errorf("sample: the grammar refuses the generation prompt %q: %w", p.GenerationPrompt, err)
			}
		}
	}
	return g, nil
}

// Grammar is the sampler's grammar (nil without one), for a look at
// where generation stands in it: whether it may end, whether a lazy
// grammar still awaits its trigger.
func (s *Sampler) Grammar() *grammar.Grammar { return s.grm }

// grammarCheck is common_sampler_sample's grammar: the chain's token
// where the grammar allows it; where it does not, the chain again over
// the logits with every token the grammar refuses at -inf (the
// resampling llama.cpp does, the chain's random draws and all).
func (s *Sampler) grammarCheck(logits []float32, id vocab.Token) (vocab.Token, error) {
	if s.grm == nil || s.grm.Allows(id) {
		return id, nil
	}
	return s.sample(logits, s.grm.Mask())
}

// SampleGrammarFirst is common_sampler_sample with grammar_first set:
// the grammar's -inf put on the logits before the chain, so that every
// candidate the chain leaves fits the grammar (slower: the grammar looks
// at the whole vocabulary each time).
func (s *Sampler) SampleGrammarFirst(logits []float32) (vocab.Token, error) {
	if s.grm == nil {
		return s.sample(logits, nil)
	}
	return s.sample(logits, s.grm.Mask())
}

// AcceptPrompt is common_sampler_accept of a token that was not
// generated (a prompt's): the chain and the last tokens see it, the
// grammar does not.
func (s *Sampler) AcceptPrompt(t vocab.Token) {
	for _, smpl := range s.chain {
		smpl.accept(t)
	}
	s.prev.push(t)
}
