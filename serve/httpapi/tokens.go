// Port of llama.cpp tools/server/server-common.cpp (tokenize_mixed,
// tokenize_input_prompts, validate_utf8, is_valid_utf8,
// format_prompt_infill, format_prompt_rerank, tokens_to_str) (v0.5.0).

package httpapi

import (
	"errors"
	"strings"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/vocab"
)

// tokenizeMixed is tokenize_mixed: a string, or an array of strings and
// token ids (BOS added only where the first element is a string).
func tokenizeMixed(v *vocab.Vocab, p ojson.Value, addSpecial, parseSpecial bool) ([]int32, error) {
	if !p.IsArray() {
		s, err := getString(p)
		if err != nil {
			return nil, err
		}
		return v.Tokenize(s, addSpecial, parseSpecial)
	}
	var out []int32
	first := true
	for _, e := range p.Elems() {
		if e.IsString() {
			toks, err := v.Tokenize(e.Str(), addSpecial && first, parseSpecial)
			if err != nil {
				return nil, err
			}
			first = false
			out = append(out, toks...)
			continue
		}
		first = false
		t, err := getInt32(e)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func isArrayOfNumbers(p ojson.Value) bool {
	if !p.IsArray() {
		return false
	}
	for _, e := range p.Elems() {
		if !e.IsInteger() {
			return false
		}
	}
	return true
}

func isArrayOfMixed(p ojson.Value) bool {
	if !p.IsArray() {
		return false
	}
	str, num := false, false
	for _, e := range p.Elems() {
		str = str || e.IsString()
		num = num || e.IsInteger()
		if str && num {
			return true
		}
	}
	return false
}

func arrayHasNumbers(p ojson.Value) bool {
	if !p.IsArray() {
		return false
	}
	for _, e := range p.Elems() {
		if e.IsInteger() {
			return true
		}
	}
	return false
}

// errPromptShape is tokenize_input_subprompt's refusal.
var errPromptShape = errors.New("\"prompt\" elements must be a string, a list of tokens, a JSON object containing a prompt string, or a list of mixed strings & tokens.")

// tokenizeSubprompt is tokenize_input_subprompt (no multimodal data:
// ggload serves no projector yet).
func tokenizeSubprompt(v *vocab.Vocab, p ojson.Value, addSpecial, parseSpecial bool) ([]int32, error) {
	switch {
	case p.IsString() || isArrayOfMixed(p):
		return tokenizeMixed(v, p, addSpecial, parseSpecial)
	case isArrayOfNumbers(p):
		return getTokens(p)
	case has(p, "prompt_string"):
		if has(p, "multimodal_data") {
			return nil, errors.New("Multimodal data provided, but model does not support multimodal requests.")
		}
		return tokenizeMixed(v, p.At("prompt_string"), addSpecial, parseSpecial)
	}
	return nil, errPromptShape
}

// tokenizeInputPrompts is tokenize_input_prompts: one prompt, or an array
// of them (an array without token ids).
func tokenizeInputPrompts(v *vocab.Vocab, p ojson.Value, addSpecial, parseSpecial bool) ([][]int32, error) {
	var out [][]int32
	if p.IsArray() && !arrayHasNumbers(p) {
		for _, e := range p.Elems() {
			t, err := tokenizeSubprompt(v, e, addSpecial, parseSpecial)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	} else {
		t, err := tokenizeSubprompt(v, p, addSpecial, parseSpecial)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("\"prompt\" must not be empty")
	}
	return out, nil
}

// isValidUTF8 is is_valid_utf8 (lead and continuation bytes only).
func isValidUTF8(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c <= 0x7F:
			i++
		case c&0xE0 == 0xC0:
			if len(s)-i < 2 || s[i+1]&0xC0 != 0x80 {
				return false
			}
			i += 2
		case c&0xF0 == 0xE0:
			if len(s)-i < 3 || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 {
				return false
			}
			i += 3
		case c&0xF8 == 0xF0:
			if len(s)-i < 4 || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 || s[i+3]&0xC0 != 0x80 {
				return false
			}
			i += 4
		default:
			return false
		}
	}
	return true
}

// piece is common_token_to_piece(vocab, token) (special tokens shown).
func piece(v *vocab.Vocab, t int32, special bool) string {
	b, err := v.AppendPiece(nil, t, 0, special)
	if err != nil {
		return ""
	}
	return string(b)
}

// tokensToStr is tokens_to_str: each token's piece, specials shown.
func tokensToStr(v *vocab.Vocab, toks []int32) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(piece(v, t, true))
	}
	return b.String()
}

