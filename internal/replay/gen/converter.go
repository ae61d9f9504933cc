package main

import (
	"fmt"
	"go/format"
	"regexp"
	"sort"
	"strings"
)

// converterKey is how the pin's converter writes one metadata key: the
// GGUF type of the scalar form, and the element type of the array form,
// each empty when the converter never writes that form.
type converterKey struct{ scalar, elem string }

// The Python the converter's writer is made of, read line by line.
var (
	pyClass  = regexp.MustCompile(`^( *)class ([A-Za-z_][A-Za-z_0-9]*)\b`)
	pyConst  = regexp.MustCompile(`^( *)([A-Z_][A-Z_0-9]*) *= *"([^"]*)"`)
	pyDef    = regexp.MustCompile(`^( *)def ([a-z_0-9]+)\((.*)\)\s*(->.*)?:\s*$`)
	pyAssign = regexp.MustCompile(`^ *([a-z_][a-z_0-9]*) *= *(Keys(?:\.[A-Z][A-Za-z_0-9]*)+)`)
	pyCall   = regexp.MustCompile(`self\.(_?add_[a-z_0-9]+)\(\s*((?:Keys(?:\.[A-Z][A-Za-z_0-9]*)+)|[a-z_][a-z_0-9]*)(?:\.format\([^)]*\))?\s*,\s*(.*)\)\s*$`)
	pyKV     = regexp.MustCompile(`self\.add_key_value\(\s*([a-z_]+)\s*,[^,]*,\s*GGUFValueType\.ARRAY\s*,\s*GGUFValueType\.([A-Z0-9]+)\s*\)`)
)

// the GGUF type names (as gguf_type_name prints them) of GGUFValueType
// and of the writer's typed add_ methods
var pyTypes = map[string]string{"UINT8": "u8", "INT8": "i8", "UINT16": "u16", "INT16": "i16", "UINT32": "u32",
	"INT32": "i32", "FLOAT32": "f32", "BOOL": "bool", "STRING": "str", "UINT64": "u64", "INT64": "i64", "FLOAT64": "f64"}

// converterKeys reads gguf-py: the key constants of constants.py's class
// Keys, and what each GGUFWriter.add_ method of gguf_writer.py writes
// under which key. A typed method (add_uint32, ...) gives the scalar
// form; add_array gives the array form, whose element type is what
// GGUFValueType.get_type makes of the value's annotated Python type (an
// int is INT32, a float FLOAT32, a bool BOOL, a str STRING); an array
// written through add_key_value names its element type.
func (s *source) converterKeys() (map[string]converterKey, error) {
	consts, err := s.read("gguf-py/gguf/constants.py")
	if err != nil {
		return nil, err
	}
	keys := keyConstants(consts)
	if len(keys) < 100 {
		return nil, fmt.Errorf("gguf-py/gguf/constants.py: %d keys in class Keys, expected hundreds", len(keys))
	}
	writer, err := s.read("gguf-py/gguf/gguf_writer.py")
	if err != nil {
		return nil, err
	}
	methods := writerMethods(writer)
	forms := keyForms(methods)
	out := map[string]converterKey{}
	for _, name := range sortedKeys(methods) {
		methods[name].addWrites(keys, forms, out)
	}
	if len(out) < 100 {
		return nil, fmt.Errorf("gguf-py/gguf/gguf_writer.py: %d keys written by GGUFWriter's add_ methods, expected hundreds", len(out))
	}
	return out, nil
}

// keyConstants maps the string constants of class Keys and its nested
// classes, by their dotted path, to their values:
// Keys.Attention.HEAD_COUNT → "{arch}.attention.head_count".
func keyConstants(consts string) map[string]string {
	keys := map[string]string{}
	type class struct {
		indent int
		name   string
	}
	var stack []class // the classes enclosing the line
	inKeys := false
	for _, line := range strings.Split(consts, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		for len(stack) > 0 && indent <= stack[len(stack)-1].indent {
			stack = stack[:len(stack)-1]
		}
		if indent == 0 {
			inKeys = strings.HasPrefix(line, "class Keys:")
		}
		if !inKeys {
			continue
		}
		if m := pyClass.FindStringSubmatch(line); m != nil {
			stack = append(stack, class{len(m[1]), m[2]})
			continue
		}
		if m := pyConst.FindStringSubmatch(line); m != nil && len(stack) > 0 {
			var path []string
			for _, c := range stack {
				path = append(path, c.name)
			}
			keys[strings.Join(append(path, m[2]), ".")] = m[3]
		}
	}
	return keys
}

// pyMethod is one method of GGUFWriter.
type pyMethod struct {
	params map[string]string // name → annotation
	first  string            // the first parameter after self
	lines  []string          // the body
}

