// Port of llama.cpp common/jinja/caps.h and caps.cpp (v0.5.0): what a
// template supports, found by rendering it on probe conversations and
// looking at which of their values it used.

package jinja

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ggload/ggload/internal/ojson"
)

// Caps is jinja::caps. Its zero value is not the pin's default: use the
// Template's.
type Caps struct {
	SupportsTools             bool
	SupportsToolCalls         bool
	SupportsSystemRole        bool
	SupportsParallelToolCalls bool
	// the reasoning of every assistant message in the history, not just
	// the last one's
	SupportsPreserveReasoning bool
	SupportsReasoningEffort   bool
	// one of the two content kinds is supported
	SupportsStringContent   bool
	SupportsTypedContent    bool
	SupportsObjectArguments bool
}

// Map is caps::to_map.
func (c Caps) Map() map[string]bool {
	return map[string]bool{
		"supports_string_content":      c.SupportsStringContent,
		"supports_typed_content":       c.SupportsTypedContent,
		"supports_tools":               c.SupportsTools,
		"supports_tool_calls":          c.SupportsToolCalls,
		"supports_parallel_tool_calls": c.SupportsParallelToolCalls,
		"supports_system_role":         c.SupportsSystemRole,
		"supports_preserve_reasoning":  c.SupportsPreserveReasoning,
		"supports_reasoning_effort":    c.SupportsReasoningEffort,
		"supports_object_arguments":    c.SupportsObjectArguments,
	}
}

// String is caps::to_string.
func (c Caps) String() string {
	m := c.Map()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("Caps(\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s=%t\n", k, m[k])
	}
	b.WriteString(")")
	return b.String()
}

// Caps is what the template supports (caps_get), probed once. An error is
// a probe whose analysis failed (the template changed the probe's
// messages under it): llama.cpp's common_chat_template fails there too.
func (t *Template) Caps() (Caps, error) {
	t.capsOnce.Do(func() { t.caps, t.capsErr = t.probeCaps() })
	return t.caps, t.capsErr
}

// ov builds an ojson object from key, value pairs.
func ov(kv ...any) ojson.Value {
	o := ojson.ObjectValue()
	for i := 0; i < len(kv); i += 2 {
		o.Set(kv[i].(string), jv(kv[i+1]))
	}
	return o
}

func jv(x any) ojson.Value {
	switch t := x.(type) {
	case ojson.Value:
		return t
	case string:
		return ojson.StringValue(t)
	case bool:
		return ojson.BoolValue(t)
	}
	panic(fmt.Sprintf("jinja: probe value %T", x))
}

func av(vals ...ojson.Value) ojson.Value { return ojson.ArrayValue(vals...) }

type probe struct {
	messages ojson.Value
	tools    ojson.Value // null for the pin's json::array()
	setup    func(r *renderer, sc *scope)
	analyze  func(r *renderer, sc *scope, ok bool, messages, tools value, out string)
}

// tryProbe is caps_try_execute: a failed render is a result, not an error.
func (t *Template) tryProbe(p probe) {
	r := &renderer{stats: true, now: defaultNow()}
	root := newRootScope()
	tools := p.tools
	if tools.IsNull() {
		tools = av()
	}
	vars := ov("messages", p.messages, "tools", tools, "bos_token", "", "eos_token", "", "add_generation_prompt", true)
	for _, m := range vars.Members() {
		root.set(m.Key, fromJSON(m.Value, true))
	}
	if p.setup != nil {
		p.setup(r, root)
	}
	messages := root.getVal("messages")
	toolsV := root.getVal("tools")
	parts, err := t.run(r, root)
	out := ""
	if err == nil {
		out = jstr{parts: parts}.str()
	}
	p.analyze(r, root, err == nil, messages, toolsV, out)
}

// getVal is context::get_val: undefined (named) where the name is unset.
func (s *scope) getVal(name string) value {
	if v := s.lookup(name); v != nil {
		return v
	}
	return mkUndef(name)
}

