// Port of llama.cpp tools/server/server-schema.cpp (the completion
// schema: eval_llama_cmpl_schema) and tools/server/server-task.cpp
// (task_params::to_json) (v0.5.0).

package httpapi

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/vocab"
)

// taskParams are one request's parameters (task_params): the engine's
// options and what the HTTP layer reads itself.
type taskParams struct {
	o serve.Options

	verbose, includeUsage bool
	ssePing               int32
	nCmpl                 int32
	responseFields        []string
	lora                  map[int]float32
	backendSampling       bool
	// shown is the logit bias as the pin's params hold it (ignore_eos's
	// end-of-generation biases appended)
	shown []sample.LogitBias

	// (the grammar, its laziness and triggers are the sampler's:
	// o.Sampling)
	preserved []int32 // sorted, as the pin's std::set

	// the chat parser's (common_chat_parser_params)
	chatFormat         int
	reasoningFormat    string
	reasoningInContent bool
	generationPrompt   string
	parseToolCalls     bool
	chatParser         string
	isContinuation     bool
	echo               bool

	reasoningControl       bool
	reasoningBudgetTokens  int32
	reasoningBudgetStart   []int32
	reasoningBudgetEnd     [][]int32
	reasoningBudgetForced  []int32
	messageDelimitersGiven bool
}

// schemaCtx is field_eval_context.
type schemaCtx struct {
	p     *taskParams
	base  serve.Options
	s     Settings
	vocab *vocab.Vocab
	eog   []sample.LogitBias
	data  ojson.Value
}

// field is one field of the schema: its names (the first present one
// is read), and what it does with the value.
type field struct {
	names []string
	// nested fields are read from an object of this name
	nested []field
	eval   func(c *schemaCtx, name string, v ojson.Value) error
}

// evalSchema is eval_llama_cmpl_schema: the server's defaults, then each
// field of the request read in the schema's order. A field's error is
// "Field 'NAME': ..." (an invalid request).
func evalSchema(v *vocab.Vocab, base serve.Options, s Settings, data ojson.Value) (*taskParams, error) {
	p := &taskParams{o: base, ssePing: int32(s.ssePing()), nCmpl: 1, verbose: s.Verbose,
		reasoningFormat: "deepseek", reasoningBudgetTokens: -1}
	p.o.Sampling.LogitBias = slices.Clone(base.Sampling.LogitBias)
	p.shown = slices.Clone(p.o.Sampling.LogitBias)
	c := &schemaCtx{p: p, base: base, s: s, vocab: v, data: data}
	for _, t := range v.EOG() {
		c.eog = append(c.eog, sample.LogitBias{Token: t, Bias: float32(math.Inf(-1))})
	}
	if err := evalFields(c, schema(), data); err != nil {
		return nil, err
	}
	p.reasoningInContent = p.o.Stream && p.reasoningFormat == "deepseek-legacy"
	p.o.PreservedTokens = p.preserved
	// the generation prompt, which the template put at the prompt's end,
	// is the grammar's start too (an output-format or tool-call grammar's)
	p.o.Sampling.GenerationPrompt = p.generationPrompt
	return p, nil
}

func evalFields(c *schemaCtx, fields []field, data ojson.Value) error {
	for _, f := range fields {
		if f.nested != nil {
			for _, n := range f.names {
				if x, ok := data.Get(n); ok && x.IsObject() {
					if err := evalFields(c, f.nested, x); err != nil {
						return err
					}
					break
				}
			}
			continue
		}
		for _, n := range f.names {
			if !hasValue(data, n) {
				continue
			}
			if err := f.eval(c, n, data.At(n)); err != nil {
				return invalidf("Field '%s': %s", n, err.Error())
			}
			break
		}
	}
	return nil
}

// Field makers: a bool, a number with soft limits (clamped) or hard ones
// (refused), and one of a handler's own.
func fBool(name string, dst func(*taskParams) *bool) field {
	return field{names: []string{name}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
		b, err := getBool(v)
		if err != nil {
			return err
		}
		*dst(c.p) = b
		return nil
	}}
}

