// Port of llama.cpp common/peg-parser.cpp (v0.5.0): an arena as JSON
// (common_peg_arena::to_json, from_json).

package peg

import (
	"math"

	"github.com/ggload/ggload/internal/ojson"
)

var kindNames = [...]string{"epsilon", "start", "end", "literal", "sequence", "choice", "repetition", "and", "not",
	"any", "space", "chars", "string", "until", "schema", "rule", "ref", "atomic", "tag", "gbnf", "ac"}

func idValue(id ID) ojson.Value {
	if id == Invalid {
		return ojson.UintValue(math.MaxUint64)
	}
	return ojson.UintValue(uint64(id))
}

func idsValue(ids []ID) ojson.Value {
	a := ojson.ArrayValue()
	for _, id := range ids {
		a.Append(idValue(id))
	}
	return a
}

func stringsValue(ss []string) ojson.Value {
	a := ojson.ArrayValue()
	for _, s := range ss {
		a.Append(ojson.StringValue(s))
	}
	return a
}

func intValue(n int) ojson.Value { return ojson.IntValue(int64(n)) }

func (p *parser) toJSON() ojson.Value {
	o := ojson.ObjectValue()
	o.Set("type", ojson.StringValue(kindNames[p.kind]))
	switch p.kind {
	case KindLiteral:
		o.Set("literal", ojson.StringValue(p.literal))
	case KindSequence, KindChoice:
		o.Set("children", idsValue(p.children))
	case KindRepetition:
		o.Set("child", idValue(p.child))
		o.Set("min_count", intValue(p.min))
		o.Set("max_count", intValue(p.max))
	case KindAnd, KindNot, KindAtomic:
		o.Set("child", idValue(p.child))
	case KindChars:
		ranges := ojson.ArrayValue()
		for _, r := range p.ranges {
			ranges.Append(ojson.ObjectValue(ojson.Member{Key: "start", Value: ojson.UintValue(uint64(r.Start))},
				ojson.Member{Key: "end", Value: ojson.UintValue(uint64(r.End))}))
		}
		o.Set("pattern", ojson.StringValue(p.pattern))
		o.Set("ranges", ranges)
		o.Set("negated", ojson.BoolValue(p.negated))
		o.Set("min_count", intValue(p.min))
		o.Set("max_count", intValue(p.max))
	case KindString:
		o.Set("delimiter", ojson.StringValue(string([]byte{p.delim})))
	case KindUntil:
		o.Set("delimiters", stringsValue(p.delims))
	case KindSchema:
		o.Set("child", idValue(p.child))
		o.Set("name", ojson.StringValue(p.name))
		o.Set("raw", ojson.BoolValue(p.raw))
	case KindRule:
		o.Set("name", ojson.StringValue(p.name))
		o.Set("child", idValue(p.child))
		o.Set("trigger", ojson.BoolValue(p.trigger))
	case KindRef:
		o.Set("name", ojson.StringValue(p.name))
	case KindTag:
		o.Set("child", idValue(p.child))
		o.Set("tag", ojson.StringValue(p.tag))
	case KindGbnf:
		o.Set("child", idValue(p.child))
		o.Set("grammar", ojson.StringValue(p.gbnf))
	case KindAC:
		o.Set("child", idValue(p.child))
		o.Set("delimiters", stringsValue(p.delims))
	}
	return o
}

// JSON is common_peg_arena::to_json. The pin keeps its rules in an
// unordered map; here they come in the order they were first added.
func (a *Arena) JSON() ojson.Value {
	ps := ojson.ArrayValue()
	for i := range a.parsers {
		ps.Append(a.parsers[i].toJSON())
	}
	rules := ojson.ObjectValue()
	for _, name := range a.order {
		rules.Set(name, idValue(a.rules[name]))
	}
	o := ojson.ObjectValue()
	o.Set("parsers", ps)
	o.Set("rules", rules)
	o.Set("root", idValue(a.root))
	return o
}

type jsonReader struct{ err error }

func (r *jsonReader) fail(msg string) {
	if r.err == nil {
		r.err = &Exception{Msg: msg}
	}
}

func (r *jsonReader) id(v ojson.Value) ID {
	if !v.IsInteger() {
		r.fail("parser id is not an integer")
		return Invalid
	}
	u := v.Uint()
	if u == math.MaxUint64 {
		return Invalid
	}
	if u > math.MaxInt32 {
		r.fail("parser id out of range")
		return Invalid
	}
	return ID(u)
}

func (r *jsonReader) str(v ojson.Value) string {
	if !v.IsString() {
		r.fail("type must be string, but is " + v.Kind().String())
	}
	return v.Str()
}

func (r *jsonReader) strs(v ojson.Value) []string {
	out := []string{}
	for _, e := range v.Elems() {
		out = append(out, r.str(e))
	}
	return out
}

