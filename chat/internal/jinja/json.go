// Port of llama.cpp common/jinja/value.cpp (v0.5.0): from_json,
// global_from_json, value_to_json, value_to_string_repr, value_compare,
// and tojson's ensure_ascii pass.

package jinja

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/ojson"
)

// fromJSON is from_json: an ojson value as runtime values, its strings
// marked as input when markInput is set.
func fromJSON(j ojson.Value, markInput bool) value {
	switch j.Kind() {
	case ojson.Null:
		return mkNone()
	case ojson.Bool:
		return mkBool(j.Bool())
	case ojson.Int, ojson.Uint:
		return mkInt(j.Int())
	case ojson.Float:
		return mkFloat(j.Float())
	case ojson.String:
		s := mkStr(j.Str())
		if markInput {
			s.s.parts[0].Input = true
		}
		return s
	case ojson.Array:
		elems := j.Elems()
		items := make([]value, len(elems))
		for i, e := range elems {
			items[i] = fromJSON(e, markInput)
		}
		return mkArr(items)
	case ojson.Object:
		ms := j.Members()
		o := &objVal{keys: make([]value, len(ms)), vals: make([]value, len(ms))}
		for i, m := range ms {
			o.keys[i] = mkStr(m.Key)
			o.vals[i] = fromJSON(m.Value, markInput)
		}
		if len(ms) >= indexFrom {
			o.reindex()
		}
		return o
	}
	throw("Unsupported JSON value type")
	return nil
}

// freeze is fromJSON for a Context: its leaves shared (never marked), to
// be thawed for each render.
func freeze(j ojson.Value, markInput bool) value {
	v := fromJSON(j, markInput)
	share(v)
	return v
}

func share(v value) {
	// (the singletons are shared already: no write to them, which
	// contexts made at once would race on)
	if b := v.b(); !b.shared {
		b.shared = true
	}
	switch x := v.(type) {
	case *arrVal:
		for _, e := range x.items {
			share(e)
		}
	case *objVal:
		for i := range x.keys {
			share(x.keys[i])
			share(x.vals[i])
		}
	}
}

// thaw is a frozen value's arrays and objects copied, for one render to
// own (templates change them); the leaves are the frozen ones.
func thaw(v value) value {
	switch x := v.(type) {
	case *arrVal:
		items := make([]value, len(x.items))
		for i, e := range x.items {
			items[i] = thaw(e)
		}
		return &arrVal{items: items, tuple: x.tuple}
	case *objVal:
		o := &objVal{keys: x.keys[:len(x.keys):len(x.keys)], vals: make([]value, len(x.vals)), index: x.index}
		for i, e := range x.vals {
			o.vals[i] = thaw(e)
		}
		return o
	}
	return v
}

// toJSON is value_to_json: the pin's own writer, not nlohmann's.
func (r *renderer) toJSON(v value, indent int, itemSep, keySep string) string {
	var b strings.Builder
	r.writeJSON(&b, v, 0, indent, itemSep, keySep)
	return b.String()
}

func (r *renderer) writeJSON(b *strings.Builder, v value, lvl, indent int, itemSep, keySep string) {
	if b.Len() > maxStringSize {
		throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
	}
	pad := func(n int) {
		if indent > 0 {
			for range n * indent {
				b.WriteByte(' ')
			}
		}
	}
	newline := func() {
		if indent >= 0 {
			b.WriteByte('\n')
		}
	}
	if indent > 0 && int64(lvl+1)*int64(indent) > maxStringSize {
		throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
	}
	switch x := v.(type) {
	case *noneVal, *undefVal:
		b.WriteString("null")
	case *boolVal:
		if x.v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case *intVal:
		b.WriteString(strconv.FormatInt(x.i, 10))
	case *floatVal:
		b.WriteString(fmtG(x.f))
	case *strVal:
		writeJSONString(b, x.s.str())
	case *arrVal:
		b.WriteByte('[')
		if len(x.items) > 0 {
			r.enterValue()
			defer r.leaveValue()
			newline()
			for i, e := range x.items {
				pad(lvl + 1)
				r.writeJSON(b, e, lvl+1, indent, itemSep, keySep)
				if i < len(x.items)-1 {
					b.WriteString(itemSep)
				}
				newline()
			}
			pad(lvl)
		}
		b.WriteByte(']')
	case *objVal:
		b.WriteByte('{')
		if len(x.keys) > 0 {
			r.enterValue()
			defer r.leaveValue()
			newline()
			for i := range x.keys {
				pad(lvl + 1)
				writeJSONString(b, asString(r, x.keys[i]).str())
				b.WriteString(keySep)
				r.writeJSON(b, x.vals[i], lvl+1, indent, itemSep, keySep)
				if i < len(x.keys)-1 {
					b.WriteString(itemSep)
				}
				newline()
			}
			pad(lvl)
		}
		b.WriteByte('}')
	default:
		b.WriteString("null")
	}
}