func fI32(names []string, lo, hi int32, hard bool, dst func(*taskParams) *int32) field {
	return field{names: names, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
		x, err := getInt32(v)
		if err != nil {
			return err
		}
		if hard && (x < lo || x > hi) {
			return fmt.Errorf("Value must be between %d <= value <= %d, but got %d", lo, hi, x)
		}
		*dst(c.p) = max(lo, min(hi, x))
		return nil
	}}
}

func fInt(names []string, lo, hi int32, hard bool, dst func(*taskParams) *int) field {
	var tmp int32
	f := fI32(names, lo, hi, hard, func(*taskParams) *int32 { return &tmp })
	eval := f.eval
	f.eval = func(c *schemaCtx, n string, v ojson.Value) error {
		if err := eval(c, n, v); err != nil {
			return err
		}
		*dst(c.p) = int(tmp)
		return nil
	}
	return f
}

func fF32(name string, lo, hi float32, hard bool, dst func(*taskParams) *float32) field {
	return field{names: []string{name}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
		x, err := getFloat32(v)
		if err != nil {
			return err
		}
		if hard && (x < lo || x > hi) {
			return fmt.Errorf("Value must be between %s <= value <= %s, but got %s", cppFloat(lo), cppFloat(hi), cppFloat(x))
		}
		// std::max(min, std::min(max, v)): NaN is not possible here
		if x > hi {
			x = hi
		}
		if x < lo {
			x = lo
		}
		*dst(c.p) = x
		return nil
	}}
}

// cppFloat is std::to_string of a float: "%f".
func cppFloat(f float32) string { return fmt.Sprintf("%f", f) }

const (
	i32max = math.MaxInt32
	i32min = math.MinInt32
)

var f32max = float32(math.MaxFloat32)

