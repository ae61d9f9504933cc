// Port of llama.cpp common/trie.h, common/trie.cpp and
// common_parse_utf8_codepoint of common/unicode.cpp (v0.5.0).

package peg

import "sort"

// utf8Status is utf8_parse_result::status.
type utf8Status int

const (
	utf8OK utf8Status = iota
	utf8Incomplete
	utf8Invalid
)

// parseUTF8 is common_parse_utf8_codepoint: the code point at off, how
// many bytes it takes (or, for a bad or short sequence, how many bytes of
// it were valid) and whether it was whole.
func parseUTF8(s string, off int) (cp rune, n int, st utf8Status) {
	if off >= len(s) {
		return 0, 0, utf8Incomplete
	}
	c := s[off]
	if c&0x80 == 0 {
		return rune(c), 1, utf8OK
	}
	if c&0x40 == 0 {
		return 0, 1, utf8Invalid
	}
	var size int
	var r rune
	switch {
	case c&0x20 == 0:
		size, r = 2, rune(c&0x1f)
	case c&0x10 == 0:
		size, r = 3, rune(c&0x0f)
	case c&0x08 == 0:
		size, r = 4, rune(c&0x07)
	default:
		return 0, 1, utf8Invalid
	}
	for i := 1; i < size; i++ {
		if off+i >= len(s) {
			return 0, i, utf8Incomplete
		}
		if s[off+i]&0xc0 != 0x80 {
			return 0, i, utf8Invalid
		}
		r = r<<6 | rune(s[off+i]&0x3f)
	}
	return r, size, utf8OK
}

// trie is common_trie: literals by code point, for until's delimiters and
// for the Aho-Corasick grammars.
type trie struct {
	nodes     []trieNode
	nPatterns int32
}

type trieNode struct {
	children map[rune]int
	pattern  int32 // the pattern ending here, -1 if none
}

type matchResult int

const (
	noMatch matchResult = iota
	partialMatch
	completeMatch
)

func newTrie(words []string) *trie {
	t := &trie{}
	t.newNode()
	for _, w := range words {
		t.insertString(w)
	}
	return t
}

func (t *trie) newNode() int {
	t.nodes = append(t.nodes, trieNode{pattern: -1})
	return len(t.nodes) - 1
}

// checkAt is check_at: whether a delimiter starts at pos, or one could
// once more input comes.
func (t *trie) checkAt(s string, pos int) matchResult {
	cur := 0
	for pos < len(s) {
		cp, n, st := parseUTF8(s, pos)
		if st != utf8OK {
			break
		}
		next, ok := t.nodes[cur].children[cp]
		if !ok {
			return noMatch
		}
		cur = next
		pos += n
		if t.nodes[cur].pattern >= 0 {
			return completeMatch
		}
	}
	if cur != 0 {
		return partialMatch
	}
	return noMatch
}

// insertString inserts a word's code points (up to its first bad byte).
func (t *trie) insertString(w string) int32 {
	var syms []rune
	for pos := 0; pos < len(w); {
		cp, n, st := parseUTF8(w, pos)
		if st != utf8OK {
			break
		}
		syms = append(syms, cp)
		pos += n
	}
	return t.insert(syms)
}

func (t *trie) insert(syms []rune) int32 {
	cur := 0
	for _, ch := range syms {
		next, ok := t.nodes[cur].children[ch]
		if !ok {
			next = t.newNode()
			if t.nodes[cur].children == nil {
				t.nodes[cur].children = map[rune]int{}
			}
			t.nodes[cur].children[ch] = next
		}
		cur = next
	}
	if t.nodes[cur].pattern < 0 {
		t.nodes[cur].pattern = t.nPatterns
		t.nPatterns++
	}
	return t.nodes[cur].pattern
}

// sortedChildren is a node's transitions in code point order (std::map's).
func (t *trie) sortedChildren(u int) []rune {
	keys := make([]rune, 0, len(t.nodes[u].children))
	for k := range t.nodes[u].children {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// ahoCorasick is common_aho_corasick.
type ahoCorasick struct {
	t        *trie
	fail     []int
	order    []int
	match    []int32
	alphabet []rune // sorted
}

func newAhoCorasick(words []string) *ahoCorasick {
	t := newTrie(words)
	n := len(t.nodes)
	a := &ahoCorasick{t: t, fail: make([]int, n), match: make([]int32, n)}
	queue := []int{0}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		a.order = append(a.order, u)
		for _, ch := range t.sortedChildren(u) {
			v := t.nodes[u].children[ch]
			if u != 0 {
				f := a.fail[u]
				for f != 0 {
					if _, ok := t.nodes[f].children[ch]; ok {
						break
					}
					f = a.fail[f]
				}
				if w, ok := t.nodes[f].children[ch]; ok && w != v {
					a.fail[v] = w
				} else {
					a.fail[v] = 0
				}
			}
			queue = append(queue, v)
		}
	}
	for _, u := range a.order {
		switch {
		case t.nodes[u].pattern >= 0:
			a.match[u] = t.nodes[u].pattern
		case u != 0:
			a.match[u] = a.match[a.fail[u]]
		default:
			a.match[u] = -1
		}
	}
	seen := map[rune]bool{}
	for _, nd := range t.nodes {
		for ch := range nd.children {
			if !seen[ch] {
				seen[ch] = true
				a.alphabet = append(a.alphabet, ch)
			}
		}
	}
	sort.Slice(a.alphabet, func(i, j int) bool { return a.alphabet[i] < a.alphabet[j] })
	return a
}

func (a *ahoCorasick) numStates() int        { return len(a.t.nodes) }
func (a *ahoCorasick) isTerminal(s int) bool { return a.match[s] >= 0 }

// next follows failure links until a transition on ch exists.
func (a *ahoCorasick) next(state int, ch rune) int {
	nodes := a.t.nodes
	for state != 0 {
		if _, ok := nodes[state].children[ch]; ok {
			break
		}
		state = a.fail[state]
	}
	if v, ok := nodes[state].children[ch]; ok {
		return v
	}
	return 0
}
