// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llm_tokenizer_ugm.

package vocab

import (
	"encoding/binary"
	"math"
)

// ugmTokenizer is llm_tokenizer_ugm: the normalizer's tables and the
// token tries.
type ugmTokenizer struct {
	xcda         []uint32 // the XOR-compressed compact double array
	replacements string   // NUL-terminated replacement strings
	userDefined  *trie
	tokens       *trie
	unknownScore float32
}

// newUGM builds the tables from the attributes of this point of the load.
func newUGM(v *Vocab, charsmap []byte) *ugmTokenizer {
	u := &ugmTokenizer{userDefined: newTrie(), tokens: newTrie()}
	if len(charsmap) > 0 {
		size := binary.LittleEndian.Uint32(charsmap)
		blob := charsmap[4 : 4+size]
		u.xcda = make([]uint32, size/4)
		for i := range u.xcda {
			u.xcda[i] = binary.LittleEndian.Uint32(blob[4*i:])
		}
		u.replacements = string(charsmap[4+size:])
	}
	minScore := float32(math.MaxFloat32)
	for id, a := range v.attrs {
		text := v.texts[id]
		if a&AttrNormal != 0 {
			minScore = min(minScore, v.scores[id])
		}
		if a&(AttrNormal|AttrUserDefined|AttrUnused) != 0 {
			u.tokens.insert([]byte(text), Token(id))
		}
		if a&AttrUserDefined != 0 {
			u.userDefined.insert([]byte(text), 0)
		}
	}
	u.unknownScore = minScore - 10
	return u
}

// ugmBest is best_tokenization: the best way found to reach an offset.
type ugmBest struct {
	id    Token
	from  int
	score float64
}

// ugmTokenize is llm_tokenizer_ugm_session::tokenize: normalize, then the
// Viterbi search over the token trie.
func (v *Vocab) ugmTokenize(s *session, text string, out []Token) ([]Token, error) {
	u := v.ugm
	norm, err := v.ugmNormalize(s.norm[:0], text)
	s.norm = norm
	if err != nil {
		return out, err
	}
	n := len(norm)
	if n == 0 {
		return out, nil
	}
	best := s.best[:0]
	for range n + 1 {
		best = append(best, ugmBest{id: v.unk, score: -math.MaxFloat64})
	}
	s.best = best
	best[0] = ugmBest{id: v.unk}
	for off := 0; off < n; {
		k := min(lenUTF8(norm[off]), n-off)
		single := false
		cur := best[off]
		node := u.tokens.child(0, norm[off])
		for p := off + 1; p <= n && node >= 0; p++ {
			if id := u.tokens.value[node]; id != Null {
				if p-off == k {
					single = true
				}
				score := float64(v.scores[id])
				if v.attrs[id]&AttrUserDefined != 0 {
					score = 0
				}
				if c := cur.score + score; c > best[p].score {
					best[p] = ugmBest{id: id, from: off, score: c}
				}
			}
			if p == n {
				break
			}
			node = u.tokens.child(node, norm[p])
		}
		if !single {
			c := cur.score + float64(u.unknownScore)
			if p := off + k; c > best[p].score {
				best[p] = ugmBest{id: v.unk, from: off, score: c}
			}
		}
		off += k
	}
	start := len(out)
	prevUnknown := false
	for t := best[n]; ; t = best[t.from] {
		unknown := t.id == v.unk
		if !(prevUnknown && unknown) {
			out = append(out, t.id)
		}
		if t.from == 0 {
			break
		}
		prevUnknown = unknown
	}
	for i, j := start, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// ugmNormalize is the session's normalize: the charsmap's replacements,
// then the whitespace rules (escape, prefix or suffix space, merging).
func (v *Vocab) ugmNormalize(dst []byte, in string) ([]byte, error) {
	space := " "
	if v.escapeWS {
		space = "\u2581"
	}
	prepend := !v.wsAsSuffix && v.addSpacePrefix
	appendSp := v.wsAsSuffix && v.addSpacePrefix
	merge := v.removeExtraWS
	prepended, nonWS := false, false
	for off := 0; off < len(in); {
		repl, consumed, err := v.ugmPrefix(in, off)
		if err != nil {
			return dst, err
		}
		for i := 0; i < len(repl); i++ {
			c := repl[i]
			if c != ' ' {
				if !nonWS {
					nonWS = true
					if (prepend && !prepended) || merge {
						dst = append(dst, space...)
						prepended = true
					}
				}
				dst = append(dst, c)
			} else {
				nonWS = false
				if !merge {
					dst = append(dst, space...)
				}
			}
		}
		off += consumed
	}
	if appendSp {
		dst = append(dst, space...)
	}
	return dst, nil
}

// ugmPrefix is normalize_prefix: the normalized form of the longest
// prefix of in[off:] the normalizer knows, and how many bytes it consumed.
func (v *Vocab) ugmPrefix(in string, off int) (string, int, error) {
	u := v.ugm
	if d := u.userDefined.depth(in[off:]); d > 0 {
		return in[off : off+d], d, nil
	}
	longest, replOff := 0, uint32(0)
	if len(u.xcda) > 0 {
		node := func(i uint32) (uint32, error) {
			if uint64(i) >= uint64(len(u.xcda)) {
				return 0, v.errorf("Index out of array bounds in XCDA array!")
			}
			return u.xcda[i], nil
		}
		base := func(p uint32) uint32 { return (p >> 10) << ((p & (1 << 9)) >> 6) }
		root, err := node(0)
		if err != nil {
			return "", 0, err
		}
		idx := base(root)
		for p := off; p < len(in); p++ {
			c := in[p]
			if c == 0 {
				break
			}
			idx ^= uint32(c)
			pk, err := node(idx)
			if err != nil {
				return "", 0, err
			}
			if pk&(1<<31|0xff) != uint32(c) {
				break
			}
			leaf := pk>>8&1 != 0
			idx ^= base(pk)
			if leaf {
				longest = p - off + 1
				pv, err := node(idx)
				if err != nil {
					return "", 0, err
				}
				replOff = pv & (1<<31 - 1)
			}
		}
	}
	if longest > 0 {
		if uint64(replOff) >= uint64(len(u.replacements)) {
			return "", 0, v.errorf("Index out of array bounds in precompiled charsmap!")
		}
		r := u.replacements[replOff:]
		k := 0
		for k < len(r) && r[k] != 0 {
			k++
		}
		if k == len(r) {
			return "", 0, v.errorf("Unterminated string in precompiled charsmap!")
		}
		return r[:k], longest, nil
	}
	if next, ok := validCpt(in, off); ok {
		return in[off:next], next - off, nil
	}
	return "\uFFFD", 1, nil
}
