// Port of llama.cpp common/json-schema-to-grammar.cpp and
// common/json-schema-to-grammar.h (v0.5.0).

package grammar

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ggload/ggload/internal/ojson"
)

// ConversionError is a JSON schema the converter cannot turn into a
// grammar, as json_schema_to_grammar throws it: Error() is "JSON schema
// conversion failed:\n" and the reasons, one a line (a *SchemaError from
// ParseSchema, an invalid pattern, an unresolved $ref).
type ConversionError struct {
	Reasons []string
	Err     error // the *SchemaError, where ParseSchema refused the schema
}

func (e *ConversionError) Error() string {
	return "JSON schema conversion failed:\n" + strings.Join(e.Reasons, "\n")
}

func (e *ConversionError) Unwrap() error { return e.Err }

// BuildOptions are common_grammar_options, and where the converter's
// warnings go.
type BuildOptions struct {
	// DotAll makes a pattern's "." match any character, line breaks
	// included.
	DotAll bool
	// Warn receives what the pin prints to stderr as "WARNING: JSON
	// schema conversion was incomplete: %s\n" (the text after the colon):
	// the patterns it could not translate, accepted as any string. Nil
	// drops it.
	Warn func(msg string)
}

// Builder is common_grammar_builder: the rules of a grammar being built
// by Build.
type Builder struct{ c *converter }

// AddRule adds a rule (its name made of letters, digits and '-', a
// number added where another rule already has the name) and returns its
// name.
func (b *Builder) AddRule(name, rule string) string { return b.c.addRule(name, rule) }

// AddSchema adds the rules of a schema node under name ("root" for the
// root) and returns the rule to refer to it by.
func (b *Builder) AddSchema(name string, s *Schema) string {
	if name == "root" {
		name = ""
	}
	return b.c.visit(s, name)
}

// Build is build_grammar: cb adds rules and schemas, and the grammar
// comes back as GBNF text, the rules sorted by name.
func Build(cb func(b *Builder), opts BuildOptions) (g string, err error) {
	c := newConverter(opts.DotAll)
	defer recoverThrow(&err)
	cb(&Builder{c})
	return c.finish(opts)
}

// FromDocument is json_schema_to_grammar of a parsed document.
func FromDocument(doc *Document, opts BuildOptions) (g string, err error) {
	c := newConverter(false)
	defer recoverThrow(&err)
	c.visit(doc.Root, "")
	return c.finish(opts)
}

// recoverThrow turns what the pin throws out of a conversion (and this
// port panics with) into the conversion's error.
func recoverThrow(err *error) {
	if r := recover(); r != nil {
		e, ok := r.(error)
		if !ok || e != errNoBound && e != errTooLarge {
			panic(r)
		}
		*err = e
	}
}

// MaxGrammarBytes bounds the text of a grammar the converter builds,
// where the pin has no bound: rule names grow with a schema's nesting, so
// that a deep schema of a few hundred kilobytes would otherwise make a
// grammar of hundreds of megabytes.
const MaxGrammarBytes = 32 << 20

var errTooLarge = fmt.Errorf("the grammar would exceed %d MiB", MaxGrammarBytes>>20)

// FromJSONSchema is json_schema_to_grammar: the GBNF grammar of a JSON
// schema, as llama.cpp's -j and the server's json_schema convert it.
// forceGBNF matters only to a llama.cpp built with llguidance, which the
// pin's libraries are not: the grammar is always GBNF. The converter's
// warnings are dropped (FromDocument takes a BuildOptions.Warn).
func FromJSONSchema(schema ojson.Value, forceGBNF bool) (string, error) {
	return fromJSONSchema(schema, BuildOptions{})
}

// FromJSONSchemaWarn is FromJSONSchema with the converter's warnings
// given to warn.
func FromJSONSchemaWarn(schema ojson.Value, warn func(msg string)) (string, error) {
	return fromJSONSchema(schema, BuildOptions{Warn: warn})
}

