// Port of llama.cpp src/llama-grammar.cpp (v0.5.0): the pushdown stacks
// (llama_grammar_advance_stack, llama_grammar_match_char and
// llama_grammar_match_partial_char), with stacks shared and numbered.

package grammar

import (
	"errors"
	"fmt"
	"sort"
)

// program is a grammar's rules, flat: a position is an index into elems,
// each rule ends with End. It is shared, never changed.
type program struct {
	elems []Element
	start []int32 // each rule's first position
	// class is, for each position where a character class starts, its
	// ranges (for matching many code points at once); nil elsewhere
	class []*charClass
}

// charClass is a character element with its alternatives: code point
// ranges, sorted and merged, and whether they are the matching ones.
type charClass struct {
	ranges   [][2]uint32
	positive bool
	after    int32 // the position after the class
}

func (c *charClass) matches(cp uint32) bool {
	i := sort.Search(len(c.ranges), func(i int) bool { return c.ranges[i][1] >= cp })
	in := i < len(c.ranges) && c.ranges[i][0] <= cp
	return in == c.positive
}

func newProgram(rules [][]Element) *program {
	p := &program{start: make([]int32, len(rules))}
	for i, r := range rules {
		p.start[i] = int32(len(p.elems))
		p.elems = append(p.elems, r...)
	}
	p.class = make([]*charClass, len(p.elems))
	for pos := range p.elems {
		switch p.elems[pos].Type {
		case Char, CharNot, CharAny:
			p.class[int32(pos)] = p.compileClass(int32(pos))
		}
	}
	return p
}

// compileClass walks a class as llama_grammar_match_char does.
func (p *program) compileClass(pos int32) *charClass {
	c := &charClass{positive: p.elems[pos].Type == Char || p.elems[pos].Type == CharAny}
	var rs [][2]uint32
	for {
		e := p.elems[pos]
		switch {
		case p.elems[pos+1].Type == CharRngUpper:
			if e.Value <= p.elems[pos+1].Value {
				rs = append(rs, [2]uint32{e.Value, p.elems[pos+1].Value})
			}
			pos += 2
		case e.Type == CharAny:
			rs = append(rs, [2]uint32{0, ^uint32(0)})
			pos++
		default:
			rs = append(rs, [2]uint32{e.Value, e.Value})
			pos++
		}
		if p.elems[pos].Type != CharAlt {
			break
		}
	}
	c.after = pos
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	for _, r := range rs {
		if n := len(c.ranges); n > 0 && uint64(r[0]) <= uint64(c.ranges[n-1][1])+1 {
			c.ranges[n-1][1] = max(c.ranges[n-1][1], r[1])
			continue
		}
		c.ranges = append(c.ranges, r)
	}
	return c
}

func (p *program) endOfSequence(pos int32) bool {
	t := p.elems[pos].Type
	return t == End || t == Alt
}

// matchPartial is llama_grammar_match_partial_char: whether some
// continuation of a partial UTF-8 sequence could match the class at pos.
func (p *program) matchPartial(pos int32, partial partialUTF8) bool {
	positive := p.elems[pos].Type == Char || p.elems[pos].Type == CharAny
	value, remain := partial.value, partial.remain
	// an invalid sequence, or a 7-bit char split across 2 bytes (overlong)
	if remain < 0 || remain == 1 && value < 2 {
		return false
	}
	low := value << (remain * 6)
	high := low | (1<<(remain*6) - 1)
	if low == 0 {
		switch remain {
		case 2:
			low = 1 << 11
		case 3:
			low = 1 << 16
		}
	}
	for {
		e := p.elems[pos]
		switch {
		case p.elems[pos+1].Type == CharRngUpper:
			if e.Value <= high && low <= p.elems[pos+1].Value {
				return positive
			}
			pos += 2
		case e.Type == CharAny:
			return true
		default:
			if low <= e.Value && e.Value <= high {
				return positive
			}
			pos++
		}
		if p.elems[pos].Type != CharAlt {
			return !positive
		}
	}
}

// matchToken is llama_grammar_match_token.
func (p *program) matchToken(pos int32, tok int32) bool {
	e := p.elems[pos]
	if e.Type == Token {
		return e.Value == uint32(tok)
	}
	return e.Value != uint32(tok)
}

func isCharType(t ElementType) bool { return t == Char || t == CharNot || t == CharAny }

func isTokenType(t ElementType) bool { return t == Token || t == TokenNot }

// partialUTF8 is llama_partial_utf8: the bits of an unfinished UTF-8
// sequence and the bytes it still needs (-1: an invalid sequence).
type partialUTF8 struct {
	value  uint32
	remain int32
}

// stack ids: a stack is a node of an arena, its top position and the
// stack below it; equal stacks are one node, so that a stack is an int32
// and two stacks are equal when their ids are. 0 is the empty stack.
type stackNode struct {
	pos, parent int32
}

// MaxStacks bounds the stacks a grammar may hold at once, where the pin
// has no bound: an ambiguous grammar can double its stacks with each
// character, until the memory is gone. Past it, Accept and the sampler
// fail with ErrTooManyStacks.
const MaxStacks = 8192

// arenaCompact is the arena's size past which Accept rebuilds it from
// the live stacks, so that a long generation holds a bounded arena (a
// variable for the tests).
var arenaCompact = 1 << 20