// schema is make_llama_cmpl_schema, field for field.
func schema() []field {
	return []field{
		fBool("verbose", func(p *taskParams) *bool { return &p.verbose }),
		fBool("timings_per_token", func(p *taskParams) *bool { return &p.o.TimingsPerToken }),
		fBool("stream", func(p *taskParams) *bool { return &p.o.Stream }),
		{names: []string{"stream_options"}, nested: []field{fBool("include_usage", func(p *taskParams) *bool { return &p.includeUsage })}},
		fBool("cache_prompt", func(p *taskParams) *bool { return &p.o.CachePrompt }),
		fBool("return_tokens", func(p *taskParams) *bool { return &p.o.ReturnTokens }),
		fBool("return_progress", func(p *taskParams) *bool { return &p.o.ReturnProgress }),
		fI32([]string{"sse_ping_interval"}, -1, i32max, true, func(p *taskParams) *int32 { return &p.ssePing }),
		fInt([]string{"n_predict", "max_completion_tokens", "max_tokens"}, -1, i32max, true, func(p *taskParams) *int { return &p.o.NPredict }),
		fInt([]string{"n_indent"}, 0, i32max, true, func(p *taskParams) *int { return &p.o.NIndent }),
		fInt([]string{"n_keep"}, -1, i32max, true, func(p *taskParams) *int { return &p.o.NKeep }),
		fInt([]string{"n_discard"}, 0, i32max, true, func(p *taskParams) *int { return &p.o.NDiscard }),
		{names: []string{"n_cmpl", "n"}, eval: func(c *schemaCtx, n string, v ojson.Value) error {
			return fI32([]string{n}, 1, int32(max(c.s.NParallel, 1)), true, func(p *taskParams) *int32 { return &p.nCmpl }).eval(c, n, v)
		}},
		fInt([]string{"n_cache_reuse"}, 0, i32max, true, func(p *taskParams) *int { return &p.o.NCacheReuse }),
		{names: []string{"t_max_predict_ms"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			x, err := getInt64(v)
			if err != nil {
				return err
			}
			if x < -1 {
				return fmt.Errorf("Value must be between -1 <= value <= %d, but got %d", int64(math.MaxInt64), x)
			}
			c.p.o.TMaxPredictMS = x
			return nil
		}},
		{names: []string{"response_fields"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			c.p.responseFields = value(c.data, "response_fields", nil, getStrings)
			return nil
		}},

		fI32([]string{"top_k"}, 0, i32max, false, func(p *taskParams) *int32 { return &sp(p).TopK }),
		fF32("top_p", 0, 1, false, func(p *taskParams) *float32 { return &sp(p).TopP }),
		fF32("min_p", 0, 1, false, func(p *taskParams) *float32 { return &sp(p).MinP }),
		fF32("top_n_sigma", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).TopNSigma }),
		fF32("xtc_probability", 0, 1, false, func(p *taskParams) *float32 { return &sp(p).XTCProbability }),
		fF32("xtc_threshold", 0, 1, false, func(p *taskParams) *float32 { return &sp(p).XTCThreshold }),
		fF32("typical_p", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).TypP }),
		fF32("temperature", 0, float32(math.Inf(1)), false, func(p *taskParams) *float32 { return &sp(p).Temp }),
		fF32("dynatemp_range", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).DynatempRange }),
		fF32("dynatemp_exponent", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).DynatempExponent }),
		fI32([]string{"repeat_last_n"}, 0, i32max, true, func(p *taskParams) *int32 { return &sp(p).PenaltyLastN }),
		fF32("repeat_penalty", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).PenaltyRepeat }),
		fF32("frequency_penalty", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).PenaltyFreq }),
		fF32("presence_penalty", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).PenaltyPresent }),
		fF32("dry_multiplier", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).DryMultiplier }),
		{names: []string{"dry_base"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			x, err := getFloat32(v)
			if err != nil {
				return err
			}
			if x < 1 {
				x = c.base.Sampling.DryBase
			}
			sp(c.p).DryBase = x
			return nil
		}},
		fI32([]string{"dry_allowed_length"}, 0, i32max, true, func(p *taskParams) *int32 { return &sp(p).DryAllowedLength }),
		fI32([]string{"dry_penalty_last_n"}, 0, i32max, true, func(p *taskParams) *int32 { return &sp(p).DryPenaltyLastN }),
		fI32([]string{"mirostat"}, 0, 2, false, func(p *taskParams) *int32 { return &sp(p).Mirostat }),
		fF32("mirostat_tau", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).MirostatTau }),
		fF32("mirostat_eta", -f32max, f32max, false, func(p *taskParams) *float32 { return &sp(p).MirostatEta }),
		fF32("adaptive_target", -f32max, 1, false, func(p *taskParams) *float32 { return &sp(p).AdaptiveTarget }),
		fF32("adaptive_decay", 0, 0.99, true, func(p *taskParams) *float32 { return &sp(p).AdaptiveDecay }),
		{names: []string{"seed"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			x, err := getUint32(v)
			if err != nil {
				return err
			}
			sp(c.p).Seed = x
			return nil
		}},
		fI32([]string{"n_probs", "logprobs"}, i32min, i32max, false, func(p *taskParams) *int32 { return &sp(p).NProbs }),
		fI32([]string{"min_keep"}, 0, i32max, true, func(p *taskParams) *int32 { return &sp(p).MinKeep }),
		fBool("backend_sampling", func(p *taskParams) *bool { return &p.backendSampling }),
		fBool("post_sampling_probs", func(p *taskParams) *bool { return &p.o.PostSamplingProbs }),

		{names: []string{"lora"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			if !v.IsArray() {
				return fmt.Errorf("Error: 'lora' must be an array of objects with 'id' and 'scale' fields")
			}
			m, err := parseLoraRequest(v)
			if err != nil {
				return err
			}
			c.p.lora = m
			return nil
		}},
		{names: []string{"dry_sequence_breakers"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			b := value(c.data, "dry_sequence_breakers", nil, getStrings)
			if len(b) == 0 {
				return fmt.Errorf("Error: dry_sequence_breakers must be a non-empty array of strings")
			}
			sp(c.p).DrySequenceBreakers = b
			return nil
		}},
		{names: []string{"json_schema", "grammar"}, eval: evalGrammar},
		fBool("grammar_lazy", func(p *taskParams) *bool { return &sp(p).GrammarLazy }),

		{names: []string{"chat_format"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			x, err := getInt32(v)
			if err != nil {
				return err
			}
			c.p.chatFormat = int(x)
			return nil
		}},
		{names: []string{"reasoning_format"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			s, err := getString(v)
			if err != nil {
				return err
			}
			f, err := reasoningFormatFromName(s)
			if err != nil {
				return err
			}
			c.p.reasoningFormat = f
			c.p.reasoningInContent = c.p.o.Stream && f == "deepseek-legacy"
			return nil
		}},
		{names: []string{"generation_prompt"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			s, err := getString(v)
			c.p.generationPrompt = s
			return err
		}},
		fBool("parse_tool_calls", func(p *taskParams) *bool { return &p.parseToolCalls }),
		{names: []string{"chat_parser"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			s, err := getString(v)
			c.p.chatParser = s
			return err
		}},
		{names: []string{"continue_final_message"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			cont, err := continuationParse(v)
			c.p.isContinuation = cont != 0
			return err
		}},
		fBool("echo", func(p *taskParams) *bool { return &p.echo }),

		{names: []string{"preserved_tokens"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			for _, t := range iterate(v) {
				s, err := getString(t)
				if err != nil {
					return err
				}
				ids, err := c.vocab.Tokenize(s, false, true)
				if err != nil {
					return err
				}
				if len(ids) == 1 && !slices.Contains(c.p.preserved, ids[0]) {
					c.p.preserved = append(c.p.preserved, ids[0])
					slices.Sort(c.p.preserved)
				}
			}
			return nil
		}},
		{names: []string{"grammar_triggers"}, eval: evalTriggers},
		fBool("reasoning_control", func(p *taskParams) *bool { return &p.reasoningControl }),
		fI32([]string{"reasoning_budget_tokens"}, -1, i32max, true, func(p *taskParams) *int32 { return &p.reasoningBudgetTokens }),
		{names: []string{"reasoning_budget_start_tag"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			s, err := getString(v)
			if err != nil {
				return err
			}
			c.p.reasoningBudgetStart, err = c.vocab.Tokenize(s, false, true)
			return err
		}},
		{names: []string{"reasoning_budget_end_tags", "reasoning_budget_end_tag"}, eval: evalBudgetEnd},
		{names: []string{"reasoning_budget_message"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			if len(c.p.reasoningBudgetEnd) == 0 {
				return nil
			}
			end := slices.Clone(c.p.reasoningBudgetEnd[0])
			if msg := value(c.data, "reasoning_budget_message", "", getString); msg != "" {
				m, err := c.vocab.Tokenize(msg, false, true)
				if err != nil {
					return err
				}
				end = append(m, end...)
			}
			c.p.reasoningBudgetForced = end
			return nil
		}},
		{names: []string{"logit_bias"}, eval: evalLogitBias},
		{names: []string{"ignore_eos"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			b, err := getBool(v)
			if err != nil {
				return err
			}
			sp(c.p).IgnoreEOS = b
			if b {
				c.p.shown = append(c.p.shown, c.eog...)
			}
			return nil
		}},
		{names: []string{"stop"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			var stop []string
			switch {
			case v.IsArray():
				for _, w := range v.Elems() {
					if w.IsNull() || ((w.IsArray() || w.IsObject()) && w.Len() == 0) {
						continue // word.empty(): a string is never empty to nlohmann
					}
					s, err := getString(w)
					if err != nil {
						return err
					}
					stop = append(stop, s)
				}
			case v.IsString():
				stop = append(stop, v.Str())
			}
			if len(stop) == 0 {
				stop = slices.Clone(c.base.Stop)
			}
			c.p.o.Stop = stop
			return nil
		}},
		{names: []string{"samplers"}, eval: func(c *schemaCtx, _ string, v ojson.Value) error {
			switch {
			case v.IsArray():
				names, err := getStrings(v)
				if err != nil {
					return err
				}
				ks, _ := sample.ParseSamplers(strings.Join(names, ";"))
				sp(c.p).Samplers = ks
			case v.IsString():
				ks, _ := sample.ParseSamplingSeq(v.Str())
				sp(c.p).Samplers = ks
			}
			return nil
		}},
	}
}

