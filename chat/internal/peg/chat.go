// Port of llama.cpp common/chat-peg-parser.h and chat-peg-parser.cpp
// (v0.5.0): common_chat_peg_builder, the tags a chat parser marks its
// reply's parts with and the tool-call layouts built from them.

package peg

import (
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/ojson"
)

// The tags of common_chat_peg_builder.
const (
	TagReasoningBlock     = "reasoning-block"
	TagReasoning          = "reasoning"
	TagContent            = "content"
	TagTool               = "tool"
	TagToolOpen           = "tool-open"
	TagToolClose          = "tool-close"
	TagToolID             = "tool-id"
	TagToolName           = "tool-name"
	TagToolArgs           = "tool-args"
	TagToolArg            = "tool-arg"
	TagToolArgOpen        = "tool-arg-open"
	TagToolArgClose       = "tool-arg-close"
	TagToolArgName        = "tool-arg-name"
	TagToolArgValue       = "tool-arg-value"
	TagToolArgStringValue = "tool-arg-string-value"
)

// MaxPermute is COMMON_CHAT_MAX_PERMUTE.
const MaxPermute = 6

// The tag wrappers.
func Reasoning(e Expr) Expr          { return Tag(TagReasoning, e) }
func Content(e Expr) Expr            { return Tag(TagContent, e) }
func Call(e Expr) Expr               { return Tag(TagTool, e) }
func ToolOpen(e Expr) Expr           { return Atomic(Tag(TagToolOpen, e)) }
func ToolClose(e Expr) Expr          { return Atomic(Tag(TagToolClose, e)) }
func ToolID(e Expr) Expr             { return Atomic(Tag(TagToolID, e)) }
func ToolName(e Expr) Expr           { return Atomic(Tag(TagToolName, e)) }
func ToolArgs(e Expr) Expr           { return Tag(TagToolArgs, e) }
func ToolArg(e Expr) Expr            { return Tag(TagToolArg, e) }
func ToolArgOpen(e Expr) Expr        { return Atomic(Tag(TagToolArgOpen, e)) }
func ToolArgClose(e Expr) Expr       { return Atomic(Tag(TagToolArgClose, e)) }
func ToolArgName(e Expr) Expr        { return Atomic(Tag(TagToolArgName, e)) }
func ToolArgValue(e Expr) Expr       { return Tag(TagToolArgValue, e) }
func ToolArgStringValue(e Expr) Expr { return Tag(TagToolArgStringValue, e) }
func ToolArgJSONValue(e Expr) Expr   { return Tag(TagToolArgValue, e) }

// TagWithSafeContent is tag_with_safe_content.
func TagWithSafeContent(tagName, marker string, e Expr) Expr {
	return fn(func(b *Builder) ID {
		p := b.Do(e)
		if marker == "" {
			return b.Do(ZeroOrMore(Choice(p, Rule(tagName, Content(Any())))))
		}
		chunk := b.Do(Rule(tagName, Content(Sum(Not(Lit(marker)), Any(), Until(marker)))))
		return b.Do(ZeroOrMore(Choice(p, chunk)))
	})
}

// Permute matches every parser once, in any order (more than MaxPermute
// in the given order).
func Permute(prefix string, parsers []ID) Expr {
	return fn(func(b *Builder) ID {
		if len(parsers) == 0 {
			return b.Do(Eps())
		}
		if len(parsers) == 1 || len(parsers) > MaxPermute {
			return b.seq(parsers...)
		}
		cache := map[uint32]ID{}
		var remaining func(r uint32) ID
		remaining = func(r uint32) ID {
			if r == 0 {
				return b.Do(Eps())
			}
			if id, ok := cache[r]; ok {
				return id
			}
			alts := b.Do(Choice())
			for i := range parsers {
				bit := uint32(1) << i
				if r&bit != 0 {
					rest := remaining(r &^ bit)
					alts = b.choice(alts, b.seq(parsers[i], rest))
				}
			}
			id := b.Do(Rule(prefix+"-"+strconv.Itoa(int(r)), alts))
			cache[r] = id
			return id
		}
		return remaining(uint32(1)<<len(parsers) - 1)
	})
}

