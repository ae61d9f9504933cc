// Port of llama.cpp src/llama-grammar.cpp (v0.5.0): the trigger patterns
// of lazy grammars (llama_grammar_trigger_pattern).

package grammar

import "fmt"

// triggerPattern is llama_grammar_trigger_pattern: a regular expression
// the text a lazy grammar buffered is matched against.
type triggerPattern struct {
	pattern string
	re      *ecmaRegex
}

// PatternError is a trigger pattern std::regex refuses (llama.cpp throws
// out of the grammar's init).
type PatternError struct {
	Pattern string
	Msg     string
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("grammar: trigger pattern %q: %s", e.Pattern, e.Msg)
}

func compileTrigger(p string) (*triggerPattern, error) {
	re, err := compileECMA(p)
	if err != nil {
		return nil, &PatternError{p, err.Error()}
	}
	return &triggerPattern{p, re}, nil
}

// find is llama_grammar_trigger_pattern::find: where the constrained text
// starts, the first non-empty group's start (or the match's), or false.
// A pattern that starts with '^' and ends with '$' must match the whole
// text first; then, as any pattern, it is searched for anywhere.
func (tp *triggerPattern) find(input []byte) (int, bool, error) {
	start := func(subs []reSub) int {
		for _, s := range subs[1:] {
			if s.matched && s.second > s.first {
				return s.first
			}
		}
		return subs[0].first
	}
	if p := tp.pattern; len(p) > 0 && p[0] == '^' && p[len(p)-1] == '$' {
		subs, ok, err := tp.re.match(input, true)
		if err != nil {
			return 0, false, err
		}
		if ok {
			return start(subs), true, nil
		}
	}
	subs, ok, err := tp.re.match(input, false)
	if err != nil || !ok {
		return 0, false, err
	}
	return start(subs), true, nil
}

// RegexEscape is llama.cpp's regex_escape: s with each of .^$|()*+?[]{}\
// escaped, a word as a trigger pattern takes it.
func RegexEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.', '^', '$', '|', '(', ')', '*', '+', '?', '[', ']', '{', '}', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
