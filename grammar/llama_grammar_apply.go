// The tokens a grammar allows: llama_grammar_apply_impl of llama.cpp
// src/llama-grammar.cpp (v0.5.0), over a trie of the vocabulary.

package grammar

import (
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/ggload/ggload/vocab"
)

// The pin walks every candidate token through the grammar's stacks, one
// code point after another. Here the vocabulary's tokens are one trie of
// their code points (decoded as the pin decodes them), shared by every
// grammar over the vocabulary: a prefix that many tokens share is matched
// once for all of them, a class of characters is matched against a
// node's children as ranges, and the stacks a stack becomes after a
// character are worked out once per stack (the stacks are numbered and
// shared). What the walk allows is the set the pin allows: the tests hold
// the two to each other and to libllama.

// token classes
const (
	tokNormal  uint8 = iota
	tokEOG           // allowed where the grammar may end
	tokReject        // an empty text, or one that starts with a NUL byte
	tokInvalid       // a text that does not decode (rejected from a fresh start)
)

// vocabIndex is what the grammars over one vocabulary share: each token's
// text and class, and the trie.
type vocabIndex struct {
	n        int
	pieceBuf []byte
	pieceOff []uint32
	class    []uint8
	eog      []int32

	nodes    []trieNode
	edges    []trieEdge
	byRank   []int32       // the trie's tokens in its order
	rank     []int32       // each token's place in byRank, -1 where none
	partials []partialUTF8 // by rank: the unfinished sequence a token ends with
}

// trieNode is the tokens whose code points start with a node's path: its
// own complete tokens are byRank[lo:mid], its own that end unfinished
// [mid:own], the longer ones [own:hi].
type trieNode struct {
	lo, mid, own, hi int32
	edgeLo, edgeHi   int32
}

type trieEdge struct {
	cp   uint32
	node int32
}

var (
	indexMu sync.Mutex
	indexes = map[weak.Pointer[vocab.Vocab]]*vocabIndex{}
)

// indexOf is the index of v, built once and kept while v lives.
func indexOf(v *vocab.Vocab) *vocabIndex {
	key := weak.Make(v)
	indexMu.Lock()
	defer indexMu.Unlock()
	if ix, ok := indexes[key]; ok {
		return ix
	}
	ix := buildIndex(v)
	indexes[key] = ix
	runtime.AddCleanup(v, func(k weak.Pointer[vocab.Vocab]) {
		indexMu.Lock()
		delete(indexes, k)
		indexMu.Unlock()
	}, key)
	return ix
}

func (ix *vocabIndex) piece(t vocab.Token) string {
	return string(ix.pieceBuf[ix.pieceOff[t]:ix.pieceOff[t+1]])
}