// writerMethods reads the methods of gguf_writer.py's classes by name.
func writerMethods(writer string) map[string]*pyMethod {
	methods := map[string]*pyMethod{}
	var cur *pyMethod
	for _, line := range strings.Split(writer, "\n") {
		if m := pyDef.FindStringSubmatch(line); m != nil && len(m[1]) == 4 {
			cur = newPyMethod(m[3])
			methods[m[2]] = cur
			continue
		}
		if cur != nil && (strings.HasPrefix(line, "        ") || strings.TrimSpace(line) == "") {
			cur.lines = append(cur.lines, line)
		} else if cur != nil && !strings.HasPrefix(line, "    ") {
			cur = nil
		}
	}
	return methods
}

// newPyMethod is a method of the parameter list params, its body yet unread.
func newPyMethod(params string) *pyMethod {
	m := &pyMethod{params: map[string]string{}}
	for i, p := range splitParams(params) {
		name, ann, _ := strings.Cut(p, ":")
		name = strings.TrimSpace(name)
		if i == 1 {
			m.first = name
		}
		ann, _, _ = strings.Cut(ann, "=")
		m.params[name] = strings.TrimSpace(ann)
	}
	return m
}

// keyForms are the forms the methods that take the key as their first
// parameter write under it (add_uint32, _add_u64_array, ...), by method.
func keyForms(methods map[string]*pyMethod) map[string]converterKey {
	forms := map[string]converterKey{}
	for name, m := range methods {
		if t, ok := pyTypes[strings.ToUpper(strings.TrimPrefix(name, "add_"))]; ok && m.first == "key" {
			forms[name] = converterKey{scalar: t}
		}
		for _, l := range m.lines {
			if kv := pyKV.FindStringSubmatch(l); kv != nil && kv[1] == m.first {
				forms[name] = converterKey{elem: pyTypes[kv[2]]}
			}
		}
	}
	return forms
}

// addWrites adds to out the forms m writes under the Keys constants it
// names, through the methods of forms or add_array. keys are the
// constants' values.
func (m *pyMethod) addWrites(keys map[string]string, forms, out map[string]converterKey) {
	locals := map[string]string{} // a local variable → the Keys constant it holds
	for _, l := range m.lines {
		if a := pyAssign.FindStringSubmatch(l); a != nil {
			locals[a[1]] = a[2]
		}
		c := pyCall.FindStringSubmatch(l)
		if c == nil {
			continue
		}
		ref := c[2]
		if r, ok := locals[ref]; ok {
			ref = r
		}
		key, ok := keys[ref]
		if !ok || !strings.HasPrefix(ref, "Keys.") {
			continue // a key passed in by the caller
		}
		form, ok := m.callForm(c[1], c[3], forms)
		if !ok {
			continue
		}
		k := strings.ReplaceAll(key, "{arch}", "%s")
		out[k] = out[k].with(form)
	}
}

// callForm is the form a call of callee in m writes, args being the
// call's arguments after the key; ok false for a call of no known form.
func (m *pyMethod) callForm(callee, args string, forms map[string]converterKey) (form converterKey, ok bool) {
	if callee == "add_array" {
		form.elem = elemType(m.params[valueArg(args)])
		return form, form.elem != ""
	}
	form, ok = forms[callee]
	return form, ok
}

// with is k with the forms f writes added.
func (k converterKey) with(f converterKey) converterKey {
	if f.scalar != "" {
		k.scalar = f.scalar
	}
	if f.elem != "" {
		k.elem = f.elem
	}
	return k
}

// splitParams splits a Python parameter list at its top-level commas.
func splitParams(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

// valueArg is the variable an add_array call passes as the value
// ("list(layers)" passes layers).
func valueArg(s string) string {
	s = strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(s, "list("); ok {
		s = strings.TrimSuffix(inner, ")")
	}
	return strings.TrimSpace(s)
}

// elemType is the GGUF element type GGUFValueType.get_type gives the
// elements of a value annotated ann ("int | Sequence[int]": i32).
func elemType(ann string) string {
	m := regexp.MustCompile(`Sequence\[([A-Za-z_]+)\]`).FindStringSubmatch(ann)
	if m == nil {
		return ""
	}
	switch m[1] {
	case "int", "TokenType":
		return "i32"
	case "float":
		return "f32"
	case "bool":
		return "bool"
	case "str":
		return "str"
	}
	return ""
}

// writeConverterKeys writes converter_gen.go.
func writeConverterKeys(header string, keys map[string]converterKey) ([]byte, error) {
	var t strings.Builder
	t.WriteString(header)
	t.WriteString("package arch\n\n")
	t.WriteString("// converterKeys: how the pin's converter (gguf-py's GGUFWriter.add_ methods) writes each\n")
	t.WriteString("// metadata key (%s is the architecture): the scalar's GGUF type and the array's element\n")
	t.WriteString("// type, empty for a form it never writes.\n")
	t.WriteString("var converterKeys = map[string]ConverterKey{\n")
	ks := make([]string, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		v := keys[k]
		fmt.Fprintf(&t, "\t%q: {Scalar: %q, Elem: %q},\n", k, v.scalar, v.elem)
	}
	t.WriteString("}\n")
	return format.Source([]byte(t.String()))
}
