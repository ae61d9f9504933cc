package grammar

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/vocab"
)

var elementTypes = map[string]ElementType{
	"LLAMA_GRETYPE_END": End, "LLAMA_GRETYPE_ALT": Alt, "LLAMA_GRETYPE_RULE_REF": RuleRef, "LLAMA_GRETYPE_CHAR": Char,
	"LLAMA_GRETYPE_CHAR_NOT": CharNot, "LLAMA_GRETYPE_CHAR_RNG_UPPER": CharRngUpper, "LLAMA_GRETYPE_CHAR_ALT": CharAlt,
	"LLAMA_GRETYPE_CHAR_ANY": CharAny, "LLAMA_GRETYPE_TOKEN": Token, "LLAMA_GRETYPE_TOKEN_NOT": TokenNot,
}

// elementsOf reads {{LLAMA_GRETYPE_CHAR, 'a'}, ...} of a pin test.
func elementsOf(t *testing.T, v cval) []Element {
	t.Helper()
	var out []Element
	for _, e := range v.items {
		if e.kind != 'l' || len(e.items) != 2 || e.items[0].kind != 'n' || e.items[1].kind != 'i' {
			t.Fatalf("not an element: %v", e)
		}
		typ, ok := elementTypes[e.items[0].s]
		if !ok {
			t.Fatalf("element type %s", e.items[0].s)
		}
		out = append(out, Element{typ, uint32(e.items[1].i)})
	}
	return out
}

// The pin's test-grammar-parser.cpp, read from its source: each grammar
// parses to the symbols and rules it lists, or fails where it must.
func TestGrammarParserPinCases(t *testing.T) {
	calls := cppCalls(t, pinTest(t, "test-grammar-parser.cpp"), "verify_parsing", "verify_failure")
	parsed, failed := 0, 0
	for _, c := range calls {
		text := c[1].s
		rules, err := ParseGBNF(text, nil)
		if c[0].s == "verify_failure" {
			failed++
			if err == nil {
				t.Errorf("%q parsed, want a failure", text)
			}
			continue
		}
		parsed++
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		var want []string
		for _, kv := range c[2].items {
			want = append(want, fmt.Sprintf("%s=%d", kv.items[0].s, kv.items[1].i))
		}
		var got []string
		for name, id := range rules.SymbolIDs {
			got = append(got, fmt.Sprintf("%s=%d", name, id))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%q: symbols %v, want %v", text, got, want)
		}
		var flat []Element
		for _, r := range rules.Rules {
			flat = append(flat, r...)
		}
		if wantRules := elementsOf(t, c[3]); !slices.Equal(flat, wantRules) {
			t.Errorf("%q: rules\n%v\nwant\n%v", text, flat, wantRules)
		}
	}
	if parsed < 15 || failed < 5 {
		t.Fatalf("read %d parsing and %d failure cases from test-grammar-parser.cpp", parsed, failed)
	}
}