// Prefix is prefix(s, delimiter): s up to the delimiter.
func Prefix(s, delim string) Expr {
	if s == "" {
		return Eps()
	}
	if delim == "" {
		return Lit(s)
	}
	if i := strings.Index(s, delim); i >= 0 {
		s = s[:i]
	}
	return Lit(s)
}

// Optspace is optspace(tag): tag, its leading and trailing spaces
// optional one by one.
func Optspace(tag string) Expr {
	return fn(func(b *Builder) ID {
		p := b.Do(Eps())
		endPrefix, startSuffix := len(tag), len(tag)
		for i := 0; i < len(tag); i++ {
			if !isSpace(tag[i]) {
				endPrefix = i
				break
			}
		}
		for i := len(tag); i > 0; i-- {
			if !isSpace(tag[i-1]) {
				startSuffix = i
				break
			}
		}
		for i := 0; i < endPrefix; i++ {
			p = b.Do(Add(p, Opt(Lit(tag[i:i+1]))))
		}
		p = b.Do(Add(p, Lit(tag[endPrefix:max(startSuffix, endPrefix)])))
		for i := startSuffix; i < len(tag); i++ {
			p = b.Do(Add(p, Opt(Lit(tag[i:i+1]))))
		}
		return p
	})
}

// Items is nlohmann's items(): an object's members, an array's elements
// keyed by their index, once for any other value but null.
func Items(v ojson.Value) []ojson.Member {
	switch v.Kind() {
	case ojson.Object:
		return v.Members()
	case ojson.Array:
		out := make([]ojson.Member, v.Len())
		for i, e := range v.Elems() {
			out[i] = ojson.Member{Key: strconv.Itoa(i), Value: e}
		}
		return out
	case ojson.Null:
		return nil
	}
	return []ojson.Member{{Value: v}}
}

// Empty is nlohmann's empty().
func Empty(v ojson.Value) bool {
	switch v.Kind() {
	case ojson.Null:
		return true
	case ojson.Object, ojson.Array:
		return v.Len() == 0
	}
	return false
}

// ToolParameters is common_chat_tool_parameters: a function tool's
// parameter schema, an empty object's where it has none.
func ToolParameters(function ojson.Value) ojson.Value {
	if p, ok := function.Get("parameters"); ok && !p.IsNull() && !(p.IsObject() && p.Len() == 0) {
		return p
	}
	return ojson.ObjectValue(ojson.Member{Key: "type", Value: ojson.StringValue("object")},
		ojson.Member{Key: "properties", Value: ojson.ObjectValue()})
}

// toolFunctions is the tools' functions with their names, as the
// builders below walk them (a tool without "function" skipped).
func toolFunctions(tools ojson.Value) []ojson.Value {
	var out []ojson.Value
	for _, t := range tools.Elems() {
		if f, ok := t.Get("function"); ok && t.IsObject() {
			out = append(out, f)
		}
	}
	return out
}

// FunctionName is function.at("name") as a string.
func FunctionName(function ojson.Value) string {
	n, ok := function.Get("name")
	if !ok {
		Throw(&Exception{Msg: "[json.exception.out_of_range.403] key 'name' not found"})
	}
	if !n.IsString() {
		Throw(&Exception{Msg: "[json.exception.type_error.302] type must be string, but is " + n.Kind().String()})
	}
	return n.Str()
}