func fromJSONSchema(schema ojson.Value, opts BuildOptions) (string, error) {
	doc, err := ParseSchema(schema)
	if err != nil {
		return "", &ConversionError{Reasons: []string{err.Error()}, Err: err}
	}
	g, err := FromDocument(doc, opts)
	if err == errNoBound || err == errTooLarge {
		return "", &ConversionError{Reasons: []string{err.Error()}, Err: err}
	}
	return g, err
}

// FormatLiteral is gbnf_format_literal: s as a GBNF string literal, with
// \r, \n, " and \ escaped.
func FormatLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// buildRepetition is build_repetition.
func buildRepetition(item string, minItems, maxItems int, sep string) string {
	hasMax := maxItems != math.MaxInt32
	if maxItems == 0 {
		return ""
	}
	if minItems == 0 && maxItems == 1 {
		return item + "?"
	}
	if sep == "" {
		if minItems == 1 && !hasMax {
			return item + "+"
		}
		if minItems == 0 && !hasMax {
			return item + "*"
		}
		m := ""
		if hasMax {
			m = strconv.Itoa(maxItems)
		}
		return item + "{" + strconv.Itoa(minItems) + "," + m + "}"
	}
	nextMax := maxItems
	if hasMax {
		nextMax = maxItems - 1
	}
	result := item + " " + buildRepetition("("+sep+" "+item+")", max(minItems-1, 0), nextMax, "")
	if minItems == 0 {
		result = "(" + result + ")?"
	}
	return result
}

// minMaxInt is build_min_max_int: the alternatives that match the
// integers from minValue to maxValue (math.MinInt64 and math.MaxInt64 for
// no bound), in decimal with no leading zero.
type minMaxInt struct{ out strings.Builder }

func (m *minMaxInt) digitRange(from, to byte) {
	m.out.WriteByte('[')
	m.out.WriteByte(from)
	if from != to {
		m.out.WriteByte('-')
		m.out.WriteByte(to)
	}
	m.out.WriteByte(']')
}

func (m *minMaxInt) moreDigits(minDigits, maxDigits int) {
	m.out.WriteString("[0-9]")
	if minDigits == maxDigits && minDigits == 1 {
		return
	}
	m.out.WriteString("{" + strconv.Itoa(minDigits))
	if maxDigits != minDigits {
		m.out.WriteByte(',')
		if maxDigits != math.MaxInt32 {
			m.out.WriteString(strconv.Itoa(maxDigits))
		}
	}
	m.out.WriteByte('}')
}

func (m *minMaxInt) uniformRange(from, to string) {
	i := 0
	for i < len(from) && i < len(to) && from[i] == to[i] {
		i++
	}
	if i > 0 {
		m.out.WriteString(`"` + from[:i] + `"`)
	}
	if i >= len(from) || i >= len(to) {
		return
	}
	if i > 0 {
		m.out.WriteByte(' ')
	}
	subLen := len(from) - i - 1
	if subLen == 0 {
		m.out.WriteString("[" + from[i:i+1] + "-" + to[i:i+1] + "]")
		return
	}
	fromSub, toSub := from[i+1:], to[i+1:]
	zeros, nines := strings.Repeat("0", subLen), strings.Repeat("9", subLen)
	toReached := false
	m.out.WriteByte('(')
	if fromSub == zeros {
		m.digitRange(from[i], to[i]-1)
		m.out.WriteByte(' ')
		m.moreDigits(subLen, subLen)
	} else {
		m.out.WriteString("[" + from[i:i+1] + "] (")
		m.uniformRange(fromSub, nines)
		m.out.WriteByte(')')
		if from[i] < to[i]-1 {
			m.out.WriteString(" | ")
			if toSub == nines {
				m.digitRange(from[i]+1, to[i])
				toReached = true
			} else {
				m.digitRange(from[i]+1, to[i]-1)
			}
			m.out.WriteByte(' ')
			m.moreDigits(subLen, subLen)
		}
	}
	if !toReached {
		m.out.WriteString(" | ")
		m.digitRange(to[i], to[i])
		m.out.WriteByte(' ')
		m.uniformRange(zeros, toSub)
	}
	m.out.WriteByte(')')
}