func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// jsonEnsureASCII is json_ensure_ascii_preserving_format: code points past
// ASCII inside strings become \u escapes (surrogate pairs past U+FFFF), a
// byte that does not start a code point \ufffd.
func jsonEnsureASCII(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	in, esc := false, false
	u16 := func(v uint32) { fmt.Fprintf(&b, `\u%04x`, v) }
	for pos := 0; pos < len(s); {
		ch := s[pos]
		switch {
		case !in:
			b.WriteByte(ch)
			if ch == '"' {
				in = true
			}
			pos++
		case esc:
			b.WriteByte(ch)
			esc = false
			pos++
		case ch == '\\':
			b.WriteByte(ch)
			esc = true
			pos++
		case ch == '"':
			b.WriteByte(ch)
			in = false
			pos++
		case ch < 0x80:
			b.WriteByte(ch)
			pos++
		default:
			if b.Len() > maxStringSize {
				throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
			}
			cp, n, ok := parseUTF8(s, pos)
			if !ok {
				b.WriteString(`\ufffd`)
				pos++
				continue
			}
			if cp <= 0xFFFF {
				u16(cp)
			} else {
				cp -= 0x10000
				u16(0xD800 + (cp>>10)&0x3FF)
				u16(0xDC00 + cp&0x3FF)
			}
			pos += n
		}
	}
	return b.String()
}

// parseUTF8 is common_parse_utf8_codepoint (common/unicode.cpp): it
// checks the lead byte and the continuation bytes, nothing more.
func parseUTF8(s string, off int) (uint32, int, bool) {
	c := s[off]
	var n int
	var cp uint32
	switch {
	case c&0x80 == 0:
		return uint32(c), 1, true
	case c&0x40 == 0:
		return 0, 1, false
	case c&0x20 == 0:
		n, cp = 2, uint32(c&0x1f)
	case c&0x10 == 0:
		n, cp = 3, uint32(c&0x0f)
	case c&0x08 == 0:
		n, cp = 4, uint32(c&0x07)
	default:
		return 0, 1, false
	}
	for i := 1; i < n; i++ {
		if off+i >= len(s) || s[off+i]&0xc0 != 0x80 {
			return 0, i, false
		}
		cp = cp<<6 | uint32(s[off+i]&0x3f)
	}
	return cp, n, true
}

// repr is value_to_string_repr.
func (r *renderer) repr(v value) string {
	if s, ok := v.(*strVal); ok {
		str := s.s.str()
		if strings.IndexByte(str, '\'') >= 0 {
			return r.toJSON(v, -1, ", ", ": ")
		}
		return "'" + str + "'"
	}
	return r.asRepr(v)
}

// asRepr is value_t::as_repr.
func (r *renderer) asRepr(v value) string {
	switch x := v.(type) {
	case *strVal:
		var b strings.Builder
		for _, p := range x.s.parts {
			if p.Input {
				b.WriteString("INPUT: ")
			} else {
				b.WriteString("TMPL:  ")
			}
			b.WriteString(p.Text)
			b.WriteByte('\n')
		}
		return b.String()
	case *noneVal, *undefVal, *kwargVal:
		return typeName(v)
	case *funcVal:
		arg := ""
		if x.this != nil {
			arg = r.asRepr(x.this)
		}
		return "Function<" + x.name + ">(" + arg + ")"
	}
	return asString(r, v).str()
}

func (r *renderer) arrayRepr(a *arrVal) string {
	r.enterValue()
	defer r.leaveValue()
	var b strings.Builder
	if a.tuple {
		b.WriteByte('(')
	} else {
		b.WriteByte('[')
	}
	for i, e := range a.items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.repr(e))
		if b.Len() > maxStringSize {
			throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
		}
	}
	if a.tuple {
		if len(a.items) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	} else {
		b.WriteByte(']')
	}
	return b.String()
}

func (r *renderer) objectRepr(o *objVal) string {
	r.enterValue()
	defer r.leaveValue()
	var b strings.Builder
	b.WriteByte('{')
	for i := range o.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.repr(o.keys[i]))
		b.WriteString(": ")
		b.WriteString(r.repr(o.vals[i]))
		if b.Len() > maxStringSize {
			throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
		}
	}
	b.WriteByte('}')
	return b.String()
}

type cmpOp uint8

const (
	cmpEq cmpOp = iota
	cmpGe
	cmpGt
	cmpLt
	cmpNe
)

// compare is value_compare: numbers as doubles, a string against a string
// or a number as strings, booleans for (in)equality only; other pairs are
// never in order.
func (r *renderer) compare(a, b value, op cmpOp) bool {
	if isNumber(a) && isNumber(b) {
		x, y := asFloat(a), asFloat(b)
		switch op {
		case cmpEq:
			return x == y
		case cmpGe:
			return x >= y
		case cmpGt:
			return x > y
		case cmpLt:
			return x < y
		default:
			return x != y
		}
	}
	if isStr(b) && isNumber(a) || isStr(a) && isNumber(b) || isStr(a) && isStr(b) {
		x, y := asString(r, a).str(), asString(r, b).str()
		switch op {
		case cmpEq:
			return x == y
		case cmpGe:
			return x >= y
		case cmpGt:
			return x > y
		case cmpLt:
			return x < y
		default:
			return x != y
		}
	}
	if isBool(a) && isBool(b) {
		switch op {
		case cmpEq:
			return asBool(a) == asBool(b)
		case cmpNe:
			return asBool(a) != asBool(b)
		}
		throw("Unsupported comparison operator for bool type")
	}
	return false
}

func stringsContains(s, sub string) bool { return strings.Contains(s, sub) }
