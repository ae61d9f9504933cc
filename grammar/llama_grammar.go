// Port of llama.cpp src/llama-grammar.cpp (v0.5.0): llama_grammar, its
// init, accept and lazy triggers.

package grammar

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ggload/ggload/vocab"
)

// InitError is a grammar that llama_grammar_init_impl refuses after its
// text parsed: no rules, no root symbol, a reference to no rule, a left
// recursion; Msg is the pin's message.
type InitError struct{ Msg string }

func (e *InitError) Error() string { return "grammar: " + e.Msg }

// AcceptError is a token or text the grammar cannot take: llama.cpp
// throws "Unexpected empty grammar stack after accepting piece", or
// aborts on an end-of-generation token the grammar cannot end at.
type AcceptError struct {
	Token vocab.Token // vocab.Null for a text
	Piece string
	Msg   string
}

func (e *AcceptError) Error() string { return "grammar: " + e.Msg }

// Grammar is llama_grammar: the rules, the stacks of where generation
// stands in them, the bytes of an unfinished UTF-8 character, and a lazy
// grammar's triggers. It serves one generation at a time: it is not safe
// for concurrent use (Clone gives another).
type Grammar struct {
	v     *vocab.Vocab
	prog  *program
	ar    *arena
	idx   *vocabIndex // nil without a vocabulary
	start int         // the root rule

	stacks  []int32
	partial partialUTF8

	lazy, awaiting bool
	triggerBuf     []byte
	triggerPos     []tokenSpan
	triggerTokens  []vocab.Token
	triggers       []*triggerPattern

	initial []int32 // the stacks at the start, for Reset
	masks   *maskCache
}

// tokenSpan is a token a lazy grammar buffered, and its bytes in the
// buffer.
type tokenSpan struct {
	tok        vocab.Token
	start, end int
}

// New is llama_grammar_init_impl of a GBNF text, non-lazy: the grammar
// from the rule named root. v gives the tokens' text and the end of
// generation (it may be nil for a grammar that only takes text).
func New(v *vocab.Vocab, text, root string) (*Grammar, error) {
	return NewLazy(v, text, root, false, nil, nil)
}

// NewLazy is llama_grammar_init_impl with its triggers: where lazy is
// set, the grammar constrains nothing until a trigger token is accepted
// or the text accepted so far matches a trigger pattern (a regular
// expression in the pin's ECMAScript syntax); then it takes the text from
// the pattern's first non-empty group (or its match) on.
func NewLazy(v *vocab.Vocab, text, root string, lazy bool, patterns []string, tokens []vocab.Token) (*Grammar, error) {
	rules, err := ParseGBNF(text, v)
	if err != nil {
		return nil, err
	}
	if len(rules.Rules) == 0 {
		return nil, &InitError{"failed to parse grammar"}
	}
	start, ok := rules.SymbolIDs[root]
	if !ok {
		return nil, &InitError{fmt.Sprintf("grammar does not contain a '%s' symbol", root)}
	}
	var trig []*triggerPattern
	for _, p := range patterns {
		tp, err := compileTrigger(p)
		if err != nil {
			return nil, err
		}
		trig = append(trig, tp)
	}
	g, err := newGrammar(v, rules.Rules, int(start), false)
	if err != nil {
		return nil, err
	}
	g.lazy, g.awaiting = lazy, lazy
	g.triggerTokens = append([]vocab.Token(nil), tokens...)
	g.triggers = trig
	return g, nil
}

// NewFromRules is llama_grammar_init_impl of rules given as elements
// (each rule's End optional): the grammar from rule start.
func NewFromRules(v *vocab.Vocab, rules [][]Element, start int) (*Grammar, error) {
	return newGrammar(v, rules, start, true)
}