func (m *minMaxInt) build(minValue, maxValue int64, decimalsLeft int, topLevel bool) {
	hasMin, hasMax := minValue != math.MinInt64, maxValue != math.MaxInt64
	if hasMin && hasMax {
		if minValue < 0 && maxValue < 0 {
			m.out.WriteString(`"-" (`)
			m.build(-maxValue, -minValue, decimalsLeft, true)
			m.out.WriteByte(')')
			return
		}
		if minValue < 0 {
			m.out.WriteString(`"-" (`)
			m.build(0, -minValue, decimalsLeft, true)
			m.out.WriteString(") | ")
			minValue = 0
		}
		minS, maxS := strconv.FormatInt(minValue, 10), strconv.FormatInt(maxValue, 10)
		for digits := len(minS); digits < len(maxS); digits++ {
			m.uniformRange(minS, strings.Repeat("9", digits))
			minS = "1" + strings.Repeat("0", digits)
			m.out.WriteString(" | ")
		}
		m.uniformRange(minS, maxS)
		return
	}
	less := max(decimalsLeft-1, 1)
	switch {
	case hasMin:
		switch {
		case minValue < 0:
			m.out.WriteString(`"-" (`)
			m.build(math.MinInt64, -minValue, decimalsLeft, false)
			m.out.WriteString(") | [0] | [1-9] ")
			m.moreDigits(0, decimalsLeft-1)
		case minValue == 0:
			if topLevel {
				m.out.WriteString("[0] | [1-9] ")
				m.moreDigits(0, less)
			} else {
				m.moreDigits(1, decimalsLeft)
			}
		case minValue <= 9:
			c := byte('0' + minValue)
			start := byte('0')
			if topLevel {
				start = '1'
			}
			if c > start {
				m.digitRange(start, c-1)
				m.out.WriteByte(' ')
				m.moreDigits(1, less)
				m.out.WriteString(" | ")
			}
			m.digitRange(c, '9')
			m.out.WriteByte(' ')
			m.moreDigits(0, less)
		default:
			minS := strconv.FormatInt(minValue, 10)
			n, c := len(minS), minS[0]
			if c > '1' {
				start := byte('0')
				if topLevel {
					start = '1'
				}
				m.digitRange(start, c-1)
				m.out.WriteByte(' ')
				m.moreDigits(n, less)
				m.out.WriteString(" | ")
			}
			m.digitRange(c, c)
			m.out.WriteString(" (")
			rest, _ := strconv.ParseInt(minS[1:], 10, 64)
			m.build(rest, math.MaxInt64, less, false)
			m.out.WriteByte(')')
			if c < '9' {
				m.out.WriteString(" | ")
				m.digitRange(c+1, '9')
				m.out.WriteByte(' ')
				m.moreDigits(n-1, less)
			}
		}
	case hasMax:
		if maxValue >= 0 {
			if topLevel {
				m.out.WriteString(`"-" [1-9] `)
				m.moreDigits(0, less)
				m.out.WriteString(" | ")
			}
			m.build(0, maxValue, decimalsLeft, true)
		} else {
			m.out.WriteString(`"-" (`)
			m.build(-maxValue, math.MaxInt64, decimalsLeft, false)
			m.out.WriteByte(')')
		}
	default:
		// reached through a minimum of -(2^63-1), whose negation is no
		// bound: the pin throws out of the whole conversion
		panic(errNoBound)
	}
}

// errNoBound is the std::runtime_error build_min_max_int throws.
var errNoBound = errors.New("At least one of min_value or max_value must be set")

const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