func used(v value) bool {
	st := v.b().st
	return st != nil && st.used
}

func hasOp(v value, op string) bool {
	st := v.b().st
	return st != nil && st.has(op)
}

// member is value->at(key) for the analysis: objects by key, arrays by
// index; a miss is an error, as in the pin.
func (r *renderer) member(v value, key any) value {
	switch k := key.(type) {
	case int:
		a, ok := v.(*arrVal)
		if !ok {
			typeError(v, "is not an array value")
		}
		return arrAt(a, int64(k))
	case string:
		o, ok := v.(*objVal)
		if !ok {
			typeError(v, "is not an object value")
		}
		return r.objAt(o, mkStr(k))
	}
	return nil
}

func (r *renderer) path(v value, keys ...any) value {
	for _, k := range keys {
		v = r.member(v, k)
	}
	return v
}

func (t *Template) probeCaps() (res Caps, err error) {
	res = Caps{SupportsTools: true, SupportsToolCalls: true, SupportsSystemRole: true,
		SupportsParallelToolCalls: true, SupportsStringContent: true}
	defer func() {
		if x := recover(); x != nil {
			res, err = Caps{}, t.renderError(x)
		}
	}()
	t.probeContent(&res)
	t.probeSystemRole(&res)
	t.probeTools(&res)
	t.probeReasoning(&res)
	return res, nil
}

// probeContent: string content, typed content (content parts).
func (t *Template) probeContent(res *Caps) {
	const marker = "STRING_MARKER"
	checksForString := false
	t.tryProbe(probe{
		messages: av(ov("role", "user", "content", marker)),
		analyze: func(r *renderer, _ *scope, ok bool, messages, _ value, out string) {
			content := r.path(messages, 0, "content")
			if hasOp(content, "test_is_string") {
				checksForString = true
			}
			asArray := hasOp(content, "selectattr") || hasOp(content, "array_access")
			if asArray {
				res.SupportsTypedContent = true
			}
			if !ok || asArray && !strings.Contains(out, marker) {
				res.SupportsStringContent = false
			}
		},
	})
	if checksForString {
		t.tryProbe(probe{
			messages: av(ov("role", "user", "content", av())),
			analyze: func(r *renderer, _ *scope, ok bool, messages, _ value, _ string) {
				content := r.path(messages, 0, "content")
				if (hasOp(content, "selectattr") || hasOp(content, "array_access")) && ok {
					res.SupportsTypedContent = true
				}
			},
		})
	}
}

// probeSystemRole: whether the template uses a system message.
func (t *Template) probeSystemRole(res *Caps) {
	t.tryProbe(probe{
		messages: av(ov("role", "system", "content", "System message"), ov("role", "user", "content", "User message")),
		analyze: func(r *renderer, _ *scope, _ bool, messages, _ value, _ string) {
			if !used(r.path(messages, 0, "content")) {
				res.SupportsSystemRole = false
			}
		},
	})
}

var (
	probeTools = av(ov("name", "tool", "type", "function", "function", ov(
		"name", "tool1", "description", "Tool description",
		"parameters", ov("type", "object",
			"properties", ov("arg", ov("type", "string", "description", "Arg description")),
			"required", av(ojson.StringValue("arg"))))))
	probeObjArgs = ov("arg", "value")
	probeStrArgs = ojson.StringValue(`{"arg": "value"}`)
)

func probeCall(id string, args ojson.Value) ojson.Value {
	return ov("id", id, "type", "function", "function", ov("name", "tool1", "arguments", args))
}

// probeConversation is a tool round: the call(s), the result, an answer.
func probeConversation(calls ...ojson.Value) ojson.Value {
	return av(
		ov("role", "user", "content", "User message"),
		ov("role", "assistant", "content", "", "tool_calls", av(calls...)),
		ov("role", "tool", "content", "Tool response", "tool_call_id", "call00001"),
		ov("role", "assistant", "content", "The tool response was 'tool response'"),
		ov("role", "user", "content", "User message"))
}