func newGrammar(v *vocab.Vocab, rules [][]Element, start int, check bool) (*Grammar, error) {
	if start < 0 || start >= len(rules) {
		return nil, &InitError{fmt.Sprintf("start rule %d of %d rules", start, len(rules))}
	}
	// copy the rules up to each End, and end each with one
	vec := make([][]Element, len(rules))
	for i, r := range rules {
		for _, e := range r {
			if e.Type == End {
				break
			}
			vec[i] = append(vec[i], e)
		}
		vec[i] = append(vec[i], Element{End, 0})
	}
	if err := validRules(vec, check); err != nil {
		return nil, err
	}
	if i := leftRecursion(vec); i >= 0 {
		return nil, &InitError{fmt.Sprintf("unsupported grammar, left recursion detected for nonterminal at index %d", i)}
	}
	if i := growingLeftRecursion(vec); i >= 0 {
		return nil, &InitError{fmt.Sprintf("unsupported grammar, left recursion (through rules that may match nothing) detected for nonterminal at index %d", i)}
	}
	prog := newProgram(vec)
	g := &Grammar{v: v, prog: prog, ar: newArena(prog), start: start, masks: newMaskCache()}
	if v != nil {
		g.idx = indexOf(v)
	}
	// one stack for each alternative of the start rule
	pos := prog.start[start]
	for {
		s := int32(0)
		if !prog.endOfSequence(pos) {
			s = g.ar.push(0, pos)
		}
		for _, x := range g.ar.advance(s) {
			g.stacks = appendStack(g.stacks, x)
		}
		for !prog.endOfSequence(pos) {
			pos++
		}
		if prog.elems[pos].Type != Alt {
			break
		}
		pos++
	}
	g.initial = append([]int32(nil), g.stacks...)
	return g, nil
}

// validRules checks what the pin leaves to chance or to an abort: every
// reference names a rule (the pin checks this of rules given as
// elements), and every element is one a stack can stand on.
func validRules(rules [][]Element, refs bool) error {
	for i, r := range rules {
		for j, e := range r {
			switch e.Type {
			case RuleRef:
				if int(e.Value) >= len(rules) || len(rules[e.Value]) == 0 {
					if refs {
						return &InitError{fmt.Sprintf("invalid grammar: rule %d references undefined rule %d", i, e.Value)}
					}
				}
			case CharRngUpper, CharAlt:
				if j == 0 || !isCharType(r[j-1].Type) && r[j-1].Type != CharAlt && r[j-1].Type != CharRngUpper {
					return &InitError{fmt.Sprintf("invalid grammar: rule %d element %d: a %s without a character before it", i, j, e.Type)}
				}
			case End, Alt, Char, CharNot, CharAny, Token, TokenNot:
			default:
				return &InitError{fmt.Sprintf("invalid grammar: rule %d element %d: unknown type %d", i, j, e.Type)}
			}
		}
	}
	return nil
}

// leftRecursion is llama_grammar_detect_left_recursion over every rule:
// the first rule found left-recursive, or -1.
func leftRecursion(rules [][]Element) int {
	n := len(rules)
	visited, inProgress, mayBeEmpty := make([]bool, n), make([]bool, n), make([]bool, n)
	end := func(e Element) bool { return e.Type == End || e.Type == Alt }
	var detect func(i int) bool
	detect = func(i int) bool {
		if inProgress[i] {
			return true
		}
		inProgress[i] = true
		r := rules[i]
		// does the rule produce the empty string?
		atStart := true
		for _, e := range r {
			if end(e) {
				if atStart {
					mayBeEmpty[i] = true
					break
				}
				atStart = true
			} else {
				atStart = false
			}
		}
		// recurse into the leftmost nonterminals (or the next as long as
		// the ones before may be empty)
		recurse := true
		for _, e := range r {
			switch {
			case e.Type == RuleRef && recurse:
				if int(e.Value) >= n {
					recurse = false
					continue
				}
				if detect(int(e.Value)) {
					return true
				}
				if !mayBeEmpty[e.Value] {
					recurse = false
				}
			case end(e):
				recurse = true
			default:
				recurse = false
			}
		}
		inProgress[i] = false
		visited[i] = true
		return false
	}
	for i := range n {
		if !visited[i] && detect(i) {
			return i
		}
	}
	return -1
}