func buildIndex(v *vocab.Vocab) *vocabIndex {
	n := v.NTokens()
	ix := &vocabIndex{n: n, pieceOff: make([]uint32, n+1), class: make([]uint8, n), rank: make([]int32, n)}
	type entry struct {
		id      int32
		cps     []uint32
		partial partialUTF8
	}
	var entries []entry
	var cpBuf []uint32
	for t := range n {
		ix.rank[t] = -1
		var err error
		ix.pieceBuf, err = v.AppendPiece(ix.pieceBuf, vocab.Token(t), 0, true)
		if err != nil {
			ix.class[t] = tokReject
		}
		ix.pieceOff[t+1] = uint32(len(ix.pieceBuf))
		p := ix.pieceBuf[ix.pieceOff[t]:]
		switch {
		case v.IsEOG(vocab.Token(t)):
			ix.class[t] = tokEOG
			ix.eog = append(ix.eog, int32(t))
			continue
		case len(p) == 0 || p[0] == 0:
			ix.class[t] = tokReject
			continue
		}
		cps, partial := decodeUTF8(string(p), partialUTF8{}, nil)
		if partial.remain < 0 {
			ix.class[t] = tokInvalid
			continue
		}
		start := len(cpBuf)
		cpBuf = append(cpBuf, cps...)
		entries = append(entries, entry{int32(t), cpBuf[start:len(cpBuf):len(cpBuf)], partial})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := slices.Compare(a.cps, b.cps); c != 0 {
			return c
		}
		ca, cb := a.partial.remain == 0, b.partial.remain == 0
		if ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return int(a.id - b.id)
	})
	ix.byRank = make([]int32, len(entries))
	ix.partials = make([]partialUTF8, len(entries))
	// the trie, depth first: path holds the nodes from the root to the
	// last token's node
	children := [][]trieEdge{nil}
	ix.nodes = []trieNode{{}}
	path := []int32{0}
	var prev []uint32
	for r, e := range entries {
		ix.byRank[r] = e.id
		ix.rank[e.id] = int32(r)
		ix.partials[r] = e.partial
		common := 0
		for common < len(prev) && common < len(e.cps) && prev[common] == e.cps[common] {
			common++
		}
		for len(path) > common+1 {
			ix.nodes[path[len(path)-1]].hi = int32(r)
			path = path[:len(path)-1]
		}
		for _, cp := range e.cps[common:] {
			parent := path[len(path)-1]
			id := int32(len(ix.nodes))
			ix.nodes = append(ix.nodes, trieNode{lo: int32(r), mid: int32(r), own: int32(r)})
			children = append(children, nil)
			children[parent] = append(children[parent], trieEdge{cp, id})
			path = append(path, id)
		}
		nd := &ix.nodes[path[len(path)-1]]
		if e.partial.remain == 0 {
			nd.mid = int32(r) + 1
		}
		nd.own = int32(r) + 1
		prev = e.cps
	}
	for _, id := range path {
		ix.nodes[id].hi = int32(len(entries))
	}
	for id, ch := range children {
		ix.nodes[id].edgeLo = int32(len(ix.edges))
		ix.edges = append(ix.edges, ch...)
		ix.nodes[id].edgeHi = int32(len(ix.edges))
	}
	return ix
}

// Mask is the tokens a grammar allows where it stands: what
// llama_grammar_apply_impl leaves of the vocabulary (the rest it sets to
// -inf).
type Mask struct {
	all  bool // a lazy grammar awaiting its trigger constrains nothing
	bits []uint64
}

// Allows says whether the mask allows token t.
func (m *Mask) Allows(t vocab.Token) bool {
	if m.all {
		return true
	}
	return uint(t) < uint(len(m.bits))*64 && m.bits[t>>6]&(1<<(uint(t)&63)) != 0
}

// Count is the number of tokens the mask allows, of n.
func (m *Mask) Count(n int) int {
	if m.all {
		return n
	}
	c := 0
	for _, w := range m.bits {
		c += bits.OnesCount64(w)
	}
	return c
}

func (m *Mask) set(t int32) { m.bits[t>>6] |= 1 << (uint(t) & 63) }

// maskCache keeps the masks of the last states a grammar stood in: a
// generation comes back to the same states (inside a string, after a
// comma), and a state's mask is the same each time.
type maskCache struct {
	entries []maskEntry
	tick    uint64
}

type maskEntry struct {
	key  []int32 // the stacks, sorted, then the partial sequence
	mask *Mask
	used uint64
}

const maskCacheSize = 16

func newMaskCache() *maskCache { return &maskCache{} }

// stateKey is the grammar's state as a cache key.
func (g *Grammar) stateKey(dst []int32) []int32 {
	dst = append(dst[:0], g.stacks...)
	slices.Sort(dst)
	return append(dst, int32(g.partial.value), g.partial.remain)
}

func (c *maskCache) get(key []int32) *Mask {
	for i := range c.entries {
		if slices.Equal(c.entries[i].key, key) {
			c.tick++
			c.entries[i].used = c.tick
			return c.entries[i].mask
		}
	}
	return nil
}

// slot returns a mask to fill for key: a new one, or the least recently
// used one's.
func (c *maskCache) slot(key []int32, n int) *Mask {
	c.tick++
	if len(c.entries) < maskCacheSize {
		m := &Mask{bits: make([]uint64, (n+63)/64)}
		c.entries = append(c.entries, maskEntry{slices.Clone(key), m, c.tick})
		return m
	}
	old := 0
	for i := range c.entries {
		if c.entries[i].used < c.entries[old].used {
			old = i
		}
	}
	e := &c.entries[old]
	e.key = append(e.key[:0], key...)
	e.used = c.tick
	clear(e.mask.bits)
	return e.mask
}

