// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llm_tokenizer_bpe.

package vocab

import (
	"strings"

	"github.com/ggload/ggload/vocab/internal/unicode"
)

// bpeBigram is llm_bigram_bpe: a candidate merge and its rank.
type bpeBigram struct {
	left, right int32
	rank        int32
	size        int32
}

// bpeAbove orders the BPE queue: the lowest rank first, then the leftmost.
func bpeAbove(a, b bpeBigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

// bpe is llm_tokenizer_bpe_session::tokenize.
func (v *Vocab) bpe(s *session, text string, out []Token) ([]Token, error) {
	words, err := unicode.RegexSplit(text, v.regex, v.byteEncode)
	if err != nil {
		return out, v.errorf("pre-tokenizer %s: %v", v.preType, err)
	}
	for _, w := range words {
		if out, err = v.bpeWord(s, w, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// bpeWord merges one word and appends its tokens.
func (v *Vocab) bpeWord(s *session, word string, out []Token) ([]Token, error) {
	s.syms = s.syms[:0]
	whole := false
	if v.ignoreMerges {
		_, whole = v.toID[word]
	}
	if !whole && v.preType == "GEMMA4" && strings.Trim(word, "\n") == "" {
		_, whole = v.toID[word]
	}
	if whole {
		s.syms = append(s.syms, symbol{prev: -1, next: -1, off: 0, n: int32(len(word))})
	} else {
		s.splitChars(word, 0)
	}
	syms := s.syms
	q := s.bpeQ[:0]
	spaced := !v.byteEncode && strings.IndexByte(word, ' ') >= 0
	var bad bool
	key := s.key[:0]
	add := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		left := word[syms[l].off : syms[l].off+syms[l].n]
		right := word[syms[r].off : syms[r].off+syms[r].n]
		if spaced && (strings.IndexByte(left, ' ') >= 0 || strings.IndexByte(right, ' ') >= 0) {
			bad = true
			return
		}
		key = append(append(append(key[:0], left...), ' '), right...)
		rank, ok := v.ranks[string(key)]
		if !ok {
			return
		}
		q = heapPush(q, bpeBigram{left: l, right: r, rank: rank, size: int32(len(left) + len(right))}, bpeAbove)
	}
	for i := 1; i < len(syms); i++ {
		add(int32(i-1), int32(i))
	}
	for len(q) > 0 && !bad {
		var bg bpeBigram
		q, bg = heapPop(q, bpeAbove)
		ls, rs := &syms[bg.left], &syms[bg.right]
		if ls.n == 0 || rs.n == 0 || ls.n+rs.n != bg.size {
			continue
		}
		ls.n += rs.n
		rs.n = 0
		ls.next = rs.next
		if rs.next >= 0 {
			syms[rs.next].prev = bg.left
		}
		add(ls.prev, bg.left)
		add(bg.left, ls.next)
	}
	s.bpeQ, s.key = q, key
	if bad {
		return out, v.errorf("a BPE symbol of %q holds a space (llama.cpp's find_bpe_rank asserts)", word)
	}
	for _, sym := range syms {
		if sym.n == 0 {
			continue
		}
		piece := word[sym.off : sym.off+sym.n]
		if id, ok := v.toID[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			var id Token
			if v.byteEncode {
				id = v.byteTok[piece[j]]
			} else {
				id = v.hexTok[piece[j]]
			}
			if id != Null {
				out = append(out, id)
			}
		}
	}
	return out, nil
}

// hybridDNA is llm_tokenizer_hybriddna_session::tokenize: BPE outside
// <dna>...</dna>, fixed 6-mers inside.
func (v *Vocab) hybridDNA(s *session, text string, out []Token) ([]Token, error) {
	const openTag, closeTag, k = "<dna>", "</dna>", 6
	begin, ok1 := v.toID[openTag]
	end, ok2 := v.toID[closeTag]
	oov, ok3 := v.toID["<oov>"]
	if !ok1 || !ok2 || !ok3 {
		return v.bpe(s, text, out)
	}
	var err error
	for pos := 0; pos < len(text); {
		i := strings.Index(text[pos:], openTag)
		if i < 0 {
			return v.bpe(s, text[pos:], out)
		}
		start := pos + i
		if start > pos {
			if out, err = v.bpe(s, text[pos:start], out); err != nil {
				return out, err
			}
		}
		out = append(out, begin)
		cs := start + len(openTag)
		j := strings.Index(text[cs:], closeTag)
		ce := len(text)
		if j >= 0 {
			ce = cs + j
		}
		seq := []byte(text[cs:ce])
		for x, c := range seq {
			if c >= 'a' && c <= 'z' {
				seq[x] = c - 32
			}
		}
		kmer := func(b []byte) Token {
			if id, ok := v.toID[string(b)+dnaMarker]; ok {
				return id
			}
			return oov
		}
		x := 0
		for ; x+k <= len(seq); x += k {
			out = append(out, kmer(seq[x:x+k]))
		}
		if x < len(seq) {
			last := append([]byte(nil), seq[x:]...)
			for len(last) < k {
				last = append(last, 'A')
			}
			out = append(out, kmer(last))
		}
		if j < 0 {
			break
		}
		out = append(out, end)
		pos = ce + len(closeTag)
	}
	return out, nil
}

// whitespace is llm_tokenizer_whitespace_session::tokenize: BPE on each
// run of non-whitespace, optionally lower-cased.
func (v *Vocab) whitespace(s *session, text string, out []Token) ([]Token, error) {
	var seg []byte
	var err error
	flush := func() {
		if len(seg) > 0 && err == nil {
			out, err = v.bpe(s, string(seg), out)
			seg = seg[:0]
		}
	}
	for off := 0; off < len(text); {
		cpt, next := decodeCpt(text, off)
		off = next
		if unicode.FlagsOf(cpt).IsWhitespace() {
			flush()
			continue
		}
		if v.lowercase {
			cpt = unicode.ToLower(cpt)
		}
		var ok bool
		if seg, ok = appendCpt(seg, cpt); !ok {
			return out, v.errorf("code point %#x has no UTF-8 encoding (llama.cpp throws invalid codepoint)", cpt)
		}
	}
	flush()
	return out, err
}