// growingLeftRecursion finds the left recursions the pin's check misses
// and on which its stacks grow without end: a rule that comes back as
// the first thing to match of itself, through rules that may match
// nothing without an empty alternative of their own (x ::= y x "a",
// y ::= z?), with something to match after the way back (a recursion in
// tail position replaces the top of the stack and ends). The pin hangs
// on such a grammar as soon as generation reaches the rule, until its
// memory is gone. The rule, or -1.
func growingLeftRecursion(rules [][]Element) int {
	left := leftEdges(rules, nullableRules(rules))
	comp := components(left)
	for v, edges := range left {
		for _, e := range edges {
			if e.grows && comp[v] == comp[e.to] {
				return v
			}
		}
	}
	return -1
}

func isEnd(e Element) bool { return e.Type == End || e.Type == Alt }

// ruleRef is the rule e refers to, where it is a reference to a rule.
func ruleRef(e Element, n int) (int, bool) {
	return int(e.Value), e.Type == RuleRef && int(e.Value) < n
}

// nullableRules says, of each rule, whether it may match nothing.
func nullableRules(rules [][]Element) []bool {
	n := len(rules)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for i, r := range rules {
			if nullable[i] {
				continue
			}
			empty := true // the alternative so far
			for _, e := range r {
				if isEnd(e) {
					if empty {
						nullable[i], changed = true, true
						break
					}
					empty = true
					continue
				}
				if j, ok := ruleRef(e, n); !ok || !nullable[j] {
					empty = false
				}
			}
		}
	}
	return nullable
}

// leftEdge is a rule a rule may start with, and whether the stack keeps
// what follows the reference (it does unless the reference ends its
// alternative).
type leftEdge struct {
	to    int
	grows bool
}

func leftEdges(rules [][]Element, nullable []bool) [][]leftEdge {
	left := make([][]leftEdge, len(rules))
	for i, r := range rules {
		prefix := true
		for k, e := range r {
			if isEnd(e) {
				prefix = true
				continue
			}
			if !prefix {
				continue
			}
			j, ok := ruleRef(e, len(rules))
			if ok {
				left[i] = append(left[i], leftEdge{j, !isEnd(r[k+1])})
			}
			prefix = ok && nullable[j]
		}
	}
	return left
}

// components numbers the strongly connected components of the graph
// (Tarjan's algorithm).
func components(left [][]leftEdge) []int {
	n := len(left)
	index, low, comp := make([]int, n), make([]int, n), make([]int, n)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	var stack []int
	onStack := make([]bool, n)
	next, nComp := 0, 0
	var connect func(v int)
	connect = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range left[v] {
			if index[e.to] < 0 {
				connect(e.to)
				low[v] = min(low[v], low[e.to])
			} else if onStack[e.to] {
				low[v] = min(low[v], index[e.to])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = nComp
				if w == v {
					break
				}
			}
			nComp++
		}
	}
	for v := range n {
		if index[v] < 0 {
			connect(v)
		}
	}
	return comp
}

// Clone is llama_grammar_clone_impl: a grammar in the same state that
// shares nothing that changes.
func (g *Grammar) Clone() *Grammar {
	c := *g
	c.ar = newArena(g.prog)
	re := func(list []int32) []int32 {
		out := make([]int32, len(list))
		for i, s := range list {
			out[i] = c.ar.stackOf(g.ar.elements(s))
		}
		return out
	}
	c.stacks, c.initial = re(g.stacks), re(g.initial)
	c.triggerBuf = append([]byte(nil), g.triggerBuf...)
	c.triggerPos = append([]tokenSpan(nil), g.triggerPos...)
	c.masks = newMaskCache()
	return &c
}

// Reset is what llama_sampler_grammar_reset does, a grammar built again
// from its text: the stacks of the start, no partial character, a lazy
// grammar awaiting its trigger again.
func (g *Grammar) Reset() {
	g.stacks = append(g.stacks[:0], g.initial...)
	g.partial = partialUTF8{}
	g.awaiting = g.lazy
	g.triggerBuf = g.triggerBuf[:0]
	g.triggerPos = g.triggerPos[:0]
}

// Awaiting says whether a lazy grammar still awaits its trigger (it then
// constrains nothing).
func (g *Grammar) Awaiting() bool { return g.awaiting }