var allMask = &Mask{all: true}

// Mask is llama_grammar_apply_impl over the whole vocabulary: the tokens
// the grammar allows where it stands. An end-of-generation token is
// allowed where the grammar may end; a token whose text is empty or
// starts with a NUL byte, never. The mask is the grammar's until its next
// Accept or Reset.
func (g *Grammar) Mask() *Mask {
	if g.awaiting {
		return allMask
	}
	if g.idx == nil {
		return &Mask{}
	}
	var kb [16]int32
	key := g.stateKey(kb[:0])
	if m := g.masks.get(key); m != nil {
		return m
	}
	m := g.masks.slot(key, g.idx.n)
	g.fillMask(m)
	return m
}

// fillMask marks in m (cleared) the tokens the grammar allows.
func (g *Grammar) fillMask(m *Mask) {
	if g.CanEnd() {
		for _, t := range g.idx.eog {
			m.set(t)
		}
	}
	if g.partial.remain > 0 {
		// an unfinished character: each token decoded after it, as the
		// pin decodes it
		var cps []uint32
		for t := range g.idx.n {
			if g.idx.class[t] == tokEOG || g.idx.class[t] == tokReject {
				continue
			}
			var partial partialUTF8
			cps, partial = decodeUTF8(g.idx.piece(vocab.Token(t)), g.partial, cps)
			if g.walk(vocab.Token(t), cps, partial) {
				m.set(int32(t))
			}
		}
		return
	}
	w := trieWalk{g: g, ix: g.idx, m: m}
	w.node(0, g.stacks, 0)
}

// Allows is llama_grammar_apply_impl of the one token t: whether the
// grammar allows it where it stands (common_sampler_sample's check of
// the token the chain chose).
func (g *Grammar) Allows(t vocab.Token) bool {
	if g.awaiting {
		return true
	}
	if g.idx == nil || t < 0 || int(t) >= g.idx.n {
		return false
	}
	var kb [16]int32
	if m := g.masks.get(g.stateKey(kb[:0])); m != nil {
		return m.Allows(t)
	}
	switch g.idx.class[t] {
	case tokEOG:
		return g.CanEnd()
	case tokReject:
		return false
	}
	var buf [32]uint32
	cps, partial := decodeUTF8(g.idx.piece(t), g.partial, buf[:0])
	return g.walk(t, cps, partial)
}

// walk is llama_grammar_reject_candidates for one token: whether some
// stack takes its code points, then its unfinished sequence.
func (g *Grammar) walk(t vocab.Token, cps []uint32, partial partialUTF8) bool {
	var a, b stackSet
	cur, next := &a, &b
	for _, s := range g.stacks {
		cur.add(s)
	}
	prog := g.prog
	for i := 0; ; i++ {
		end := i == len(cps)
		next.reset()
		for _, s := range cur.list {
			if s == 0 {
				if end && partial.remain == 0 {
					return true
				}
				continue
			}
			pos := g.ar.top(s)
			if isTokenType(prog.elems[pos].Type) {
				if end && partial.remain == 0 || !end && prog.matchToken(pos, t) {
					return true
				}
				continue
			}
			if end {
				if partial.remain == 0 || prog.matchPartial(pos, partial) {
					return true
				}
				continue
			}
			if prog.class[pos].matches(cps[i]) {
				for _, x := range g.ar.charNext(s) {
					next.add(x)
				}
			}
		}
		if end || len(next.list) == 0 {
			return false
		}
		cur, next = next, cur
	}
}

// trieWalk marks the tokens the grammar allows, node by node of the trie.
type trieWalk struct {
	g  *Grammar
	ix *vocabIndex
	m  *Mask
	// per depth: the (child, stack) matches of a node
	matches [][]childMatch
	merge   [][]int32
	stamp   []uint32
	epoch   uint32
}

type childMatch struct {
	edge  int32 // index into ix.edges
	stack int32
}

func (w *trieWalk) markRanks(lo, hi int32) {
	for r := lo; r < hi; r++ {
		w.m.set(w.ix.byRank[r])
	}
}