// StandardConstructedTools is standard_constructed_tools: XML-like tool
// calls.
func StandardConstructedTools(markers map[string]string, tools ojson.Value, parallel, force bool) Expr {
	return fn(func(b *Builder) ID {
		if !tools.IsArray() || tools.Len() == 0 {
			return b.Do(Eps())
		}
		marker := func(k, def string) string {
			if v, ok := markers[k]; ok {
				return v
			}
			return def
		}
		sectionStart := marker("tool_call_start_marker", "<tool_call>")
		sectionEnd := marker("tool_call_end_marker", "</tool_call>")
		funcOpener := marker("function_opener", "<function=")
		funcNameSuffix := marker("function_name_suffix", ">")
		funcCloser := marker("function_closer", "</function>")
		keyPrefix := marker("parameter_key_prefix", "<param=")
		keySuffix := marker("parameter_key_suffix", ">")
		paramCloser := marker("parameter_closer", "</param>")

		choices := b.Do(Choice())
		for _, f := range toolFunctions(tools) {
			name := FunctionName(f)
			params := ToolParameters(f)
			args := b.Do(Eps())
			if props := params.At("properties"); params.Has("properties") && !Empty(props) {
				argChoice := b.Do(Choice())
				for _, el := range Items(props) {
					nameParser := b.Do(Choice(Lit(el.Key), Lit(`"`+el.Key+`"`), Lit("'"+el.Key+"'")))
					argRule := b.Do(ToolArg(Sum(ToolArgOpen(Lit(keyPrefix)), ToolArgName(nameParser), Lit(keySuffix),
						ToolArgValue(Until(paramCloser)), ToolArgClose(Lit(paramCloser)))))
					argChoice = b.Do(Or(argChoice, argRule))
				}
				args = b.Do(ZeroOrMore(Add(argChoice, Space())))
			}
			tp := b.Do(Call(Sum(ToolOpen(Sum(Lit(funcOpener), ToolName(Lit(name)), Lit(funcNameSuffix))),
				Space(), ToolArgs(args), Space(), ToolClose(Lit(funcCloser)))))
			choices = b.Do(Or(choices, Rule("tool-"+name, tp)))
		}
		var section ID
		if parallel {
			section = b.Do(TriggerRule("tool-call", Sum(Lit(sectionStart), Space(), OneOrMore(Add(choices, Space())), Lit(sectionEnd))))
		} else {
			section = b.Do(TriggerRule("tool-call", Sum(Lit(sectionStart), Space(), choices, Space(), Lit(sectionEnd))))
		}
		if force {
			return section
		}
		return b.Do(Opt(section))
	})
}

// PythonOrJSONValue is python_or_json_value: Python values and JSON's
// true, false and null.
func PythonOrJSONValue() Expr {
	return fn(func(b *Builder) ID {
		return b.Do(RuleFn("python-or-json-value", func() Expr {
			ws := b.Do(Space())
			value := b.Do(PythonOrJSONValue())
			member := b.Do(Seq(PythonString(), ws, Lit(":"), ws, value))
			members := b.Do(Seq(member, ZeroOrMore(Seq(ws, Lit(","), ws, member))))
			dict := b.Do(RuleFn("python-or-json-dict", func() Expr {
				return Seq(Lit("{"), ws, Choice(Lit("}"), Seq(members, ws, Lit("}"))), ws)
			}))
			elems := b.Do(Seq(value, ZeroOrMore(Seq(Lit(","), ws, value))))
			array := b.Do(RuleFn("python-or-json-array", func() Expr {
				return Seq(Lit("["), ws, Choice(Lit("]"), Seq(elems, ws, Lit("]"))), ws)
			}))
			return Choice(dict, array, PythonString(), PythonNumber(), PythonBool(), PythonNull(), JSONBool(), JSONNull())
		}))
	})
}