// sp is the request's sampling parameters.
func sp(p *taskParams) *sample.Params { return &p.o.Sampling }

// evalGrammar is the json_schema and grammar field: a JSON schema becomes
// a grammar (json_schema wins where both are given), a grammar is taken
// as it is; either replaces the server's (--grammar, --json-schema).
func evalGrammar(c *schemaCtx, _ string, _ ojson.Value) error {
	s := sp(c.p)
	if has(c.data, "json_schema") && !has(c.data, "grammar") {
		sch := value(c.data, "json_schema", ojson.ObjectValue(), asJSON)
		if sch.IsObject() && sch.Len() == 0 {
			sch = obj("type", "object")
		}
		g, err := schemaToGrammar(sch)
		if err != nil {
			return fmt.Errorf("\"json_schema\": %s", err.Error())
		}
		s.Grammar, s.JSONSchema, s.GrammarType = g, "", sample.GrammarOutputFormat
		return nil
	}
	g := value(c.data, "grammar", "", getString)
	if g == "" {
		return nil
	}
	// grammar_type "tool_calls" is what the chat endpoints set for the
	// template's grammar: one the generation prompt advances
	s.Grammar, s.JSONSchema, s.GrammarType = g, "", sample.GrammarUser
	if value(c.data, "grammar_type", "", getString) == "tool_calls" {
		s.GrammarType = sample.GrammarToolCalls
	}
	return nil
}