// ErrTooManyStacks is a grammar whose ambiguity makes more than
// MaxStacks stacks at once.
var ErrTooManyStacks = errors.New(fmt.Sprintf("grammar: more than %d stacks at once (an ambiguous grammar)", MaxStacks))

// arena holds a grammar's stacks and what it has learnt of them.
type arena struct {
	prog  *program
	nodes []stackNode
	index map[uint64]int32
	// advanced memoizes advance, by stack: the stacks a stack becomes,
	// in the pin's order (nil: not yet known)
	advanced [][]int32
	// afterChar memoizes, for a stack whose top is a character class,
	// the stacks after that character matched
	afterChar [][]int32
	// scratch for advance
	todo []int32
	seen map[int32]bool
}

func newArena(prog *program) *arena {
	return &arena{prog: prog, nodes: []stackNode{{-1, -1}}, index: map[uint64]int32{}, seen: map[int32]bool{}}
}

func (a *arena) push(parent, pos int32) int32 {
	key := uint64(uint32(pos))<<32 | uint64(uint32(parent))
	if id, ok := a.index[key]; ok {
		return id
	}
	id := int32(len(a.nodes))
	a.nodes = append(a.nodes, stackNode{pos, parent})
	a.index[key] = id
	return id
}

func (a *arena) top(s int32) int32 { return a.nodes[s].pos }

// elements is a stack's positions, bottom first.
func (a *arena) elements(s int32) []int32 {
	var out []int32
	for ; s != 0; s = a.nodes[s].parent {
		out = append(out, a.nodes[s].pos)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// stackOf interns a stack given bottom first.
func (a *arena) stackOf(positions []int32) int32 {
	s := int32(0)
	for _, pos := range positions {
		s = a.push(s, pos)
	}
	return s
}

// popPush is the stack without its top, with pos on it unless pos ends
// a sequence.
func (a *arena) popPush(s, pos int32) int32 {
	next := a.nodes[s].parent
	if !a.prog.endOfSequence(pos) {
		next = a.push(next, pos)
	}
	return next
}

// advance is llama_grammar_advance_stack: the stacks that s becomes, each
// ending at a terminal element (or empty), in the pin's order.
func (a *arena) advance(s int32) []int32 {
	if int(s) < len(a.advanced) && a.advanced[s] != nil {
		return a.advanced[s]
	}
	prog := a.prog
	var out []int32
	todo := append(a.todo[:0], s)
	clear(a.seen)
	for len(todo) > 0 {
		cur := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if a.seen[cur] {
			continue
		}
		a.seen[cur] = true
		if cur == 0 {
			out = appendStack(out, cur)
			continue
		}
		pos := a.nodes[cur].pos
		switch e := prog.elems[pos]; e.Type {
		case RuleRef:
			sub := prog.start[e.Value]
			for {
				// the stack without its top, the element after the
				// reference, the alternative
				next := a.popPush(cur, pos+1)
				if !prog.endOfSequence(sub) {
					next = a.push(next, sub)
				}
				todo = append(todo, next)
				for !prog.endOfSequence(sub) {
					sub++
				}
				if prog.elems[sub].Type != Alt {
					break
				}
				sub++
			}
		case Char, CharNot, CharAny, Token, TokenNot:
			out = appendStack(out, cur)
		default:
			// the pin aborts: a stack never stops at an end, an
			// alternative or the middle of a class
			panic(fmt.Sprintf("grammar: a stack at a %s element", e.Type))
		}
	}
	a.todo = todo
	for len(a.advanced) <= int(s) {
		a.advanced = append(a.advanced, nil)
	}
	a.advanced[s] = out
	return out
}

// appendStack appends s unless it is there (std::find, as the pin keeps
// its stacks).
func appendStack(list []int32, s int32) []int32 {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// charNext is, for a stack whose top is a character class, the stacks
// after a character of the class: advance of the stack with the class
// popped and the element after it pushed.
func (a *arena) charNext(s int32) []int32 {
	if int(s) < len(a.afterChar) && a.afterChar[s] != nil {
		return a.afterChar[s]
	}
	c := a.prog.class[a.nodes[s].pos]
	out := a.advance(a.popPush(s, c.after))
	for len(a.afterChar) <= int(s) {
		a.afterChar = append(a.afterChar, nil)
	}
	a.afterChar[s] = out
	return out
}

// stackSet gathers stacks without duplicates, in the order they come.
type stackSet struct {
	list  []int32
	index map[int32]struct{} // once the list is long
}

func (ss *stackSet) reset() {
	ss.list = ss.list[:0]
	if ss.index != nil {
		clear(ss.index)
	}
}

func (ss *stackSet) add(s int32) {
	if len(ss.list) < 32 {
		for _, x := range ss.list {
			if x == s {
				return
			}
		}
		ss.list = append(ss.list, s)
		if len(ss.list) == 32 {
			if ss.index == nil {
				ss.index = map[int32]struct{}{}
			}
			for _, x := range ss.list {
				ss.index[x] = struct{}{}
			}
		}
		return
	}
	if _, ok := ss.index[s]; ok {
		return
	}
	ss.index[s] = struct{}{}
	ss.list = append(ss.list, s)
}
