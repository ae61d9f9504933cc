package grammar

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// oursParse answers a 'g' record as the oracle does.
func oursParse(text string) string {
	rules, err := ParseGBNF(text, nil)
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			return "ERR?\n" + err.Error()
		}
		src := text
		if i := strings.IndexByte(src, 0); i >= 0 {
			src = src[:i]
		}
		return "ERR\nparse: error parsing grammar: " + pe.Msg + "\n\n" + src + "\n"
	}
	var b strings.Builder
	b.WriteString("OK\n")
	names := make([]string, 0, len(rules.SymbolIDs))
	for n := range rules.SymbolIDs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%d\n", n, rules.SymbolIDs[n])
	}
	for _, r := range rules.Rules {
		for _, e := range r {
			fmt.Fprintf(&b, " %d:%d", e.Type, e.Value)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func dumpStacks(g *Grammar) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d stacks, partial %d/%d\n", len(g.stacks), g.partial.value, g.partial.remain)
	for _, st := range g.Stacks() {
		for _, e := range st {
			fmt.Fprintf(&b, " %d:%d", e.Type, e.Value)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// oursAccept answers an 'a' record as the oracle does.
func oursAccept(data string) string {
	items := strings.Split(data, "\x1d")
	g, err := New(nil, items[0], "root")
	if err != nil {
		return "ERR"
	}
	var b strings.Builder
	b.WriteString(dumpStacks(g))
	for _, it := range items[1:] {
		if it[0] == 't' {
			id, _ := strconv.Atoi(it[1:])
			err = g.AcceptPiece(vocab.Token(id), "<["+strconv.Itoa(id)+"]>")
		} else {
			err = g.AcceptPiece(0, it[1:])
		}
		if err != nil {
			var ae *AcceptError
			if errors.As(err, &ae) {
				b.WriteString("X " + ae.Msg)
			} else {
				b.WriteString("X? " + err.Error())
			}
			break
		}
		b.WriteString(dumpStacks(g))
	}
	return b.String()
}

// pinGrammars are the grammars of the pin's grammars/ folder.
func pinGrammars(t *testing.T) map[string]string {
	dir := filepath.Join(testenv.SourceTree(t), "grammars")
	files, err := filepath.Glob(filepath.Join(dir, "*.gbnf"))
	if err != nil || len(files) < 5 {
		t.Fatalf("the pin's grammars: %v (%d)", err, len(files))
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = string(b)
	}
	return out
}

// grammarGen draws random GBNF grammars, and texts that walk them.
type grammarGen struct {
	r     *rand.Rand
	rules int
}

var genAlphabet = []string{"a", "b", "c", "x", "0", "1", "9", " ", "\n", "\t", "-", "\"", "é", "日", "🎉", "ÿ", "{", "}", "[", "]", "\\", "#", "|"}

func (g *grammarGen) char() string {
	switch g.r.IntN(12) {
	case 0:
		return `\n`
	case 1:
		return `\x41`
	case 2:
		return `\u00e9`
	case 3:
		return `\U0001F389`
	case 4:
		return `\"`
	case 5:
		return `\\`
	case 6:
		return `\]`
	}
	s := genAlphabet[g.r.IntN(len(genAlphabet))]
	if s == "\"" || s == "\\" || s == "\n" {
		return "a"
	}
	return s
}

func (g *grammarGen) atom(depth, rule int) string {
	switch g.r.IntN(8) {
	case 0, 1:
		var b strings.Builder
		b.WriteByte('"')
		for range 1 + g.r.IntN(3) {
			b.WriteString(g.char())
		}
		b.WriteByte('"')
		return b.String()
	case 2, 3:
		var b strings.Builder
		b.WriteByte('[')
		if g.r.IntN(3) == 0 {
			b.WriteByte('^')
		}
		for range 1 + g.r.IntN(3) {
			c := g.char()
			if c == "]" || c == "[" {
				c = "z"
			}
			b.WriteString(c)
			if g.r.IntN(3) == 0 {
				b.WriteString("-" + g.char())
			}
		}
		b.WriteByte(']')
		return b.String()
	case 4:
		// a reference, mostly forward (left recursion is refused, and
		// tested, too)
		target := rule + 1 + g.r.IntN(max(g.rules-rule, 1))
		if g.r.IntN(20) == 0 {
			target = g.r.IntN(g.rules)
		}
		if target >= g.rules {
			return `"z"`
		}
		return "r" + strconv.Itoa(target)
	case 5:
		if depth > 0 {
			return "(" + g.expr(depth-1, rule) + ")"
		}
	case 6:
		return "."
	}
	return `"q"`
}

func (g *grammarGen) item(depth, rule int) string {
	a := g.atom(depth, rule)
	switch g.r.IntN(10) {
	case 0:
		return a + "*"
	case 1:
		return a + "+"
	case 2:
		return a + "?"
	case 3:
		return a + "{" + strconv.Itoa(g.r.IntN(3)) + "}"
	case 4:
		return a + "{" + strconv.Itoa(g.r.IntN(3)) + ",}"
	case 5:
		m := g.r.IntN(3)
		return a + "{" + strconv.Itoa(m) + "," + strconv.Itoa(m+g.r.IntN(3)) + "}"
	}
	return a
}

func (g *grammarGen) expr(depth, rule int) string {
	var alts []string
	n := 1 + g.r.IntN(3)
	for i := range n {
		var items []string
		// an empty alternative last would take the next line as its own
		// (the parser skips newlines after '|'), as the pin's does: rare
		for range g.r.IntN(4) + b2i(i == n-1 && g.r.IntN(10) > 0) {
			items = append(items, g.item(depth, rule))
		}
		alts = append(alts, strings.Join(items, " "))
	}
	return strings.Join(alts, " | ")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// grammar is a random grammar of a few rules, root first.
func (g *grammarGen) grammar() string {
	g.rules = 1 + g.r.IntN(4)
	var b strings.Builder
	for i := range g.rules {
		name := "r" + strconv.Itoa(i)
		if i == 0 {
			name = "root"
		}
		if g.r.IntN(8) == 0 {
			b.WriteString("# a comment\n")
		}
		b.WriteString(name + " ::= " + strings.ReplaceAll(g.expr(2, i), "r0", "root") + "\n")
	}
	return b.String()
}

// mutate breaks a grammar's text at random, for the parser's errors.
func (g *grammarGen) mutate(s string) string {
	if len(s) == 0 {
		return s
	}
	b := []byte(s)
	i := g.r.IntN(len(b))
	switch g.r.IntN(4) {
	case 0:
		return string(b[:i])
	case 1:
		const set = "()[]{}\"|*+?:=<>!\\0\x00,"
		b[i] = set[g.r.IntN(len(set))]
		return string(b)
	case 2:
		return string(b[:i]) + string(b[i+1:])
	}
	return string(b[:i]) + []string{"{5,3}", "{2001}", "{,}", "<[12]>", "!<[3]>", "\\x4", "\\u12", "\\q", "::=", "(", ")"}[g.r.IntN(11)] + string(b[i:])
}

// walkText is a text the grammar g may take, as pieces: each step takes a
// character a random stack's top allows (or, at times, any character),
// and the text is cut into pieces anywhere, inside a character too.
func (gg *grammarGen) walkText(g *Grammar) []string {
	var text []byte
	for range gg.r.IntN(24) {
		ch := genAlphabet[gg.r.IntN(len(genAlphabet))]
		if len(g.stacks) > 0 && gg.r.IntN(8) > 0 {
			s := g.stacks[gg.r.IntN(len(g.stacks))]
			if s == 0 {
				break
			}
			if c := g.prog.class[g.ar.top(s)]; c != nil && c.positive && len(c.ranges) > 0 {
				rg := c.ranges[gg.r.IntN(len(c.ranges))]
				cp := rg[0] + uint32(gg.r.Int64N(int64(min(rg[1]-rg[0], 300))+1))
				if cp > 0x10ffff || cp >= 0xd800 && cp <= 0xdfff || cp == 0 || cp >= 0x1c && cp <= 0x1f {
					cp = 'a'
				}
				ch = string(rune(cp))
			}
		}
		text = append(text, ch...)
		g.AcceptString(ch) // only to move the walk on
	}
	var pieces []string
	for len(text) > 0 {
		n := 1 + gg.r.IntN(min(len(text), 6))
		pieces = append(pieces, string(text[:n]))
		text = text[n:]
	}
	return pieces
}

// The GBNF parser of the pin's grammars, of the grammars in its tests, of
// random grammars and of broken ones: the same symbols, the same rules,
// the same errors (as the pin prints them), byte for byte.
func TestGBNFParseMatchesLibllama(t *testing.T) {
	var texts []string
	for _, s := range pinGrammars(t) {
		texts = append(texts, s)
	}
	for _, f := range []string{"test-grammar-parser.cpp", "test-grammar-integration.cpp", "test-json-schema-to-grammar.cpp"} {
		toks, err := cppLex(pinTest(t, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range toks {
			if tok.kind == 's' && strings.Contains(tok.s, "::=") {
				texts = append(texts, tok.s)
			}
		}
	}
	n := 400
	if allCases() {
		n = 20000
	}
	gen := &grammarGen{r: rand.New(rand.NewPCG(58, 2))}
	for range n {
		s := gen.grammar()
		texts = append(texts, s, gen.mutate(s))
	}
	var records []record
	loops := 0
	for _, s := range texts {
		// a repetition whose maximum is below its minimum: the pin
		// generates rules until its memory runs out, ggload refuses it
		if strings.Contains(oursParse(s), "is below its minimum") {
			loops++
			continue
		}
		records = append(records, record{'g', s})
	}
	bad := compareOracle(t, records, func(r record) string { return oursParse(r.data) })
	ok := 0
	for _, s := range texts {
		if strings.HasPrefix(oursParse(s), "OK") {
			ok++
		}
	}
	t.Logf("%d grammars (%d random, %d of them broken at random): %d parsed, %d refused (%d of them repetitions {m,n} with n < m, on which the pin loops until its memory is gone); %d differ", len(texts), 2*n, n, ok, len(texts)-ok, loops, bad)
}

// llama_grammar_accept_token over random grammars and texts that walk
// them (pieces cut anywhere, inside a UTF-8 character too), and over the
// pin's test grammars with token pieces: the same stacks, in the same
// order, after each piece, and the same error where a piece is refused.
func TestAcceptMatchesLibllama(t *testing.T) {
	n := 300
	if allCases() {
		n = 15000
	}
	gen := &grammarGen{r: rand.New(rand.NewPCG(58, 3))}
	var records []record
	hangs, ambiguous := 0, 0
	for range n {
		text := gen.grammar()
		g, err := New(nil, text, "root")
		if err != nil && strings.Contains(err.Error(), "through rules that may match nothing") {
			// the pin's stacks grow without end on it
			hangs++
			continue
		}
		items := []string{text}
		if err == nil {
			for range 3 {
				g.Reset()
				for _, p := range gen.walkText(g) {
					items = append(items, "s"+p)
				}
				if gen.r.IntN(4) == 0 {
					items = append(items, "t"+strconv.Itoa(gen.r.IntN(5)))
				}
			}
		}
		rec := record{'a', strings.Join(items, "\x1d")}
		if a := oursAccept(rec.data); strings.Contains(a, "more than") || maxStacks(a) > 1000 {
			// an ambiguous grammar whose stacks multiply: the pin's copies
			// of them take minutes, ggload stops at MaxStacks
			ambiguous++
			continue
		}
		records = append(records, rec)
	}
	for _, c := range cppCalls(t, pinTest(t, "test-grammar-integration.cpp"), "test_grammar") {
		for _, list := range c[3:] {
			for _, s := range list.items {
				items := []string{c[2].s}
				for _, p := range pieceTokens(s.s) {
					if strings.HasPrefix(p.piece, "<[") && p.tok != 0 {
						items = append(items, "t"+strconv.Itoa(int(p.tok)))
					} else {
						items = append(items, "s"+p.piece)
					}
				}
				records = append(records, record{'a', strings.Join(items, "\x1d")})
			}
		}
	}
	bad := compareOracle(t, records, func(r record) string { return oursAccept(r.data) })
	steps, refused := 0, 0
	for _, r := range records {
		a := oursAccept(r.data)
		steps += strings.Count(a, " stacks, ")
		if strings.Contains(a, "\nX ") || strings.HasPrefix(a, "X ") {
			refused++
		}
	}
	t.Logf("%d grammars and texts: %d steps compared, %d texts refused on the way; %d differ; %d grammars refused as left-recursive through rules that may match nothing (the pin hangs on them), %d left out as too ambiguous (over 1000 stacks)", len(records), steps, refused, bad, hangs, ambiguous)
	if steps < 3*len(records) || refused < len(records)/20 {
		t.Errorf("a lopsided corpus: %d steps, %d refused", steps, refused)
	}
}

// maxStacks is the most stacks an answer of oursAccept shows.
func maxStacks(answer string) int {
	m := 0
	for _, l := range strings.Split(answer, "\n") {
		if i := strings.Index(l, " stacks, "); i > 0 {
			if n, err := strconv.Atoi(l[:i]); err == nil {
				m = max(m, n)
			}
		}
	}
	return m
}

// The comparison of stacks sees a difference where there is one.
func TestAcceptOracleNegativeControl(t *testing.T) {
	rec := record{'a', "root ::= \"ab\" | \"ac\"\x1dsa"}
	want := oracle(t, []record{rec})[0]
	if oursAccept(rec.data) != want {
		t.Fatalf("ours %q, the pin's %q", oursAccept(rec.data), want)
	}
	if oursAccept("root ::= \"ab\" | \"ad\"\x1dsa") == want {
		t.Fatal("a different grammar went unseen")
	}
}

// trigger patterns: the pin's own, the forms common_sampler_init makes of
// words and full patterns, and random ones over random texts.
func triggerRecords(r *rand.Rand, n int) []record {
	pins := []string{">>>(?!all)", `^\s+to$`, `^<\|channel\|>(?:commentary|analysis)\s+to=functions$`, `<\|start\|>assistant(\s+to)`,
		`<\|start\|>assistant(<\|channel\|>(?:commentary|analysis)\s+to)`, `[\s\S]*?(<tool_call>)[\s\S]*`, `^[\s\S]*?(\{"name")[\s\S]*$`,
		RegexEscape("{\"type\": \"function\","), RegexEscape("<|tool▁calls▁begin|>"), `^(?:a|b)+$`, `(a*)*b`, `(a|ab)(c|bcd)(d*)`, `\bfoo\b`, `x(?=y)`, `(\w+)\s\1`, `[^\x00-\x1f]+`, `[\d-z]`, `a{2,3}?`, `a{3,2}`, `(`, `[z-a]`, `\u00e9`, `\cA`, `[[:alpha:]]+`, `[\b]`, `.`, `$^`}
	texts := []string{"", "a", "ab", "abcd", ">>> all", ">>>x", " to", "  \n to", "<|channel|>analysis  to=functions", "<|start|>assistant to x",
		"hello <tool_call>{\"a\":1}", "{\"name\": 1}", "foo bar", "xy", "word word", "\x01abc", "é", "aaa", "\r\n", "<|start|>assistant<|channel|>commentary to"}
	var recs []record
	for _, p := range pins {
		for _, s := range texts {
			recs = append(recs, record{'t', p + "\x1d" + s})
		}
	}
	parts := []string{"a", "b", "ab", ".", "\\s", "\\S", "\\w", "\\d", "\\b", "[ab]", "[^a]", "[a-c]", "*", "+", "?", "*?", "+?", "{2}", "{1,2}", "(", ")", "(?:", "(?=", "(?!", "|", "^", "$", "\\1", "é", "\\.", "[\\s\\S]"}
	for range n {
		var p strings.Builder
		for range 1 + r.IntN(6) {
			p.WriteString(parts[r.IntN(len(parts))])
		}
		var s strings.Builder
		for range r.IntN(10) {
			s.WriteString([]string{"a", "b", "c", " ", "\n", "é", "1", "_", "ab"}[r.IntN(9)])
		}
		recs = append(recs, record{'t', p.String() + "\x1d" + s.String()})
	}
	return recs
}

// oursFind answers a 't' record as the oracle does.
func oursFind(data string) string {
	f := strings.SplitN(data, "\x1d", 2)
	tp, err := compileTrigger(f[0])
	if err != nil {
		return "ERR"
	}
	pos, ok, err := tp.find([]byte(f[1]))
	switch {
	case err != nil:
		return "STEPS"
	case !ok:
		return "npos"
	}
	return strconv.Itoa(pos)
}

// llama_grammar_trigger_pattern::find, std::regex as libllama built it:
// the same match, the same start, the same patterns refused.
func TestTriggerFindMatchesLibllama(t *testing.T) {
	n := 2000
	if allCases() {
		n = 50000
	}
	records := triggerRecords(rand.New(rand.NewPCG(58, 4)), n)
	bad := compareOracle(t, records, func(r record) string { return oursFind(r.data) })
	found, errs := 0, 0
	for _, r := range records {
		switch a := oursFind(r.data); a {
		case "ERR":
			errs++
		case "npos":
		default:
			found++
		}
	}
	t.Logf("%d patterns and texts: %d found, %d patterns refused; %d differ", len(records), found, errs, bad)
	if found < len(records)/10 || errs < len(records)/20 {
		t.Errorf("a lopsided corpus: %d found, %d refused", found, errs)
	}
}

// slicesOf returns the sorted keys of a map, for stable iteration.
func slicesOf(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// oursMask answers an 'm' record as the oracle does, over the
// vocabulary v.
func oursMask(v *vocab.Vocab, data string) string {
	f := strings.Split(data, "\x1d")
	var patterns []string
	if f[2] != "" {
		patterns = strings.Split(f[2], "\x1f")
	}
	var trig []vocab.Token
	if f[3] != "" {
		for _, s := range strings.Split(f[3], ",") {
			n, _ := strconv.Atoi(s)
			trig = append(trig, vocab.Token(n))
		}
	}
	g, err := NewLazy(v, f[0], "root", f[1] == "1", patterns, trig)
	if err != nil {
		var pe *PatternError
		if errors.As(err, &pe) {
			return "ERR regex"
		}
		return "ERR"
	}
	var b strings.Builder
	n := v.NTokens()
	step := func() {
		m := g.Mask()
		h, count := uint64(1469598103934665603), 0
		for i := range n {
			if m.Allows(vocab.Token(i)) {
				count++
				h = (h ^ uint64(i)) * 1099511628211
			}
		}
		aw := 0
		if g.Awaiting() {
			aw = 1
		}
		fmt.Fprintf(&b, "awaiting %d allowed %d %d\n%s", aw, count, h, dumpStacks(g))
	}
	step()
	if f[4] == "" {
		return b.String()
	}
	for _, s := range strings.Split(f[4], ",") {
		id, _ := strconv.Atoi(s)
		if err := g.Accept(vocab.Token(id)); err != nil {
			var ae *AcceptError
			switch {
			case errors.As(err, &ae) && strings.HasPrefix(ae.Msg, "end-of-generation token"):
				b.WriteString("ABORT")
			case errors.As(err, &ae):
				b.WriteString("X " + ae.Msg)
			default:
				b.WriteString("X? " + err.Error())
			}
			return b.String()
		}
		step()
	}
	return b.String()
}

// maskWalk is a generation's tokens under g: at each step a token the
// mask allows (at times any token, or an end of generation), so that the
// walk goes deep into the grammar and off it too.
func maskWalk(r *rand.Rand, v *vocab.Vocab, g *Grammar, steps int) []string {
	var toks []string
	n := v.NTokens()
	for range steps {
		m := g.Mask()
		var allowed []int
		for i := range n {
			if m.Allows(vocab.Token(i)) {
				allowed = append(allowed, i)
			}
		}
		t := r.IntN(n)
		if len(allowed) > 0 && r.IntN(10) > 0 {
			t = allowed[r.IntN(len(allowed))]
			// half the time, a token that leaves or finishes a UTF-8
			// character unfinished, where the grammar allows one
			var split []int
			for _, a := range allowed {
				rk := g.idx.rank[a]
				if g.partial.remain > 0 && g.idx.class[a] == tokInvalid || rk >= 0 && g.idx.partials[rk].remain > 0 {
					split = append(split, a)
				}
			}
			if len(split) > 0 && r.IntN(2) == 0 {
				t = split[r.IntN(len(split))]
			}
		}
		toks = append(toks, strconv.Itoa(t))
		if g.Accept(vocab.Token(t)) != nil {
			break
		}
	}
	return toks
}

// llama_grammar_apply_impl over a whole vocabulary, and
// llama_grammar_accept_impl: the pin's grammars and JSON schemas, random
// grammars, and lazy grammars with trigger words, patterns and tokens,
// walked token by token on a SentencePiece and a BPE vocabulary (the
// tokens that split a UTF-8 character included): the same tokens allowed
// at every step, the same stacks, the same trigger, the same errors.
func TestMaskMatchesLibllama(t *testing.T) {
	files := []string{"llama-spm"}
	if allCases() {
		files = append(files, "llama-bpe", "qwen2", "gpt-2")
	}
	grammars := pinGrammars(t)
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-"+name+".gguf")
			v, err := vocab.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(58, 5))
			gen := &grammarGen{r: r}
			type spec struct {
				text, lazy, patterns, tokens string
			}
			var specs []spec
			for _, k := range slicesOf(grammars) {
				specs = append(specs, spec{grammars[k], "0", "", ""})
			}
			for _, s := range []string{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer","minimum":-5,"maximum":300}},"required":["a"]}`,
				`{"type":"array","items":{"enum":["x","yz",1.5,null]},"maxItems":4}`, `{"type":"string","format":"date-time"}`} {
				sv, _ := parseJSON(s)
				g, err := FromJSONSchema(sv, true)
				if err != nil {
					t.Fatal(err)
				}
				specs = append(specs, spec{g, "0", "", ""})
			}
			// lazy grammars: a word, a full pattern, a pattern with a group,
			// a token (the vocabulary's BOS and EOS, as tool-call tokens)
			tool := `root ::= "{" [a-z"]* "}" | "x"+`
			specs = append(specs,
				spec{tool, "1", RegexEscape("{"), ""},
				spec{tool, "1", `^[\s\S]*?(\{)[\s\S]*$`, ""},
				spec{tool, "1", `a(x+)`, ""},
				spec{tool, "1", ">>>(?!all)", strconv.Itoa(int(v.EOS()))},
				spec{`root ::= <[` + strconv.Itoa(int(v.BOS())) + `]> [a-z ]* | !<[` + strconv.Itoa(int(v.EOS())) + `]>`, "0", "", ""},
				spec{tool, "1", "", strconv.Itoa(int(v.BOS()))},
			)
			nRandom := 20
			switch {
			case allCases() && v.NTokens() <= 32000:
				nRandom = 200
			case allCases():
				nRandom = 40 // each step walks 128k-152k tokens on both sides
			}
			for range nRandom {
				specs = append(specs, spec{gen.grammar(), "0", "", ""})
			}
			steps := 24
			var records []record
			for _, sp := range specs {
				var pats []string
				if sp.patterns != "" {
					pats = []string{sp.patterns}
				}
				var trig []vocab.Token
				if sp.tokens != "" {
					n, _ := strconv.Atoi(sp.tokens)
					trig = []vocab.Token{vocab.Token(n)}
				}
				g, err := NewLazy(v, sp.text, "root", sp.lazy == "1", pats, trig)
				if err != nil && strings.Contains(err.Error(), "through rules that may match nothing") {
					continue
				}
				var walk []string
				if err == nil {
					walk = maskWalk(r, v, g, steps)
				}
				rec := record{'m', strings.Join([]string{sp.text, sp.lazy, sp.patterns, sp.tokens, strings.Join(walk, ",")}, "\x1d")}
				if maxStacks(oursMask(v, rec.data)) > 1000 {
					continue
				}
				records = append(records, rec)
			}
			want := oracleWith(t, records, path)
			bad, compared, partial := 0, 0, 0
			for i, rec := range records {
				got := oursMask(v, rec.data)
				compared += strings.Count(got, "allowed ")
				for _, l := range strings.Split(got, "\n") {
					if i := strings.Index(l, "partial "); i >= 0 && !strings.HasSuffix(l, "/0") && !strings.HasSuffix(l, "/-1") {
						partial++
					}
				}
				if got != want[i] {
					bad++
					if bad <= 3 {
						t.Errorf("grammar %q walk %q:\nours:\n%s\nthe pin's:\n%s", trunc(strings.Split(rec.data, "\x1d")[0]), strings.Split(rec.data, "\x1d")[4], trunc(got), trunc(want[i]))
					}
				}
			}
			t.Logf("%d grammars walked, %d masks of %d tokens compared (%d in the middle of a UTF-8 character); %d differ", len(records), compared, v.NTokens(), partial, bad)
			if partial == 0 {
				t.Error("no mask in the middle of a UTF-8 character")
			}
		})
	}
}