// evalTriggers is the grammar_triggers field: a word that is one token
// (a preserved one) becomes that token's trigger.
func evalTriggers(c *schemaCtx, _ string, v ojson.Value) error {
	s := sp(c.p)
	for _, t := range iterate(v) {
		tt, err := at(t, "type")
		if err != nil {
			return err
		}
		typ, err := getInt32(tt)
		if err != nil {
			return err
		}
		vv, err := at(t, "value")
		if err != nil {
			return err
		}
		val, err := getString(vv)
		if err != nil {
			return err
		}
		tr := sample.GrammarTrigger{Type: sample.TriggerType(typ), Value: val}
		switch tr.Type {
		case sample.TriggerToken:
			tv, err := at(t, "token")
			if err != nil {
				return err
			}
			if tr.Token, err = getInt32(tv); err != nil {
				return err
			}
		case sample.TriggerWord:
			ids, err := c.vocab.Tokenize(val, false, true)
			if err != nil {
				return err
			}
			if len(ids) == 1 {
				if !slices.Contains(c.p.preserved, ids[0]) {
					return fmt.Errorf("Grammar trigger word should be marked as preserved token: %s", val)
				}
				tr = sample.GrammarTrigger{Type: sample.TriggerToken, Value: val, Token: ids[0]}
			}
		}
		s.GrammarTriggers = append(s.GrammarTriggers, tr)
	}
	if s.GrammarLazy && len(s.GrammarTriggers) == 0 {
		return fmt.Errorf("Error: no triggers set for lazy grammar!")
	}
	return nil
}

// iterate is a range-for over a json: an array's elements, an object's
// values, a scalar itself.
func iterate(v ojson.Value) []ojson.Value {
	switch {
	case v.IsArray():
		return v.Elems()
	case v.IsObject():
		var out []ojson.Value
		for _, m := range v.Members() {
			out = append(out, m.Value)
		}
		return out
	case v.IsNull():
		return nil
	}
	return []ojson.Value{v}
}