// PythonStyleToolCalls is python_style_tool_calls: [name(a="x", b=1)].
func PythonStyleToolCalls(tools ojson.Value, parallel, jsonLiterals bool) Expr {
	return fn(func(b *Builder) ID {
		if !tools.IsArray() || tools.Len() == 0 {
			return b.Do(Eps())
		}
		choices := b.Do(Choice())
		for _, f := range toolFunctions(tools) {
			name := FunctionName(f)
			params := ToolParameters(f)
			args := b.Do(Eps())
			if props := params.At("properties"); params.Has("properties") && !Empty(props) {
				argChoice := b.Do(Choice())
				for _, el := range Items(props) {
					isString := el.Value.IsObject() && el.Value.Has("type") && ojson.Equal(el.Value.At("type"), ojson.StringValue("string"))
					nameParser := b.Do(Lit(el.Key))
					valueParser := b.Do(Eps())
					stringValue := b.Do(ToolArgValue(Choice(
						Sum(Lit(`"`), StringContent('"'), Lit(`"`)),
						Sum(Lit("'"), StringContent('\''), Lit("'")))))
					if isString {
						valueParser = stringValue
					} else if jsonLiterals {
						valueParser = b.Do(ToolArgValue(PythonOrJSONValue()))
					} else {
						valueParser = b.Do(ToolArgValue(PythonValue()))
					}
					argRule := b.Do(ToolArg(Sum(ToolArgOpen(Add(ToolArgName(nameParser), Lit("="))), valueParser, ToolArgClose(Eps()))))
					argChoice = b.Do(Or(argChoice, argRule))
				}
				args = b.Do(Add(argChoice, ZeroOrMore(Sum(S(","), Space(), argChoice))))
			}
			tp := b.Do(Call(Sum(ToolOpen(Add(ToolName(Lit(name)), Lit("("))), Space(), ToolArgs(args), Space(), ToolClose(Lit(")")))))
			choices = b.Do(Or(choices, Rule("tool-"+name, tp)))
		}
		if parallel {
			return b.Do(Sum(S("["), Space(), choices, ZeroOrMore(Sum(S(","), Space(), choices)), Space(), S("]")))
		}
		return b.Do(Sum(S("["), Space(), choices, Space(), S("]")))
	})
}