// pieceTokens is the pin's parse_tokens of test-grammar-integration.cpp:
// 0xff and four bytes are a token id (its piece "<[id]>"), anything else
// one code point.
func pieceTokens(s string) []struct {
	tok   vocab.Token
	piece string
} {
	var out []struct {
		tok   vocab.Token
		piece string
	}
	for i := 0; i < len(s); {
		if s[i] == 0xff && i+5 <= len(s) {
			id := vocab.Token(uint32(s[i+1])<<24 | uint32(s[i+2])<<16 | uint32(s[i+3])<<8 | uint32(s[i+4]))
			out = append(out, struct {
				tok   vocab.Token
				piece string
			}{id, fmt.Sprintf("<[%d]>", id)})
			i += 5
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		out = append(out, struct {
			tok   vocab.Token
			piece string
		}{0, string(r)})
		i += n
	}
	return out
}

// matchString is the pin's match_string: the pieces accepted one by one,
// and the grammar complete at the end.
func matchString(g *Grammar, s string) bool {
	g.Reset()
	for _, p := range pieceTokens(s) {
		if err := g.AcceptPiece(p.tok, p.piece); err != nil {
			return false
		}
	}
	return g.CanEnd()
}

// The pin's test-grammar-integration.cpp, read from its source: each
// grammar (or schema, converted) takes its passing strings and refuses
// its failing ones.
func TestGrammarIntegrationPinCases(t *testing.T) {
	calls := cppCalls(t, pinTest(t, "test-grammar-integration.cpp"), "test_grammar", "test_schema")
	n := 0
	for _, c := range calls {
		if len(c) != 5 {
			t.Fatalf("a call of another shape: %v", c)
		}
		desc, text := c[1].s, c[2].s
		if c[0].s == "test_schema" {
			v, err := parseJSON(text)
			if err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
			if text, err = FromJSONSchema(v, true); err != nil {
				t.Errorf("%s: %v", desc, err)
				continue
			}
		}
		g, err := New(nil, text, "root")
		if err != nil {
			t.Errorf("%s: %v\n%s", desc, err, text)
			continue
		}
		for _, s := range c[3].items {
			n++
			if !matchString(g, s.s) {
				t.Errorf("%s: %q refused, want it taken", desc, s.s)
			}
		}
		for _, s := range c[4].items {
			n++
			if matchString(g, s.s) {
				t.Errorf("%s: %q taken, want it refused", desc, s.s)
			}
		}
	}
	if len(calls) < 30 || n < 300 {
		t.Fatalf("read %d cases, %d strings from test-grammar-integration.cpp", len(calls), n)
	}
}

// The failure cases of test-grammar-integration.cpp's own functions: no
// root, a missing reference, left recursion, a root that is not there.
func TestGrammarIntegrationFailures(t *testing.T) {
	rules, err := ParseGBNF(`
        rot ::= expr
        expr ::= term ("+" term)*
        term ::= number
        number ::= [0-9]+`, nil)
	if err != nil || len(rules.Rules) == 0 {
		t.Fatalf("no root: %v", err)
	}
	if _, ok := rules.SymbolIDs["root"]; ok {
		t.Fatal("a root where there is none")
	}
	if _, err := New(nil, "rot ::= \"a\"", "root"); err == nil || err.Error() != "grammar: grammar does not contain a 'root' symbol" {
		t.Errorf("missing root: %v", err)
	}
	if _, err := ParseGBNF(`root ::= expr
        expr ::= term ("+" term)*
        term ::= numero
        number ::= [0-9]+`, nil); err == nil || !strings.Contains(err.Error(), "line 3, column 18: Undefined rule identifier 'numero'") {
		t.Errorf("missing reference: %v", err)
	}
	for _, s := range []string{
		`root ::= "a" | root "a"`,
		"root ::= asdf\nasdf ::= \"a\" | asdf \"a\"",
		"root ::= asdf\nasdf ::= \"a\" | foo \"b\"\nfoo ::= \"c\" | asdf \"d\" | \"e\"",
		"root ::= asdf\nasdf ::= \"a\" | foo \"b\"\nfoo ::= \"c\" | empty asdf \"d\" | \"e\"\nempty ::= \"blah\" | ",
	} {
		if _, err := New(nil, s, "root"); err == nil || !strings.Contains(err.Error(), "left recursion detected") {
			t.Errorf("%q: %v, want left recursion", s, err)
		}
	}
	if _, err := New(nil, `root ::= "foobar"`, "nonexistent"); err == nil {
		t.Error("a missing root symbol accepted")
	}
	if _, err := New(nil, `foobar ::= "foobar"`, "root"); err == nil {
		t.Error("a grammar without root accepted")
	}
	if _, err := New(nil, `foobar ::= "foobar"`, "foobar"); err != nil {
		t.Errorf("a custom root: %v", err)
	}
}

// The expected grammars of test-json-schema-to-grammar.cpp parse, with a
// root (its "Check the expectations parse").
func TestSchemaExpectationsParse(t *testing.T) {
	for _, c := range pinSchemaCases(t) {
		if !c.ok {
			continue
		}
		rules, err := ParseGBNF(c.grammar, nil)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if _, ok := rules.SymbolIDs["root"]; !ok {
			t.Errorf("%s: no root", c.name)
		}
	}
}

// cppInit reads the brace list a pin test assigns to name.
func cppInit(t *testing.T, src, name string) cval {
	t.Helper()
	toks, err := cppLex(src)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+2 < len(toks); i++ {
		if toks[i].kind == 'n' && toks[i].s == name && toks[i+1].kind == 'p' && toks[i+1].s == "=" && toks[i+2].kind == 'p' && toks[i+2].s == "{" {
			p := &cppParser{toks: toks, i: i + 3}
			items, err := p.list("}")
			if err != nil {
				t.Fatal(err)
			}
			return cval{kind: 'l', items: items}
		}
	}
	t.Fatalf("no %s = {...}", name)
	return cval{}
}

// The pin's test-llama-grammar.cpp, its tables read from its source: the
// rules given as elements make the stacks it lists, in its order, and
// each stack rejects the characters it lists.
func TestLlamaGrammarPinCase(t *testing.T) {
	src := pinTest(t, "test-llama-grammar.cpp")
	ids := map[string]uint32{}
	for _, kv := range cppInit(t, src, "expected").items {
		ids[kv.items[0].s] = uint32(kv.items[1].i)
	}
	var rules [][]Element
	for _, r := range cppInit(t, src, "expected_rules").items {
		rules = append(rules, elementsOf(t, r))
	}
	g, err := NewFromRules(nil, rules, int(ids["root"]))
	if err != nil {
		t.Fatal(err)
	}
	stacks := g.Stacks()
	want := cppInit(t, src, "expected_stacks").items
	if len(stacks) != len(want) {
		t.Fatalf("%d stacks, want %d:\n%s", len(stacks), len(want), g)
	}
	for i, w := range want {
		if ws := elementsOf(t, w); !slices.Equal(stacks[i], ws) {
			t.Errorf("stack %d: %v, want %v", i, stacks[i], ws)
		}
	}
	// llama_grammar_reject_candidates_for_stack of each stack, over the
	// code points 37..59, one a candidate
	rejects := cppInit(t, src, "expected_reject").items
	if len(rejects) != len(g.stacks) {
		t.Fatalf("%d reject lists for %d stacks", len(rejects), len(g.stacks))
	}
	all := g.stacks
	for i, s := range all {
		g.stacks = []int32{s}
		var got []string
		for c := range 23 {
			if !g.walk(0, []uint32{uint32(37 + c)}, partialUTF8{}) {
				got = append(got, fmt.Sprintf("%d:%d", c, 37+c))
			}
		}
		var want []string
		for _, r := range rejects[i].items {
			// the pin's list may name a candidate past the 23 it makes
			if r.items[0].i < 23 {
				want = append(want, fmt.Sprintf("%d:%d", r.items[0].i, r.items[1].i))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("stack %d rejects %v, want %v", i, got, want)
		}
	}
}

func parseJSON(s string) (ojson.Value, error) { return ojson.ParseString(s) }