// decodeUTF8 is the pin's decode_utf8 of a token's text, continuing a
// partial sequence: the code points (up to the first NUL byte) and the
// partial sequence at the end ({0, -1} for an invalid one, with the code
// points dropped).
func decodeUTF8(src string, partial partialUTF8, cps []uint32) ([]uint32, partialUTF8) {
	lookup := [16]int32{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4}
	cps = cps[:0]
	pos := 0
	at := func(i int) byte {
		if i < len(src) {
			return src[i]
		}
		return 0
	}
	value, remain := partial.value, partial.remain
	// continue the previous sequence
	for at(pos) != 0 && remain > 0 {
		b := at(pos)
		if b>>6 != 2 {
			return cps, partialUTF8{0, -1}
		}
		value = value<<6 + uint32(b&0x3f)
		pos++
		remain--
	}
	if partial.remain > 0 && remain == 0 {
		cps = append(cps, value)
	}
	// then the sequences after it, which may end in an unfinished one
	for at(pos) != 0 {
		first := at(pos)
		remain = lookup[first>>4] - 1
		if remain < 0 {
			return cps[:0], partialUTF8{0, remain}
		}
		mask := byte(1)<<(7-remain) - 1
		value = uint32(first & mask)
		pos++
		for at(pos) != 0 && remain > 0 {
			value = value<<6 + uint32(at(pos)&0x3f)
			pos++
			remain--
		}
		if remain == 0 {
			cps = append(cps, value)
		}
	}
	return cps, partialUTF8{value, remain}
}

// acceptChar is llama_grammar_accept_chr: the stacks s becomes after
// chr, added to out.
func (g *Grammar) acceptChar(s int32, chr uint32, out *stackSet) {
	if s == 0 {
		return
	}
	pos := g.ar.top(s)
	if isTokenType(g.prog.elems[pos].Type) {
		return
	}
	if !g.prog.class[pos].matches(chr) {
		return
	}
	for _, x := range g.ar.charNext(s) {
		out.add(x)
	}
}

// acceptChars is the stacks start becomes after the code points, each
// taken by every stack in turn (llama_grammar_accept_chr); none where a
// code point leaves none. The list is a's or b's.
func (g *Grammar) acceptChars(start []int32, cps []uint32, a, b *stackSet) ([]int32, error) {
	cur, next := a, b
	cur.reset()
	for _, s := range start {
		cur.add(s)
	}
	for _, cp := range cps {
		next.reset()
		for _, s := range cur.list {
			g.acceptChar(s, cp, next)
		}
		if len(next.list) > MaxStacks {
			return nil, ErrTooManyStacks
		}
		cur, next = next, cur
		if len(cur.list) == 0 {
			break
		}
	}
	return cur.list, nil
}

// AcceptString is llama_grammar_accept_str: the grammar advanced by a
// text, character by character.
func (g *Grammar) AcceptString(piece string) error {
	cps, partial := decodeUTF8(piece, g.partial, nil)
	var a, b stackSet
	stacks, err := g.acceptChars(g.stacks, cps, &a, &b)
	if err != nil {
		return err
	}
	g.stacks = append(g.stacks[:0], stacks...)
	g.partial = partial
	if len(g.stacks) == 0 {
		return &AcceptError{vocab.Null, piece, "Unexpected empty grammar stack after accepting piece: " + piece}
	}
	g.compact()
	return nil
}

// AcceptPiece is llama_grammar_accept_token: the grammar advanced by a
// token whose text is piece (a token element matches its id, a
// character its text).
func (g *Grammar) AcceptPiece(t vocab.Token, piece string) error {
	cps, partial := decodeUTF8(piece, g.partial, nil)
	var out, a, b stackSet
	for _, s := range g.stacks {
		if s == 0 {
			continue
		}
		pos := g.ar.top(s)
		if isTokenType(g.prog.elems[pos].Type) {
			if g.prog.matchToken(pos, t) {
				for _, x := range g.ar.advance(g.ar.popPush(s, pos+1)) {
					out.add(x)
				}
			}
			continue
		}
		stacks, err := g.acceptChars([]int32{s}, cps, &a, &b)
		if err != nil {
			return err
		}
		for _, x := range stacks {
			out.add(x)
		}
		if len(out.list) > MaxStacks {
			return ErrTooManyStacks
		}
	}
	g.stacks = append(g.stacks[:0], out.list...)
	g.partial = partial
	if len(g.stacks) == 0 {
		return &AcceptError{t, piece, fmt.Sprintf("Unexpected empty grammar stack after accepting piece: %s (%d)", piece, t)}
	}
	g.compact()
	return nil
}