// probeTools: tools, tool calls with object or string arguments, parallel
// calls.
func (t *Template) probeTools(res *Caps) {
	t.tryProbe(probe{
		messages: probeConversation(probeCall("call00001", probeObjArgs)),
		tools:    probeTools,
		analyze: func(r *renderer, _ *scope, ok bool, messages, tools value, _ string) {
			if !ok {
				return
			}
			if !used(r.path(tools, 0, "function", "name")) {
				res.SupportsTools = false
			}
			calls := r.path(messages, 1, "tool_calls")
			if !used(calls) {
				res.SupportsToolCalls = false
				return
			}
			if used(r.path(calls, 0, "function", "arguments", "arg")) {
				res.SupportsObjectArguments = true
			}
		},
	})
	if !res.SupportsObjectArguments {
		t.tryProbe(probe{
			messages: probeConversation(probeCall("call00001", probeStrArgs)),
			tools:    probeTools,
			analyze: func(r *renderer, _ *scope, ok bool, messages, tools value, _ string) {
				if !ok {
					res.SupportsToolCalls = false
					res.SupportsTools = false
					return
				}
				if !used(r.path(tools, 0, "function", "name")) {
					res.SupportsTools = false
				}
				if !used(r.path(messages, 1, "tool_calls")) {
					res.SupportsToolCalls = false
				}
			},
		})
	}
	args := probeStrArgs
	if res.SupportsObjectArguments {
		args = probeObjArgs
	}
	t.tryProbe(probe{
		messages: probeConversation(probeCall("call00001", args), probeCall("call00002", args)),
		tools:    probeTools,
		analyze: func(r *renderer, _ *scope, ok bool, messages, _ value, _ string) {
			if !ok || !used(r.path(messages, 1, "tool_calls", 1, "function")) {
				res.SupportsParallelToolCalls = false
			}
		},
	})
}

// probeReasoning: the reasoning of earlier turns kept, reasoning effort.
func (t *Template) probeReasoning(res *Caps) {
	const placeholder = "<REASONING_CONTENT_PLACEHOLDER>"
	t.tryProbe(probe{
		messages: av(
			ov("role", "user", "content", "User message"),
			ov("role", "assistant", "content", "Assistant message", "reasoning_content", placeholder),
			ov("role", "user", "content", "User message"),
			ov("role", "assistant", "content", "Assistant message", "reasoning_content", "Reasoning content"),
			ov("role", "user", "content", "User message")),
		setup: func(_ *renderer, sc *scope) {
			sc.set("enable_thinking", &boolVal{v: true})
			applyPreserveReasoning(sc, true)
		},
		analyze: func(_ *renderer, _ *scope, _ bool, _, _ value, out string) {
			if strings.Contains(out, placeholder) {
				res.SupportsPreserveReasoning = true
			}
		},
	})
	t.tryProbe(probe{
		messages: av(ov("role", "user", "content", "User message")),
		setup: func(_ *renderer, sc *scope) {
			sc.set("enable_thinking", &boolVal{v: true})
			applyReasoningEffort(sc, "low")
		},
		analyze: func(_ *renderer, sc *scope, _ bool, _, _ value, _ string) {
			res.SupportsReasoningEffort = used(sc.getVal("reasoning_effort"))
		},
	})
}

func applyPreserveReasoning(sc *scope, enabled bool) {
	sc.set("preserve_thinking", &boolVal{v: enabled})
	sc.set("clear_thinking", &boolVal{v: !enabled})
	sc.set("truncate_history_thinking", &boolVal{v: !enabled})
	sc.set("drop_thinking", &boolVal{v: !enabled})
}

// applyReasoningEffort binds both names to one value, as the pin does, so
// that a use of either marks it.
func applyReasoningEffort(sc *scope, effort string) {
	v := mkStr(effort)
	sc.set("reasoning_effort", v)
	sc.set("reasoning_strength", v)
}
