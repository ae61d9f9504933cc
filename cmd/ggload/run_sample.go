// Port of llama.cpp common/arg.cpp (v0.5.0): the sampling options.

package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/sample"
)

// sampleFlags are the sampling options of llama.cpp's common/arg.cpp: the
// parameters as the user set them, each field set named in Explicit (a
// model's own sampling defaults leave those alone; the others keep their
// zero, llama.cpp's default).
type sampleFlags struct {
	p sample.Params
	// seq is --sampler-seq's chain, which llama.cpp does not count as the
	// user's (a model's general.sampling.sequence overrides it)
	seq []sample.Kind
	// breakers: the first --dry-sequence-breaker clears the defaults
	breakers bool
}

func newSampleFlags() sampleFlags { return sampleFlags{} }

// params are the sampler's parameters for model m (nil: none): the
// options, and the model's sampling defaults where the user set none, as
// common_init_from_params applies them (a model's sequence of samplers
// overrides --sampler-seq's, which llama.cpp does not count as the
// user's); with escape (-e, the default), the DRY sequence breakers'
// escapes processed, as common_params_parse processes them.
func (sf *sampleFlags) params(m *gguf.Model, escape bool) sample.Params {
	p := sf.p
	if escape && p.DrySequenceBreakers != nil {
		p.DrySequenceBreakers = slices.Clone(p.DrySequenceBreakers)
		for i, b := range p.DrySequenceBreakers {
			p.DrySequenceBreakers[i] = processEscapes(b)
		}
	}
	if m != nil {
		p.FromModel(m)
	}
	if sf.seq != nil && p.Explicit&sample.SetSamplers == 0 {
		p.Samplers, p.Explicit = sf.seq, p.Explicit|sample.SetSamplers
	}
	return p
}

// floatArg reads a float as llama.cpp's options do (std::stof).
func floatArg(v string) (float32, error) { return stof(v) }

// int32Arg reads an int as llama.cpp's options do (std::stoi).
func int32Arg(v string) (int32, error) { return stoi(v) }

// skipped warns of the sampler names llama.cpp skips (it warns too) and
// passes any other error on.
func skipped(err error) error {
	var ue *sample.UnknownError
	if errors.As(err, &ue) {
		fmt.Fprintf(os.Stderr, "ggload: warning: %v: skipped, as llama.cpp skips it\n", err)
		return nil
	}
	return err
}