// Accept is llama_grammar_accept_impl: the grammar advanced by a
// generated token. A lazy grammar awaiting its trigger buffers the text
// instead, and once a trigger token or pattern comes, takes the tokens
// from the trigger on. An end-of-generation token is taken where the
// grammar may end (where it may not, the pin aborts: an *AcceptError
// here).
func (g *Grammar) Accept(t vocab.Token) error {
	if g.v == nil {
		return errors.New("grammar: Accept needs a vocabulary")
	}
	if t < 0 || int(t) >= g.idx.n {
		return fmt.Errorf("grammar: token %d out of range [0, %d)", t, g.idx.n)
	}
	piece := g.idx.piece(t)
	if g.awaiting {
		for _, tt := range g.triggerTokens {
			if tt == t {
				g.awaiting = false
				g.triggerBuf = g.triggerBuf[:0]
				return g.AcceptPiece(t, piece)
			}
		}
		g.triggerPos = append(g.triggerPos, tokenSpan{t, len(g.triggerBuf), len(g.triggerBuf) + len(piece)})
		g.triggerBuf = append(g.triggerBuf, piece...)
		for _, tp := range g.triggers {
			start, ok, err := tp.find(g.triggerBuf)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			g.awaiting = false
			// replay the tokens that overlap [start, end)
			buf, spans := string(g.triggerBuf), g.triggerPos
			g.triggerBuf, g.triggerPos = g.triggerBuf[:0], g.triggerPos[:0]
			for _, sp := range spans {
				if sp.end <= start {
					continue
				}
				if err := g.AcceptPiece(sp.tok, buf[max(sp.start, start):sp.end]); err != nil {
					return err
				}
			}
			return nil
		}
		return nil
	}
	if g.v.IsEOG(t) {
		for _, s := range g.stacks {
			if s == 0 {
				return nil
			}
		}
		return &AcceptError{t, piece, fmt.Sprintf("end-of-generation token %d where the grammar cannot end (llama.cpp aborts)", t)}
	}
	return g.AcceptPiece(t, piece)
}

// compact rebuilds the arena from the live stacks once it has grown past
// arenaCompact nodes, dropping what it learnt of stacks gone.
func (g *Grammar) compact() {
	if len(g.ar.nodes) < arenaCompact {
		return
	}
	old := g.ar
	g.ar = newArena(g.prog)
	for i, s := range g.stacks {
		g.stacks[i] = g.ar.stackOf(old.elements(s))
	}
	for i, s := range g.initial {
		g.initial[i] = g.ar.stackOf(old.elements(s))
	}
	g.masks = newMaskCache()
}

// Stacks are the stacks, each its elements bottom first (for a look at
// where generation stands, as llama_grammar_get_stacks gives them).
func (g *Grammar) Stacks() [][]Element {
	out := make([][]Element, len(g.stacks))
	for i, s := range g.stacks {
		for _, pos := range g.ar.elements(s) {
			out[i] = append(out[i], g.prog.elems[pos])
		}
	}
	return out
}

// CanEnd says whether the grammar may end where it stands (one of its
// stacks is empty): where an end-of-generation token is allowed.
func (g *Grammar) CanEnd() bool {
	for _, s := range g.stacks {
		if s == 0 {
			return true
		}
	}
	return false
}

// String prints the stacks, one a line.
func (g *Grammar) String() string {
	var b strings.Builder
	for _, st := range g.Stacks() {
		for i, e := range st {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s(%d)", e.Type, e.Value)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
