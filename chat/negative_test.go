package chat

import (
	"testing"
)

// The comparisons above see a difference where there is one: each field
// of an apply changed in turn, a parser with one node changed, a parse of
// another reply.
func TestComparisonsSeeDifferences(t *testing.T) {
	names, srcs := pinTemplates(t)
	o := startOracle(t)
	var us ours
	tool := Tool{Name: "get_weather", Description: "w", Parameters: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`}
	q := &request{src: srcs[names[0]], in: Inputs{Messages: []Message{{Role: "user", Content: "hi"}}, Tools: []Tool{tool},
		ReasoningFormat: ReasoningDeepSeek}, replies: []reply{{"Hello", false}}}
	for _, n := range names {
		if n == "Qwen3-Coder.jinja" {
			q.src = srcs[n]
		}
	}
	want := o.apply(q)
	same := us.apply(q)
	if d := diffParams(&same, &want); d != "" {
		t.Fatalf("the control differs already: %s", d)
	}
	changes := map[string]func(r *applyResult){
		"prompt":            func(r *applyResult) { r.params.Prompt += " " },
		"format":            func(r *applyResult) { r.params.Format++ },
		"grammar":           func(r *applyResult) { r.params.Grammar = r.params.Grammar[1:] },
		"grammar_lazy":      func(r *applyResult) { r.params.GrammarLazy = !r.params.GrammarLazy },
		"generation_prompt": func(r *applyResult) { r.params.GenerationPrompt += "x" },
		"supports_thinking": func(r *applyResult) { r.params.SupportsThinking = !r.params.SupportsThinking },
		"thinking tags":     func(r *applyResult) { r.params.ThinkingEndTags = append(r.params.ThinkingEndTags, "x") },
		"triggers":          func(r *applyResult) { r.params.GrammarTriggers[0].Type++ },
		"preserved":         func(r *applyResult) { r.params.PreservedTokens = r.params.PreservedTokens[1:] },
		"stops":             func(r *applyResult) { r.params.AdditionalStops = []string{"x"} },
		"delimiters":        func(r *applyResult) { r.params.MessageDelimiters[0].Role = RoleTool },
		"parser":            func(r *applyResult) { r.params.parserJSON = r.params.parserJSON[:40] + "1" + r.params.parserJSON[41:] },
		"parse":             func(r *applyResult) { r.parsed[0].msg.Content += "!" },
		"error":             func(r *applyResult) { r.err = "no" },
	}
	for name, change := range changes {
		got := us.apply(q)
		change(&got)
		if diffParams(&got, &want) == "" {
			t.Errorf("a changed %s is not seen", name)
		}
	}
	// and a parser whose rules differ only in order is the same
	if !sameParser(`{"parsers":[],"rules":{"a":1,"b":2},"root":0}`, `{"parsers":[],"rules":{"b":2,"a":1},"root":0}`) {
		t.Error("the rules' order matters to sameParser")
	}
}