// add registers the sampling options in s.
func (sf *sampleFlags) add(s *optionSet) {
	s.group("sampling (common_sampler, as llama-completion samples)")
	p := &sf.p
	fl := func(names []string, help string, dst *float32, set sample.Set, check func(float32) error) {
		s.add(&option{names: names, value: "N", help: help, set: func(v string) error {
			f, err := floatArg(v)
			if err != nil {
				return err
			}
			if check != nil {
				if err := check(f); err != nil {
					return err
				}
			}
			*dst, p.Explicit = f, p.Explicit|set
			return nil
		}})
	}
	in := func(names []string, help string, dst *int32, set sample.Set, check func(int32) error) {
		s.add(&option{names: names, value: "N", help: help, set: func(v string) error {
			n, err := int32Arg(v)
			if err != nil {
				return err
			}
			if check != nil {
				if err := check(n); err != nil {
					return err
				}
			}
			*dst, p.Explicit = n, p.Explicit|set
			return nil
		}})
	}
	finite := func(what string) func(float32) error {
		return func(f float32) error {
			if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
				return fmt.Errorf("%s must be finite", what)
			}
			return nil
		}
	}
	nonNeg := func(what string) func(int32) error {
		return func(n int32) error {
			if n < 0 {
				return fmt.Errorf("invalid %s = %d", what, n)
			}
			return nil
		}
	}
	s.add(&option{names: []string{"--samplers"}, value: "SAMPLERS", help: "the samplers in order, separated by ';' (default: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)",
		set: func(v string) error {
			kinds, err := sample.ParseSamplers(v)
			if err := skipped(err); err != nil {
				return err
			}
			p.Samplers, p.Explicit, sf.seq = kinds, p.Explicit|sample.SetSamplers, nil
			return nil
		}})
	s.add(&option{names: []string{"-s", "--seed"}, value: "SEED", help: "the RNG's seed (default: 4294967295, a random seed)",
		set: func(v string) error {
			n, err := stoul32(v)
			if err != nil {
				return err
			}
			p.Seed, p.Explicit = n, p.Explicit|sample.SetSeed
			return nil
		}})
	s.add(&option{names: []string{"--sampler-seq", "--sampling-seq"}, value: "SEQUENCE", help: "the samplers in order, one letter each (default: edskypmxt)",
		set: func(v string) error {
			kinds, err := sample.ParseSamplingSeq(v)
			if err := skipped(err); err != nil {
				return err
			}
			if p.Explicit&sample.SetSamplers != 0 {
				p.Samplers = kinds // (after --samplers: it replaces the user's chain)
			} else {
				sf.seq = kinds
			}
			return nil
		}})
	s.add(&option{names: []string{"--ignore-eos"}, help: "never end at an end-of-generation token (their logits biased by -inf)", on: func(on bool) error { p.IgnoreEOS = on; return nil }})
	s.add(&option{names: []string{"--temp", "--temperature"}, value: "N", env: "LLAMA_ARG_TEMPERATURE", help: "temperature (default: 0.80; 0: the greatest logit)",
		set: func(v string) error {
			f, err := floatArg(v)
			if err != nil {
				return err
			}
			p.Temp, p.Explicit = max(f, 0), p.Explicit|sample.SetTemp
			return nil
		}})
	in([]string{"--top-k"}, "top-k (default: 40, 0 = off)", &p.TopK, sample.SetTopK, nil)
	fl([]string{"--top-p"}, "top-p (default: 0.95, 1.0 = off)", &p.TopP, sample.SetTopP, nil)
	fl([]string{"--min-p"}, "min-p (default: 0.05, 0.0 = off)", &p.MinP, sample.SetMinP, nil)
	fl([]string{"--top-nsigma", "--top-n-sigma"}, "top-n-sigma (default: -1.00, -1.0 = off)", &p.TopNSigma, sample.SetTopNSigma, nil)
	fl([]string{"--xtc-probability"}, "XTC probability (default: 0.00, 0.0 = off)", &p.XTCProbability, sample.SetXTCProbability, nil)
	fl([]string{"--xtc-threshold"}, "XTC threshold (default: 0.10, 1.0 = off)", &p.XTCThreshold, sample.SetXTCThreshold, nil)
	fl([]string{"--typical", "--typical-p"}, "locally typical sampling's p (default: 1.00, 1.0 = off)", &p.TypP, sample.SetTypP, nil)
	in([]string{"--repeat-last-n"}, "the last N tokens the penalties look at (default: 64, 0 = off)", &p.PenaltyLastN, sample.SetPenaltyLastN, func(n int32) error {
		if n < 0 {
			return fmt.Errorf("invalid repeat-last-n = %d", n)
		}
		p.NPrev, p.Explicit = max(p.Resolved().NPrev, n), p.Explicit|sample.SetNPrev
		return nil
	})
	fl([]string{"--repeat-penalty"}, "repetition penalty (default: 1.00, 1.0 = off)", &p.PenaltyRepeat, sample.SetPenaltyRepeat, func(f float32) error {
		if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) || f <= 0 || math.IsInf(float64(1/f), 0) {
			return fmt.Errorf("repeat-penalty must be finite and greater than 0")
		}
		return nil
	})
	fl([]string{"--presence-penalty"}, "presence penalty (default: 0.00, 0.0 = off)", &p.PenaltyPresent, 0, finite("presence-penalty"))
	fl([]string{"--frequency-penalty"}, "frequency penalty (default: 0.00, 0.0 = off)", &p.PenaltyFreq, 0, finite("frequency-penalty"))
	fl([]string{"--dry-multiplier"}, "DRY multiplier (default: 0.00, 0.0 = off)", &p.DryMultiplier, 0, nil)
	s.add(&option{names: []string{"--dry-base"}, value: "N", help: "DRY base (default: 1.75; a value below 1 is ignored, as llama.cpp ignores it)",
		set: func(v string) error {
			f, err := floatArg(v)
			if err != nil {
				return err
			}
			if f >= 1 {
				p.DryBase, p.Explicit = f, p.Explicit|sample.SetDryBase
			}
			return nil
		}})
	in([]string{"--dry-allowed-length"}, "DRY allowed length (default: 2)", &p.DryAllowedLength, sample.SetDryAllowedLength, nil)
	in([]string{"--dry-penalty-last-n"}, "DRY's last N tokens (default: 64, 0 = off)", &p.DryPenaltyLastN, sample.SetDryPenaltyLastN, nonNeg("dry-penalty-last-n"))
	s.add(&option{names: []string{"--dry-sequence-breaker"}, value: "STRING", help: "add a DRY sequence breaker, the first one clearing the defaults ('\\n', ':', '\"', '*'); \"none\" for none",
		set: func(v string) error {
			if !sf.breakers {
				p.DrySequenceBreakers, sf.breakers = nil, true
				p.Explicit |= sample.SetDrySequenceBreakers
			}
			if v == "none" {
				p.DrySequenceBreakers = nil
			} else {
				p.DrySequenceBreakers = append(p.DrySequenceBreakers, v)
			}
			return nil
		}})
	fl([]string{"--adaptive-target"}, "adaptive-p target (default: -1.00, negative = off)", &p.AdaptiveTarget, sample.SetAdaptiveTarget, nil)
	fl([]string{"--adaptive-decay"}, "adaptive-p decay (default: 0.90)", &p.AdaptiveDecay, sample.SetAdaptiveDecay, nil)
	fl([]string{"--dynatemp-range"}, "dynamic temperature range (default: 0.00, 0.0 = off)", &p.DynatempRange, 0, nil)
	fl([]string{"--dynatemp-exp"}, "dynamic temperature exponent (default: 1.00)", &p.DynatempExponent, sample.SetDynatempExponent, nil)
	in([]string{"--mirostat"}, "Mirostat (default: 0; 1 = Mirostat, 2 = Mirostat 2.0)", &p.Mirostat, sample.SetMirostat, nil)
	fl([]string{"--mirostat-lr"}, "Mirostat learning rate, eta (default: 0.10)", &p.MirostatEta, sample.SetMirostatEta, nil)
	fl([]string{"--mirostat-ent"}, "Mirostat target entropy, tau (default: 5.00)", &p.MirostatTau, sample.SetMirostatTau, nil)
	s.add(&option{names: []string{"-l", "--logit-bias"}, value: "TOKEN_ID(+/-)BIAS", help: "add BIAS to a token's logit, e.g. 15043+1 or 15043-1",
		set: func(v string) error {
			id, b, err := logitBias(v)
			if err != nil {
				return err
			}
			p.LogitBias = append(p.LogitBias, sample.LogitBias{Token: id, Bias: b})
			return nil
		}})
	// the grammar options, as llama.cpp's: the last one given wins; a
	// JSON schema is converted when the option is read
	grammarOpt := func(names []string, value, help string, typ sample.GrammarType, read func(string) (string, error)) {
		s.add(&option{names: names, value: value, help: help, set: func(v string) error {
			g, err := read(v)
			if err != nil {
				return err
			}
			p.Grammar, p.JSONSchema, p.GrammarType = g, "", typ
			return nil
		}})
	}
	readFile := func(v string) (string, error) {
		b, err := os.ReadFile(v)
		if err != nil {
			return "", fmt.Errorf("failed to open file '%s': %w", v, err)
		}
		return string(b), nil
	}
	schema := func(text string) (string, error) {
		v, err := ojson.ParseString(text)
		if err != nil {
			return "", err
		}
		return grammar.FromJSONSchemaWarn(v, func(msg string) {
			fmt.Fprintf(os.Stderr, "WARNING: JSON schema conversion was incomplete: %s\n", msg)
		})
	}
	grammarOpt([]string{"--grammar"}, "GRAMMAR", "BNF-like grammar to constrain generations (see samples in llama.cpp's grammars/ dir)", sample.GrammarUser,
		func(v string) (string, error) { return v, nil })
	grammarOpt([]string{"--grammar-file"}, "FNAME", "file to read grammar from", sample.GrammarUser, readFile)
	grammarOpt([]string{"-j", "--json-schema"}, "SCHEMA", "JSON schema to constrain generations, e.g. '{\"type\": \"object\"}' for any JSON object", sample.GrammarOutputFormat, schema)
	grammarOpt([]string{"-jf", "--json-schema-file"}, "FILE", "file containing a JSON schema to constrain generations", sample.GrammarOutputFormat, func(v string) (string, error) {
		text, err := readFile(v)
		if err != nil {
			return "", err
		}
		return schema(text)
	})
}