// evalBudgetEnd is the reasoning_budget_end_tags field.
func evalBudgetEnd(c *schemaCtx, _ string, _ ojson.Value) error {
	c.p.reasoningBudgetEnd = nil
	add := func(tag string) error {
		if tag == "" {
			return nil
		}
		ids, err := c.vocab.Tokenize(tag, false, true)
		c.p.reasoningBudgetEnd = append(c.p.reasoningBudgetEnd, ids)
		return err
	}
	if has(c.data, "reasoning_budget_end_tags") {
		for _, t := range iterate(c.data.At("reasoning_budget_end_tags")) {
			s, err := getString(t)
			if err != nil {
				return err
			}
			if err := add(s); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := getString(c.data.At("reasoning_budget_end_tag"))
	if err != nil {
		return err
	}
	return add(s)
}

// evalLogitBias is the logit_bias field: [[token or text, bias], ...] or
// {"token or text": bias}; false bans the token.
func evalLogitBias(c *schemaCtx, _ string, v ojson.Value) error {
	var out []sample.LogitBias
	nVocab := int32(c.vocab.NTokens())
	bias := func(x ojson.Value) (float32, bool) {
		switch {
		case x.IsNumber():
			f, _ := getFloat32(x)
			return f, true
		case x.IsBool() && !x.Bool():
			return float32(math.Inf(-1)), true
		}
		return 0, false
	}
	text := func(s string, b float32) error {
		ids, err := c.vocab.Tokenize(s, false, false)
		for _, t := range ids {
			out = append(out, sample.LogitBias{Token: t, Bias: b})
		}
		return err
	}
	switch {
	case v.IsArray():
		for _, el := range v.Elems() {
			if !el.IsArray() || el.Len() != 2 {
				continue
			}
			b, ok := bias(el.Index(1))
			if !ok {
				continue
			}
			switch t := el.Index(0); {
			case t.IsInteger():
				tok, _ := getInt32(t)
				if tok >= 0 && tok < nVocab {
					out = append(out, sample.LogitBias{Token: tok, Bias: b})
				}
			case t.IsString():
				if err := text(t.Str(), b); err != nil {
					return err
				}
			}
		}
	case v.IsObject():
		for _, m := range v.Members() {
			b, ok := bias(m.Value)
			if !ok {
				continue
			}
			if tok, ok := strtol(m.Key); ok {
				if tok >= 0 && tok < int64(nVocab) {
					out = append(out, sample.LogitBias{Token: int32(tok), Bias: b})
				}
				continue
			}
			if err := text(m.Key, b); err != nil {
				return err
			}
		}
	}
	c.p.o.Sampling.LogitBias = out
	c.p.shown = slices.Clone(out)
	if c.p.o.Sampling.IgnoreEOS {
		c.p.shown = append(c.p.shown, c.eog...)
	}
	return nil
}

// strtol is strtol(s, &end, 10) with *end == 0: the whole key a number
// (leading spaces and a sign allowed, as strtol allows them), cast to
// llama_token as the pin casts it.
func strtol(s string) (int64, bool) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	if t == "" {
		return 0, s == "" // strtol of "" parses nothing: *end == 0 with value 0
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			if strings.HasPrefix(t, "-") {
				return int64(int32(math.MinInt64 & 0xFFFFFFFF)), true
			}
			return -1, true // LONG_MAX cast to int32
		}
		return 0, false
	}
	return int64(int32(n)), true
}

// parseLoraRequest is parse_lora_request: [{"id": N, "scale": F}, ...].
func parseLoraRequest(v ojson.Value) (map[int]float32, error) {
	m := map[int]float32{}
	for _, e := range iterate(v) {
		idv, err := at(e, "id")
		if err != nil {
			return nil, err
		}
		id, err := getInt32(idv)
		if err != nil {
			return nil, err
		}
		sv, err := at(e, "scale")
		if err != nil {
			return nil, err
		}
		s, err := getFloat32(sv)
		if err != nil {
			return nil, err
		}
		m[int(id)] = s
	}
	return m, nil
}

// reasoningFormatFromName is common_reasoning_format_from_name.
func reasoningFormatFromName(s string) (string, error) {
	switch s {
	case "none", "auto", "deepseek", "deepseek-legacy":
		return s, nil
	}
	return "", fmt.Errorf("Unknown reasoning format: %s", s)
}

// continuationParse is common_chat_continuation_parse.
func continuationParse(v ojson.Value) (int, error) {
	switch {
	case v.IsBool():
		if v.Bool() {
			return 1, nil
		}
		return 0, nil
	case v.IsString():
		switch v.Str() {
		case "auto":
			return 1, nil
		case "reasoning":
			return 2, nil
		case "content":
			return 3, nil
		}
		return 0, fmt.Errorf("Invalid continue_final_message value: %s", v.Str())
	}
	return 0, fmt.Errorf("continue_final_message must be a boolean or a string")
}