// formatInfill is format_prompt_infill: the FIM repo-level pattern
// ([FIM_REP]myproject [FIM_SEP]file chunk ... [FIM_PRE]prefix
// [FIM_SUF]suffix [FIM_MID]prompt), cut to the batch and context.
func formatInfill(v *vocab.Vocab, prefix, suffix, extra ojson.Value, nBatch, nPredict, nCtx int, spm bool, prompt []int32) ([]int32, error) {
	tok := func(s string) []int32 {
		t, _ := v.Tokenize(s, false, false)
		return t
	}
	var extraToks []int32
	pre, err := tokenizeMixed(v, prefix, false, false)
	if err != nil {
		return nil, err
	}
	suf, err := tokenizeMixed(v, suffix, false, false)
	if err != nil {
		return nil, err
	}
	if rep := v.FIMRep(); rep != vocab.Null {
		extraToks = append(extraToks, rep)
		extraToks = append(extraToks, tok("myproject\n")...)
	}
	for _, chunk := range iterate(extra) {
		text := value(chunk, "text", "", getString)
		filename := value(chunk, "filename", "tmp", getString)
		if sep := v.FIMSep(); sep != vocab.Null {
			extraToks = append(extraToks, sep)
			extraToks = append(extraToks, tok(filename+"\n")...)
		} else {
			extraToks = append(extraToks, tok("\n\n--- snippet ---\n\n")...)
		}
		extraToks = append(extraToks, tok(text)...)
	}
	if sep := v.FIMSep(); sep != vocab.Null {
		extraToks = append(extraToks, sep)
		extraToks = append(extraToks, tok("filename\n")...)
	}
	nPrefix := min(len(pre), 3*(nBatch/4))
	nSuffix := min(len(suf), max(0, nBatch/4-(2+len(prompt))))
	nExtra := min(max(0, nCtx-nBatch-2*nPredict), len(extraToks))
	pre = append([]int32{v.FIMPre()}, pre[len(pre)-nPrefix:]...)
	pre = append(pre, prompt...)
	suf = append([]int32{v.FIMSuf()}, suf[:nSuffix]...)
	inp, end := pre, suf
	if spm {
		inp, end = suf, pre
	}
	var out []int32
	out = append(out, extraToks[len(extraToks)-nExtra:]...)
	if v.AddBOS() {
		out = append(out, v.BOS())
	}
	out = append(out, inp...)
	out = append(out, end...)
	out = append(out, v.FIMMid())
	return out, nil
}

// formatRerank is format_prompt_rerank: the model's rerank template
// with the query and document, or BOS query EOS SEP document EOS as the
// vocabulary adds them.
func formatRerank(v *vocab.Vocab, tmpl string, hasTmpl bool, query, doc string) ([]int32, error) {
	if hasTmpl {
		p := strings.ReplaceAll(tmpl, "{query}", query)
		p = strings.ReplaceAll(p, "{document}", doc)
		return v.Tokenize(p, false, true)
	}
	q, err := v.Tokenize(query, false, false)
	if err != nil {
		return nil, err
	}
	d, err := v.Tokenize(doc, false, false)
	if err != nil {
		return nil, err
	}
	eos := v.EOS()
	if eos == vocab.Null {
		eos = v.SEP()
	}
	var out []int32
	if v.AddBOS() {
		out = append(out, v.BOS())
	}
	out = append(out, q...)
	if v.AddEOS() {
		out = append(out, eos)
	}
	if v.AddSEP() {
		out = append(out, v.SEP())
	}
	out = append(out, d...)
	if v.AddEOS() {
		out = append(out, eos)
	}
	return out, nil
}