func (r *jsonReader) parser(j ojson.Value) parser {
	has := func(keys ...string) bool {
		for _, k := range keys {
			if !j.Has(k) {
				return false
			}
		}
		return true
	}
	t := j.At("type")
	if !t.IsString() {
		r.fail("Parser variant JSON missing or invalid 'type' field")
		return parser{}
	}
	kind := Kind(255)
	for i, n := range kindNames {
		if n == t.Str() {
			kind = Kind(i)
		}
	}
	p := parser{kind: kind}
	switch kind {
	case KindEpsilon, KindStart, KindEnd, KindAny, KindSpace:
	case KindLiteral:
		if !j.At("literal").IsString() {
			r.fail("literal parser missing or invalid 'literal' field")
		}
		p.literal = j.At("literal").Str()
	case KindSequence, KindChoice:
		if !j.At("children").IsArray() {
			r.fail(t.Str() + " parser missing or invalid 'children' field")
		}
		for _, c := range j.At("children").Elems() {
			p.children = append(p.children, r.id(c))
		}
	case KindRepetition:
		if !has("child", "min_count", "max_count") {
			r.fail("repetition parser missing required fields")
		}
		p.child, p.min, p.max = r.id(j.At("child")), int(int32(j.At("min_count").Int())), int(int32(j.At("max_count").Int()))
	case KindAnd, KindNot, KindAtomic:
		if !has("child") {
			r.fail(t.Str() + " parser missing 'child' field")
		}
		p.child = r.id(j.At("child"))
	case KindChars:
		if !has("pattern", "ranges", "negated", "min_count", "max_count") {
			r.fail("chars parser missing required fields")
		}
		p.pattern = r.str(j.At("pattern"))
		p.negated = j.At("negated").Bool()
		p.min, p.max = int(int32(j.At("min_count").Int())), int(int32(j.At("max_count").Int()))
		for _, rg := range j.At("ranges").Elems() {
			if !rg.Has("start") || !rg.Has("end") {
				r.fail("char_range missing 'start' or 'end' field")
			}
			p.ranges = append(p.ranges, CharRange{uint32(rg.At("start").Uint()), uint32(rg.At("end").Uint())})
		}
	case KindString:
		d := r.str(j.At("delimiter"))
		if d == "" {
			r.fail("string parser delimiter is empty.")
			break
		}
		p.delim = d[0]
	case KindUntil:
		if !j.At("delimiters").IsArray() {
			r.fail("until parser missing or invalid 'delimiters' field")
		}
		p.delims = r.strs(j.At("delimiters"))
		p.matcher = newTrie(p.delims)
	case KindSchema:
		if !has("child", "name", "raw") {
			r.fail("schema parser missing required fields")
		}
		p.child, p.name, p.raw = r.id(j.At("child")), r.str(j.At("name")), j.At("raw").Bool()
	case KindRule:
		if !has("name", "child", "trigger") {
			r.fail("rule parser missing required fields")
		}
		p.name, p.child, p.trigger = r.str(j.At("name")), r.id(j.At("child")), j.At("trigger").Bool()
	case KindRef:
		if !j.At("name").IsString() {
			r.fail("ref parser missing or invalid 'name' field")
		}
		p.name = j.At("name").Str()
	case KindTag:
		if !has("child", "tag") {
			r.fail("tag parser missing required fields")
		}
		p.child, p.tag = r.id(j.At("child")), r.str(j.At("tag"))
	case KindGbnf:
		if !has("child", "grammar") {
			r.fail("gbnf parser missing required fields")
		}
		p.child, p.gbnf = r.id(j.At("child")), r.str(j.At("grammar"))
	case KindAC:
		if !has("child") || !j.At("delimiters").IsArray() || j.At("delimiters").Len() == 0 {
			r.fail("ac parser requires 'child' and a non-empty 'delimiters' array")
		}
		p.child, p.delims = r.id(j.At("child")), r.strs(j.At("delimiters"))
	default:
		r.fail("Unknown parser type: " + t.Str())
	}
	return p
}

// FromJSON is common_peg_arena::from_json. Schema parsers come back
// without their schema: their grammar is their child's.
func FromJSON(j ojson.Value) (*Arena, error) {
	if !j.At("parsers").IsArray() {
		return nil, &Exception{Msg: "JSON missing or invalid 'parsers' array"}
	}
	if !j.At("rules").IsObject() {
		return nil, &Exception{Msg: "JSON missing or invalid 'rules' object"}
	}
	if !j.Has("root") {
		return nil, &Exception{Msg: "JSON missing 'root' field"}
	}
	r := &jsonReader{}
	a := &Arena{}
	for _, pj := range j.At("parsers").Elems() {
		a.parsers = append(a.parsers, r.parser(pj))
	}
	for _, m := range j.At("rules").Members() {
		id := r.id(m.Value)
		if int(id) < 0 || int(id) >= len(a.parsers) {
			r.fail("Rule '" + m.Key + "' references invalid parser ID")
		}
		a.addRule(m.Key, id)
	}
	a.root = r.id(j.At("root"))
	if a.root != Invalid && int(a.root) >= len(a.parsers) {
		r.fail("Root references invalid parser ID")
	}
	// children must name parsers, or a parse would run off the arena
	check := func(id ID) {
		if int(id) < 0 || int(id) >= len(a.parsers) {
			r.fail("parser references invalid parser ID")
		}
	}
	for i := range a.parsers {
		p := &a.parsers[i]
		switch p.kind {
		case KindSequence, KindChoice:
			for _, c := range p.children {
				check(c)
			}
		case KindRepetition, KindAnd, KindNot, KindTag, KindAtomic, KindGbnf, KindAC, KindRule, KindSchema:
			check(p.child)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return a, nil
}