// toJSON is task_params::to_json: the request's parameters as answers
// and /props show them (onlyMetrics: the shorter form of /props).
func (p *taskParams) toJSON(onlyMetrics bool) ojson.Value {
	s := &p.o.Sampling
	samplers := make([]string, 0, len(s.Samplers))
	for _, k := range s.Samplers {
		samplers = append(samplers, k.String())
	}
	lora := ojson.ArrayValue()
	ids := make([]int, 0, len(p.lora))
	for id := range p.lora {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		lora.Append(obj("id", id, "scale", p.lora[id]))
	}
	o := obj("seed", s.Seed, "temperature", s.Temp, "dynatemp_range", s.DynatempRange, "dynatemp_exponent", s.DynatempExponent,
		"top_k", s.TopK, "top_p", s.TopP, "min_p", s.MinP, "top_n_sigma", s.TopNSigma, "xtc_probability", s.XTCProbability,
		"xtc_threshold", s.XTCThreshold, "typical_p", s.TypP, "repeat_last_n", s.PenaltyLastN, "repeat_penalty", s.PenaltyRepeat,
		"presence_penalty", s.PenaltyPresent, "frequency_penalty", s.PenaltyFreq, "dry_multiplier", s.DryMultiplier,
		"dry_base", s.DryBase, "dry_allowed_length", s.DryAllowedLength, "dry_penalty_last_n", s.DryPenaltyLastN)
	if !onlyMetrics {
		o.Set("dry_sequence_breakers", jv(nonNil(s.DrySequenceBreakers)))
	}
	o.Set("mirostat", jv(s.Mirostat))
	o.Set("mirostat_tau", jv(s.MirostatTau))
	o.Set("mirostat_eta", jv(s.MirostatEta))
	o.Set("adaptive_target", jv(s.AdaptiveTarget))
	o.Set("adaptive_decay", jv(s.AdaptiveDecay))
	if !onlyMetrics {
		o.Set("stop", jv(nonNil(p.o.Stop)))
	}
	o.Set("max_tokens", jv(p.o.NPredict))
	o.Set("n_predict", jv(p.o.NPredict))
	o.Set("n_keep", jv(p.o.NKeep))
	o.Set("n_discard", jv(p.o.NDiscard))
	o.Set("ignore_eos", jv(s.IgnoreEOS))
	o.Set("stream", jv(p.o.Stream))
	if !onlyMetrics {
		lb := ojson.ArrayValue()
		for _, b := range p.shown {
			lb.Append(obj("bias", b.Bias, "token", b.Token))
		}
		o.Set("logit_bias", lb)
	}
	o.Set("n_probs", jv(s.NProbs))
	o.Set("min_keep", jv(s.MinKeep))
	if !onlyMetrics {
		o.Set("grammar", jv(s.Grammar))
		o.Set("grammar_lazy", jv(s.GrammarLazy))
		tr := ojson.ArrayValue()
		for _, t := range s.GrammarTriggers {
			x := obj("type", int(t.Type), "value", t.Value)
			if t.Type == sample.TriggerToken {
				x.Set("token", jv(t.Token))
			}
			tr.Append(x)
		}
		o.Set("grammar_triggers", tr)
		o.Set("preserved_tokens", jv(nonNil(p.preserved)))
	}
	o.Set("chat_format", jv(chatFormatName(p.chatFormat)))
	o.Set("reasoning_format", jv(p.reasoningFormat))
	o.Set("reasoning_in_content", jv(p.reasoningInContent))
	o.Set("generation_prompt", jv(p.generationPrompt))
	o.Set("samplers", jv(nonNil(samplers)))
	o.Set("speculative.types", jv("none"))
	o.Set("timings_per_token", jv(p.o.TimingsPerToken))
	o.Set("post_sampling_probs", jv(p.o.PostSamplingProbs))
	o.Set("backend_sampling", jv(p.backendSampling))
	o.Set("lora", lora)
	return o
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// chatFormatName is common_chat_format_name.
func chatFormatName(f int) string {
	switch f {
	case 0:
		return "Content-only"
	case 1:
		return "peg-simple"
	case 2:
		return "peg-native"
	case 3:
		return "peg-gemma4"
	case 4:
		return "peg-minimax-m3"
	}
	return "Content-only"
}