type builtinRule struct {
	content string
	deps    []string
}

var primitiveRules = map[string]builtinRule{
	"boolean":       {`("true" | "false")`, nil},
	"decimal-part":  {`[0-9]{1,16}`, nil},
	"integral-part": {`[0] | [1-9] [0-9]{0,15}`, nil},
	"number":        {`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`, []string{"integral-part", "decimal-part"}},
	"integer":       {`("-"? integral-part)`, []string{"integral-part"}},
	"value":         {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":        {`"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"`, []string{"string", "value"}},
	"array":         {`"[" space ( value ("," space value)* )? space "]"`, []string{"value"}},
	"uuid":          {`"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\""`, nil},
	"char":          {`[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`, nil},
	"string":        {`"\"" char* "\""`, []string{"char"}},
	"null":          {`"null"`, nil},
}

var stringFormatRules = map[string]builtinRule{
	"date":             {`[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`, nil},
	"time":             {`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	"date-time":        {`date "T" time`, []string{"date", "time"}},
	"date-string":      {`"\"" date "\""`, []string{"date"}},
	"time-string":      {`"\"" time "\""`, []string{"time"}},
	"date-time-string": {`"\"" date-time "\""`, []string{"date-time"}},
}

func isReservedName(name string) bool {
	if name == "root" {
		return true
	}
	_, p := primitiveRules[name]
	_, f := stringFormatRules[name]
	return p || f
}

// ruleName is regex_replace(name, "[^a-zA-Z0-9-]+", "-"): each run of
// other bytes one '-'.
func ruleName(name string) string {
	var b strings.Builder
	run := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteByte(c)
			run = false
		} else if !run {
			b.WriteByte('-')
			run = true
		}
	}
	return b.String()
}

// converter is common_chat_schema_converter.
type converter struct {
	dotAll    bool
	rules     map[string]string
	resolving map[string]bool
	// the allOf nodes being visited, each with the $refs being resolved
	// when it was entered
	allOfActive map[*Schema][]int
	size        int // the grammar's bytes so far
	errs        []string
	warnings    []string
}

func newConverter(dotAll bool) *converter {
	return &converter{dotAll: dotAll, rules: map[string]string{"space": spaceRule}, resolving: map[string]bool{}, allOfActive: map[*Schema][]int{}}
}

func (c *converter) addRule(name, rule string) string {
	esc := ruleName(name)
	if r, ok := c.rules[esc]; !ok || r == rule {
		if !ok {
			c.grow(len(esc) + len(rule))
		}
		c.rules[esc] = rule
		return esc
	}
	i := 0
	for {
		r, ok := c.rules[esc+strconv.Itoa(i)]
		if !ok || r == rule {
			break
		}
		i++
	}
	key := esc + strconv.Itoa(i)
	if _, ok := c.rules[key]; !ok {
		c.grow(len(key) + len(rule))
	}
	c.rules[key] = rule
	return key
}

// grow counts n bytes more of grammar, against MaxGrammarBytes.
func (c *converter) grow(n int) {
	c.size += n + 6
	if c.size > MaxGrammarBytes {
		panic(errTooLarge)
	}
}

func (c *converter) addPrimitive(name string, rule builtinRule) string {
	n := c.addRule(name, rule.content)
	for _, dep := range rule.deps {
		r, ok := primitiveRules[dep]
		if !ok {
			if r, ok = stringFormatRules[dep]; !ok {
				c.errs = append(c.errs, "Rule "+dep+" not known")
				continue
			}
		}
		if _, ok := c.rules[dep]; !ok {
			c.addPrimitive(dep, r)
		}
	}
	return n
}

func (c *converter) unionRule(name string, alts []*Schema) string {
	rules := make([]string, len(alts))
	for i, a := range alts {
		sub := name + "-" + strconv.Itoa(i)
		if name == "" {
			sub = "alternative-" + strconv.Itoa(i)
		}
		rules[i] = c.visit(a, sub)
	}
	return strings.Join(rules, " | ")
}

// constantRule is _generate_constant_rule: the value's JSON as a literal
// (a string that is not UTF-8, which nlohmann's dump refuses, is an
// error).
func (c *converter) constantRule(v ojson.Value) string {
	s, err := v.Dump(-1)
	if err != nil {
		c.errs = append(c.errs, err.Error())
		return ""
	}
	return FormatLiteral(s)
}

func (c *converter) visitPrimitive(ruleName, typ string) string {
	if ruleName != "root" {
		ruleName = typ
	}
	return c.addPrimitive(ruleName, primitiveRules[typ])
}

// notStrings is _not_strings: a rule matching a JSON string that is none
// of strings, by a trie of their code points.
func (c *converter) notStrings(strs []string) string {
	t := newCodepointTrie(strs)
	char := c.addPrimitive("char", primitiveRules["char"])
	var out strings.Builder
	out.WriteString(`["] ( `)
	var visit func(n *cpTrieNode)
	visit = func(n *cpTrieNode) {
		var rejects strings.Builder
		for i, cp := range n.keys {
			child := n.children[cp]
			s := string(rune(cp))
			if cp > utf8.MaxRune {
				c.errs = append(c.errs, "invalid codepoint")
			} else if cp >= 0xD800 && cp <= 0xDFFF {
				s = cptToUTF8(cp)
			}
			rejects.WriteString(s)
			if i > 0 {
				out.WriteString(" | ")
			}
			out.WriteString("[" + s + "]")
			if len(child.keys) > 0 {
				out.WriteString(" (")
				visit(child)
				out.WriteString(")")
			} else {
				out.WriteString(" " + char + "+")
			}
		}
		if len(n.keys) > 0 {
			out.WriteString(` | [^"` + rejects.String() + `] ` + char + "*")
		}
	}
	visit(t)
	out.WriteString(" )")
	if !t.end {
		out.WriteString("?")
	}
	out.WriteString(` ["]`)
	return out.String()
}

// cptToUTF8 is common_unicode_cpt_to_utf8 of a surrogate, which Go's
// encoder replaces: its three bytes.
func cptToUTF8(cp uint32) string {
	return string([]byte{0xe0 | byte(cp>>12&0x0f), 0x80 | byte(cp>>6&0x3f), 0x80 | byte(cp&0x3f)})
}

// cpTrieNode is a node of common_trie: children by code point, in order.
type cpTrieNode struct {
	children map[uint32]*cpTrieNode
	keys     []uint32 // sorted
	end      bool     // a string ends here
}

func newCodepointTrie(strs []string) *cpTrieNode {
	root := &cpTrieNode{children: map[uint32]*cpTrieNode{}}
	for _, s := range strs {
		n := root
		for _, cp := range trieCodepoints(s) {
			child, ok := n.children[cp]
			if !ok {
				child = &cpTrieNode{children: map[uint32]*cpTrieNode{}}
				n.children[cp] = child
				i := sort.Search(len(n.keys), func(i int) bool { return n.keys[i] >= cp })
				n.keys = append(n.keys, 0)
				copy(n.keys[i+1:], n.keys[i:])
				n.keys[i] = cp
			}
			n = child
		}
		n.end = true
	}
	return root
}

// trieCodepoints is common_trie::insert's decoding: code points as
// common_parse_utf8_codepoint reads them, up to the first sequence it
// cannot read.
func trieCodepoints(s string) []uint32 {
	var cps []uint32
	for i := 0; i < len(s); {
		b := s[i]
		need := 0
		var cp uint32
		switch {
		case b&0x80 == 0:
			cps = append(cps, uint32(b))
			i++
			continue
		case b&0x40 == 0:
			return cps
		case b&0x20 == 0:
			need, cp = 1, uint32(b&0x1f)
		case b&0x10 == 0:
			need, cp = 2, uint32(b&0x0f)
		case b&0x08 == 0:
			need, cp = 3, uint32(b&0x07)
		default:
			return cps
		}
		for k := 1; k <= need; k++ {
			if i+k >= len(s) || s[i+k]&0xc0 != 0x80 {
				return cps
			}
			cp = cp<<6 | uint32(s[i+k]&0x3f)
		}
		cps = append(cps, cp)
		i += need + 1
	}
	return cps
}

func (c *converter) resolveRef(s *Schema) string {
	frag := s.Ref
	if i := strings.IndexByte(frag, '#'); i >= 0 {
		frag = frag[i+1:]
	}
	name := "ref" + ruleName(frag)
	if _, ok := c.rules[name]; !ok && !c.resolving[s.Ref] {
		if s.Target == nil {
			c.errs = append(c.errs, "Unresolved $ref "+s.Ref)
			return ""
		}
		c.resolving[s.Ref] = true
		name = c.visit(s.Target, name)
		delete(c.resolving, s.Ref)
	}
	return name
}

type namedSchema struct {
	name   string
	schema *Schema
}

// objectRule is _build_object_rule.
func (c *converter) objectRule(props []namedSchema, required map[string]bool, name string, additional *Schema) string {
	var requiredProps, optionalProps, propNames []string
	kv := map[string]string{}
	sub := func(s string) string {
		if name == "" {
			return s
		}
		return name + "-" + s
	}
	for _, p := range props {
		propRule := c.visit(p.schema, sub(p.name))
		kv[p.name] = c.addRule(sub(p.name+"-kv"), FormatLiteral(ojson.StringValue(p.name).DumpSafe(-1))+` space ":" space `+propRule)
		if required[p.name] {
			requiredProps = append(requiredProps, p.name)
		} else {
			optionalProps = append(optionalProps, p.name)
		}
		propNames = append(propNames, p.name)
	}
	if additional != nil {
		subName := sub("additional")
		var value string
		if additional.Kind != KindAny {
			value = c.visit(additional, subName+"-value")
		} else {
			value = c.addPrimitive("value", primitiveRules["value"])
		}
		var key string
		if len(propNames) == 0 {
			key = c.addPrimitive("string", primitiveRules["string"])
		} else {
			key = c.addRule(subName+"-k", c.notStrings(propNames))
		}
		kv["*"] = c.addRule(subName+"-kv", key+` ":" space `+value)
		optionalProps = append(optionalProps, "*")
	}
	if len(requiredProps) == 0 && len(optionalProps) == 0 {
		return `"{" space "}"`
	}
	var rule strings.Builder
	rule.WriteString(`"{" space `)
	for i, p := range requiredProps {
		if i > 0 {
			rule.WriteString(` "," space `)
		}
		rule.WriteString(kv[p])
	}
	if len(optionalProps) > 0 {
		rule.WriteString(" (")
		if len(requiredProps) > 0 {
			rule.WriteString(` "," space ( `)
		}
		refs := c.optionalRefs(optionalProps, kv, sub)
		for i := range optionalProps {
			if i > 0 {
				rule.WriteString(" | ")
			}
			rule.WriteString(refs(i, false))
		}
		if len(requiredProps) > 0 {
			rule.WriteString(" )")
		}
		rule.WriteString(" )?")
	}
	rule.WriteString(` space "}"`)
	return rule.String()
}

// optionalRefs is _build_object_rule's get_recursive_refs: the rule of
// optionalProps[j:], the first one optional or not, each tail a rule of
// its own. The pin recomputes each tail for every start, which gives the
// same rules in the same order as computing it once.
func (c *converter) optionalRefs(optionalProps []string, kv map[string]string, sub func(string) string) func(j int, firstOptional bool) string {
	optional := make([]string, len(optionalProps))
	done := make([]bool, len(optionalProps))
	var refs func(j int, firstOptional bool) string
	refs = func(j int, firstOptional bool) string {
		if j >= len(optionalProps) {
			return ""
		}
		if firstOptional && done[j] {
			return optional[j]
		}
		k := optionalProps[j]
		kvName := kv[k]
		comma := `( "," space ` + kvName + " )"
		var res string
		switch {
		case firstOptional && k == "*":
			res = comma + "*"
		case firstOptional:
			res = comma + "?"
		case k == "*":
			res = kvName + " " + comma + "*"
		default:
			res = kvName
		}
		if j+1 < len(optionalProps) {
			res += " " + c.addRule(sub(k+"-rest"), refs(j+1, true))
		}
		if firstOptional {
			optional[j], done[j] = res, true
		}
		return res
	}
	return refs
}

// errRefCycle stops allOf's walk through a $ref that leads back to
// itself, where the pin recurses until its stack overflows.
var errRefCycle = errors.New("$ref cycle")

// visitAllOf is _visit_all_of: the components' properties merged into
// one object, or their enums intersected. The pin follows the $refs of
// an allOf itself, not through _resolve_ref's guard, so an allOf whose
// properties lead back to it recurses without end (until its stack
// overflows): met again with no $ref being resolved in between, it is an
// error here.
func (c *converter) visitAllOf(s *Schema, name, ruleName string) string {
	if active := c.allOfActive[s]; len(active) > 0 && active[len(active)-1] == len(c.resolving) {
		c.errs = append(c.errs, "allOf at "+ruleName+" refers back to itself without end")
		return ""
	}
	c.allOfActive[s] = append(c.allOfActive[s], len(c.resolving))
	defer func() { c.allOfActive[s] = c.allOfActive[s][:len(c.allOfActive[s])-1] }()
	required := map[string]bool{}
	var props []namedSchema
	enumValues := map[string]int{}
	var add func(comp *Schema, isRequired bool, seen map[*Schema]bool) error
	add = func(comp *Schema, isRequired bool, seen map[*Schema]bool) error {
		switch comp.Kind {
		case KindRef:
			if comp.Target != nil {
				if seen[comp] {
					return errRefCycle
				}
				seen[comp] = true
				return add(comp.Target, isRequired, seen)
			}
		case KindObject:
			for _, p := range comp.Properties {
				props = append(props, namedSchema{p.Name, p.Schema})
				if isRequired {
					required[p.Name] = true
				}
			}
		case KindEnum:
			for _, v := range comp.Values {
				enumValues[c.constantRule(v)]++
			}
		}
		return nil
	}
	for _, child := range s.Children {
		var err error
		if child.Kind == KindAnyOf {
			for _, alt := range child.Children {
				if err = add(alt, false, map[*Schema]bool{}); err != nil {
					break
				}
			}
		} else {
			err = add(child, true, map[*Schema]bool{})
		}
		if err != nil {
			c.errs = append(c.errs, "allOf at "+ruleName+" refers back to itself without end")
			return ""
		}
	}
	if len(enumValues) > 0 {
		keys := make([]string, 0, len(enumValues))
		for k, n := range enumValues {
			if n == len(s.Children) {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			sort.Strings(keys)
			return c.addRule(ruleName, "("+strings.Join(keys, " | ")+")")
		}
	}
	return c.addRule(ruleName, c.objectRule(props, required, name, nil))
}

// visit is the converter's visit: the rule of a node, named after name.
func (c *converter) visit(s *Schema, name string) string {
	ruleName := name
	switch {
	case isReservedName(name):
		ruleName = name + "-"
	case name == "":
		ruleName = "root"
	}
	subName := name
	if name != "" {
		subName += "-"
	}
	switch s.Kind {
	case KindRef:
		return c.addRule(ruleName, c.resolveRef(s))
	case KindAnyOf:
		return c.addRule(ruleName, c.unionRule(name, s.Children))
	case KindAllOf:
		return c.visitAllOf(s, name, ruleName)
	case KindConst:
		return c.addRule(ruleName, c.constantRule(s.Value))
	case KindEnum:
		vals := make([]string, len(s.Values))
		for i, v := range s.Values {
			vals[i] = c.constantRule(v)
		}
		return c.addRule(ruleName, "("+strings.Join(vals, " | ")+")")
	case KindObject:
		if len(s.Properties) == 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Kind == KindAny {
			return c.addRule(ruleName, c.addPrimitive("object", primitiveRules["object"]))
		}
		props := make([]namedSchema, len(s.Properties))
		required := map[string]bool{}
		for i, p := range s.Properties {
			props[i] = namedSchema{p.Name, p.Schema}
			if p.Required {
				required[p.Name] = true
			}
		}
		return c.addRule(ruleName, c.objectRule(props, required, name, s.AdditionalProperties))
	case KindTuple:
		var rule strings.Builder
		rule.WriteString(`"[" space `)
		for i, item := range s.Tuple {
			if i > 0 {
				rule.WriteString(` "," space `)
			}
			rule.WriteString(c.visit(item, subName+"tuple-"+strconv.Itoa(i)))
		}
		rule.WriteString(` space "]"`)
		return c.addRule(ruleName, rule.String())
	case KindArray:
		if s.Items.Kind == KindAny && s.MinItems == 0 && s.MaxItems < 0 {
			return c.visitPrimitive(ruleName, "array")
		}
		item := c.visit(s.Items, subName+"item")
		maxItems := s.MaxItems
		if maxItems < 0 {
			maxItems = math.MaxInt32
		}
		return c.addRule(ruleName, `"[" space `+buildRepetition(item, s.MinItems, maxItems, `"," space`)+` space "]"`)
	case KindString:
		switch {
		case s.Pattern != "":
			return c.visitPattern(s.Pattern, ruleName)
		case s.Format == FormatUUID:
			return c.visitPrimitive(ruleName, "uuid")
		case s.Format != FormatNone:
			prim := map[StringFormat]string{FormatDate: "date", FormatTime: "time", FormatDateTime: "date-time"}[s.Format] + "-string"
			return c.addRule(ruleName, c.addPrimitive(prim, stringFormatRules[prim]))
		case s.MinLength > 0 || s.MaxLength >= 0:
			char := c.addPrimitive("char", primitiveRules["char"])
			maxLen := s.MaxLength
			if maxLen < 0 {
				maxLen = math.MaxInt32
			}
			return c.addRule(ruleName, `"\"" `+buildRepetition(char, s.MinLength, maxLen, "")+` "\""`)
		}
		return c.visitPrimitive(ruleName, "string")
	case KindInteger:
		if s.Minimum == math.MinInt64 && s.Maximum == math.MaxInt64 {
			return c.visitPrimitive(ruleName, "integer")
		}
		var m minMaxInt
		m.out.WriteByte('(')
		m.build(s.Minimum, s.Maximum, 16, true)
		m.out.WriteByte(')')
		return c.addRule(ruleName, m.out.String())
	case KindNumber:
		return c.visitPrimitive(ruleName, "number")
	case KindBoolean:
		return c.visitPrimitive(ruleName, "boolean")
	case KindNull:
		return c.visitPrimitive(ruleName, "null")
	case KindAny:
		return c.addRule(ruleName, c.addPrimitive("value", primitiveRules["value"]))
	}
	return ""
}

// finish is check_errors and format_grammar: the rules sorted by name,
// one a line.
func (c *converter) finish(opts BuildOptions) (string, error) {
	if len(c.errs) > 0 {
		return "", &ConversionError{Reasons: c.errs}
	}
	if len(c.warnings) > 0 && opts.Warn != nil {
		opts.Warn(strings.Join(c.warnings, "; "))
	}
	names := make([]string, 0, len(c.rules))
	for n := range c.rules {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n + " ::= " + c.rules[n] + "\n")
	}
	return b.String(), nil
}