// node marks the tokens of node n that the stacks allow: every own
// complete token (a stack reached the node), the own unfinished ones a
// class's partial match allows, the longer ones a token element names,
// and, through the children whose code point a class matches, the rest.
func (w *trieWalk) node(n int32, stacks []int32, depth int) {
	ix, prog, ar := w.ix, w.g.prog, w.g.ar
	nd := ix.nodes[n]
	if n != 0 && len(stacks) > 0 {
		w.markRanks(nd.lo, nd.mid)
	}
	for len(w.matches) <= depth {
		w.matches = append(w.matches, nil)
		w.merge = append(w.merge, nil)
	}
	matches := w.matches[depth][:0]
	edges := ix.edges[nd.edgeLo:nd.edgeHi]
	nStacks := 0
	for _, s := range stacks {
		if s == 0 {
			continue
		}
		pos := ar.top(s)
		e := prog.elems[pos]
		switch e.Type {
		case Token:
			if e.Value < uint32(ix.n) {
				if r := ix.rank[e.Value]; r >= nd.own && r < nd.hi {
					w.m.set(int32(e.Value))
				}
			}
			continue
		case TokenNot:
			for r := nd.own; r < nd.hi; r++ {
				if t := ix.byRank[r]; uint32(t) != e.Value {
					w.m.set(t)
				}
			}
			continue
		}
		for r := nd.mid; r < nd.own; r++ {
			if prog.matchPartial(pos, ix.partials[r]) {
				w.m.set(ix.byRank[r])
			}
		}
		if len(edges) == 0 {
			continue
		}
		before := len(matches)
		matches = appendMatches(matches, prog.class[pos], edges, nd.edgeLo, s)
		if len(matches) > before {
			nStacks++
		}
	}
	w.matches[depth] = matches
	if len(matches) == 0 {
		return
	}
	if nStacks == 1 {
		next := ar.charNext(matches[0].stack)
		for _, cm := range matches {
			w.node(ix.edges[cm.edge].node, next, depth+1)
		}
		return
	}
	// several stacks: each child with the union of what they become
	slices.SortStableFunc(matches, func(a, b childMatch) int { return int(a.edge - b.edge) })
	for i := 0; i < len(matches); {
		j := i
		w.epoch++
		if len(w.stamp) < len(ar.nodes) {
			w.stamp = append(w.stamp, make([]uint32, len(ar.nodes)-len(w.stamp)+1024)...)
		}
		merged := w.merge[depth][:0]
		for ; j < len(matches) && matches[j].edge == matches[i].edge; j++ {
			for _, x := range ar.charNext(matches[j].stack) {
				if int(x) >= len(w.stamp) {
					w.stamp = append(w.stamp, make([]uint32, int(x)-len(w.stamp)+1024)...)
				}
				if w.stamp[x] != w.epoch {
					w.stamp[x] = w.epoch
					merged = append(merged, x)
				}
			}
		}
		w.merge[depth] = merged
		w.node(ix.edges[matches[i].edge].node, merged, depth+1)
		// the recursion may have reused deeper scratch, never this depth's
		matches = w.matches[depth]
		i = j
	}
}

// appendMatches adds the edges whose code point the class matches.
func appendMatches(out []childMatch, c *charClass, edges []trieEdge, base int32, s int32) []childMatch {
	if !c.positive {
		ri := 0
		for i, e := range edges {
			for ri < len(c.ranges) && c.ranges[ri][1] < e.cp {
				ri++
			}
			if ri < len(c.ranges) && c.ranges[ri][0] <= e.cp {
				continue
			}
			out = append(out, childMatch{base + int32(i), s})
		}
		return out
	}
	for _, r := range c.ranges {
		i, _ := slices.BinarySearchFunc(edges, r[0], func(e trieEdge, cp uint32) int {
			switch {
			case e.cp < cp:
				return -1
			case e.cp > cp:
				return 1
			}
			return 0
		})
		for ; i < len(edges) && edges[i].cp <= r[1]; i++ {
			out = append(out, childMatch{base + int32(i), s})
		}
	}
	return out
}