// keySpec is parse_key_spec: "a.b" as ("a", "b"), "b" as ("", "b").
func keySpec(key string) (string, string) {
	if i := strings.IndexByte(key, '.'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

func quotedIDParser(key string) Expr {
	return Atomic(Sum(Lit(`"`+key+`"`), Space(), Lit(":"), Space(), Lit(`"`), ToolID(StringContent('"')), Lit(`"`)))
}

func genIDParser(key string) Expr {
	return Atomic(Sum(Lit(`"`+key+`"`), Space(), Lit(":"), Space(),
		Choice(Sum(Lit(`"`), ToolID(StringContent('"')), Lit(`"`)), ToolID(JSONNumber()))))
}

func argsSchema(name string, params ojson.Value) Expr {
	return ToolArgs(SchemaJSON(JSON(), "tool-"+name+"-schema", params, false))
}

// jsonToolsFunctionIsKey is build_json_tools_function_is_key:
// {"name": {...}}.
func jsonToolsFunctionIsKey(b *Builder, tools ojson.Value, argsKey, effArgsKey, idKey, genIDKey string) ID {
	choices := b.Do(Choice())
	for _, f := range toolFunctions(tools) {
		name := FunctionName(f)
		params := ToolParameters(f)
		var inner []ID
		if idKey != "" {
			idp := b.Do(quotedIDParser(idKey))
			inner = append(inner, b.Do(Opt(Sum(idp, Space(), Opt(Add(Lit(","), Space()))))))
		}
		if genIDKey != "" {
			gp := b.Do(genIDParser(genIDKey))
			inner = append(inner, b.Do(Opt(Sum(gp, Space(), Opt(Add(Lit(","), Space()))))))
		}
		argsParser := b.Do(Eps())
		if argsKey == "" {
			argsParser = b.Do(argsSchema(name, params))
		} else {
			argsParser = b.Do(Sum(Lit(`"`+effArgsKey+`"`), Space(), Lit(":"), Space(), argsSchema(name, params)))
		}
		inner = append(inner, argsParser)
		obj := b.Do(Eps())
		if argsKey == "" && len(inner) == 1 {
			obj = inner[0]
		} else {
			obj = b.Do(Add(Lit("{"), Space()))
			for i, f := range inner {
				obj = b.Do(Add(obj, f))
				if i < len(inner)-1 {
					obj = b.Do(Add(obj, Space()))
				}
			}
			obj = b.Do(Sum(obj, Space(), Lit("}")))
		}
		tp := b.Do(Call(Sum(ToolOpen(Lit("{")), Space(), Lit(`"`), ToolName(Lit(name)), Lit(`"`), Space(), Lit(":"), Space(),
			obj, Space(), ToolClose(Lit("}")))))
		choices = b.Do(Or(choices, Rule("tool-"+name, tp)))
	}
	return choices
}

// jsonToolsNestedKeys is build_json_tools_nested_keys: {"function":
// {"name": ..., "arguments": ...}}.
func jsonToolsNestedKeys(b *Builder, tools ojson.Value, effNameKey, effArgsKey, idKey, genIDKey string) ID {
	choices := b.Do(Choice())
	namePrefix, nameField := keySpec(effNameKey)
	argsPrefix, argsField := keySpec(effArgsKey)
	prefix := namePrefix
	if prefix == "" {
		prefix = argsPrefix
	}
	if namePrefix == "" {
		nameField = effNameKey
	}
	if argsPrefix == "" {
		argsField = effArgsKey
	}
	for _, f := range toolFunctions(tools) {
		name := FunctionName(f)
		params := ToolParameters(f)
		nestedName := b.Do(Sum(Lit(`"`+nameField+`"`), Space(), Lit(":"), Space(),
			Atomic(Sum(Lit(`"`), ToolName(Lit(name)), Lit(`"`)))))
		nestedArgs := b.Do(Sum(Lit(`"`+argsField+`"`), Space(), Lit(":"), Space(), argsSchema(name, params)))
		nestedObj := b.Do(Sum(Lit("{"), Space(), nestedName, Space(), Lit(","), Space(), nestedArgs, Space(), Lit("}")))
		body := b.Do(Add(ToolOpen(Lit("{")), Space()))
		if idKey != "" {
			if p, _ := keySpec(idKey); p == "" {
				idp := b.Do(quotedIDParser(idKey))
				body = b.Do(Add(body, Opt(Sum(idp, Space(), Lit(","), Space()))))
			}
		}
		if genIDKey != "" {
			if p, _ := keySpec(genIDKey); p == "" {
				gp := b.Do(genIDParser(genIDKey))
				body = b.Do(Add(body, Opt(Sum(gp, Space(), Lit(","), Space()))))
			}
		}
		field := b.Do(Sum(Lit(`"`+prefix+`"`), Space(), Lit(":"), Space(), nestedObj))
		body = b.Do(Sum(body, field, Space(), ToolClose(Lit("}"))))
		choices = b.Do(Or(choices, Rule("tool-"+name, Call(body))))
	}
	return choices
}

// jsonToolsFlatKeys is build_json_tools_flat_keys: {"name": ...,
// "arguments": ...}, the fields in parameters order.
func jsonToolsFlatKeys(b *Builder, tools ojson.Value, effNameKey, effArgsKey, idKey, genIDKey string, order []string, openaiWrapper bool) ID {
	choices := b.Do(Choice())
	nameKey := b.Do(Lit(`"` + effNameKey + `"`))
	argsKey := b.Do(Lit(`"` + effArgsKey + `"`))
	for _, f := range toolFunctions(tools) {
		name := FunctionName(f)
		params := ToolParameters(f)
		toolName := b.Do(Sum(nameKey, Space(), Lit(":"), Space(), Atomic(Sum(Lit(`"`), ToolName(Lit(name)), Lit(`"`)))))
		toolArgs := b.Do(Sum(argsKey, Space(), Lit(":"), Space(), argsSchema(name, params)))
		idp := b.Do(Eps())
		if idKey != "" {
			idp = b.Do(genIDParser(idKey))
		}
		gp := b.Do(Eps())
		if genIDKey != "" {
			gp = b.Do(genIDParser(genIDKey))
		}
		type pair struct {
			p   ID
			key string
		}
		pairs := []pair{{toolName, effNameKey}, {toolArgs, effArgsKey}}
		if idKey != "" {
			pairs = append(pairs, pair{b.Do(Opt(idp)), idKey})
		}
		if genIDKey != "" {
			pairs = append(pairs, pair{b.Do(Opt(gp)), genIDKey})
		}
		pos := func(k string) int {
			for i, o := range order {
				if o == k {
					return i
				}
			}
			return len(order)
		}
		sortPairs(len(pairs), func(i, j int) bool { return pos(pairs[i].key) < pos(pairs[j].key) },
			func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		typeField := b.Do(Eps())
		if openaiWrapper {
			typeField = b.Do(Opt(Sum(Lit(`"type"`), Space(), Lit(":"), Space(), Lit(`"function"`), Space(), Lit(","), Space())))
		}
		body := b.Do(Sum(ToolOpen(Lit("{")), Space(), typeField))
		for i, pr := range pairs {
			body = b.Do(Add(body, pr.p))
			if i < len(pairs)-1 {
				body = b.Do(Sum(body, Space(), Lit(","), Space()))
			}
		}
		body = b.Do(Sum(body, Space(), ToolClose(Lit("}"))))
		choices = b.Do(Or(choices, Rule("tool-"+name, Call(body))))
	}
	return choices
}

// sortPairs sorts as libstdc++'s std::sort does for the few elements it
// is given here (an insertion sort below 16 elements), so that equal keys
// keep the order the pin leaves them in.
func sortPairs(n int, less func(i, j int) bool, swap func(i, j int)) {
	for i := 1; i < n; i++ {
		for j := i; j > 0 && less(j, j-1); j-- {
			swap(j, j-1)
		}
	}
}

// StandardJSONTools is standard_json_tools: JSON tool calls between the
// section markers, in one of three layouts.
func StandardJSONTools(sectionStart, sectionEnd string, tools ojson.Value, parallel, force bool, nameKey, argsKey string,
	arrayWrapped, functionIsKey bool, idKey, genIDKey string, order []string, openaiWrapper bool) Expr {
	return fn(func(b *Builder) ID {
		if !tools.IsArray() || tools.Len() == 0 {
			return b.Do(Eps())
		}
		effName, effArgs := nameKey, argsKey
		if effName == "" {
			effName = "name"
		}
		if effArgs == "" {
			effArgs = "arguments"
		}
		calls := b.Do(Eps())
		np, _ := keySpec(effName)
		ap, _ := keySpec(effArgs)
		switch {
		case functionIsKey:
			calls = jsonToolsFunctionIsKey(b, tools, argsKey, effArgs, idKey, genIDKey)
		case np != "" || ap != "":
			calls = jsonToolsNestedKeys(b, tools, effName, effArgs, idKey, genIDKey)
		default:
			calls = jsonToolsFlatKeys(b, tools, effName, effArgs, idKey, genIDKey, order, openaiWrapper)
		}
		choices := calls
		if parallel {
			calls = b.Do(Add(calls, ZeroOrMore(Sum(Space(), Lit(","), Space(), choices))))
		}
		if arrayWrapped {
			calls = b.Do(Sum(Lit("["), Space(), calls, Space(), Lit("]")))
		}
		section := b.Do(TriggerRule("tool-call", Sum(Lit(sectionStart), Space(), calls, Space(), Lit(sectionEnd))))
		if force {
			return section
		}
		return b.Do(Opt(section))
	})
}
