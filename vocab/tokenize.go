// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llama_tokenize,
// llama_token_to_piece and llama_detokenize.

package vocab

import (
	"math"
	"strings"
)

// fragment is a piece of the text being tokenized: a token found by the
// special-token partition, or a range of the text still to tokenize.
type fragment struct {
	tok    Token // the token, when !text
	off, n int
	isText bool
}

// session is the reusable state of one Tokenize call.
type session struct {
	frags, next []fragment
	buf         []byte
	syms        []symbol
	spmQ        []spmBigram
	bpeQ        []bpeBigram
	norm        []byte
	best        []ugmBest
	cpts        []uint32
	words       []int
	key         []byte
}

func (v *Vocab) getSession() *session {
	if s, ok := v.pool.Get().(*session); ok {
		return s
	}
	return &session{}
}

func (v *Vocab) putSession(s *session) {
	if cap(s.buf) > 1<<20 || cap(s.syms) > 1<<18 {
		return // let an unusually large session go
	}
	v.pool.Put(s)
}

// isSpace is isspace in the C locale.
func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// partition is tokenizer_st_partition: it cuts the text at every
// occurrence of a special token, longest tokens first, honouring the
// tokens' lstrip and rstrip attributes.
func (v *Vocab) partition(s *session, text string, parseSpecial bool) {
	s.frags = append(s.frags[:0], fragment{off: 0, n: len(text), isText: true})
	for _, id := range v.specials {
		a := v.attrs[id]
		if !parseSpecial && a&(AttrControl|AttrUnknown) != 0 {
			continue
		}
		tt := v.texts[id]
		if !strings.Contains(text, tt) {
			continue // (then no fragment holds it either)
		}
		out := s.next[:0]
		for _, f := range s.frags {
			if !f.isText {
				out = append(out, f)
				continue
			}
			base, n := f.off, f.n
			for {
				i := strings.Index(text[base:base+n], tt)
				if i < 0 {
					if n > 0 {
						out = append(out, fragment{off: base, n: n, isText: true})
					}
					break
				}
				match := base + i
				if match > base {
					ln := match - base
					if a&AttrLStrip != 0 {
						for ln > 0 && isSpace(text[base+ln-1]) {
							ln--
						}
					}
					if ln > 0 {
						out = append(out, fragment{off: base, n: ln, isText: true})
					}
				}
				out = append(out, fragment{tok: id})
				end := match + len(tt)
				if end >= base+n {
					break
				}
				ro, rn := end, base+n-end
				if a&AttrRStrip != 0 {
					for rn > 0 && isSpace(text[ro]) {
						ro++
						rn--
					}
				}
				base, n = ro, rn
			}
		}
		s.frags, s.next = out, s.frags
	}
}

// Tokenize is llama_tokenize: the tokens of text, with the model's BOS,
// EOS or SEP where addSpecial asks for them, and special tokens in the
// text recognized where parseSpecial is set (user-defined tokens always
// are). It fails where llama.cpp throws or asserts: a byte with no token
// in an SPM vocabulary, a missing BOS/EOS/SEP id the model asks for, a
// result longer than an int32 can count.
func (v *Vocab) Tokenize(text string, addSpecial, parseSpecial bool) ([]Token, error) {
	if v.typ == TypeNone {
		return nil, v.errorf("the model has no vocabulary (llama.cpp aborts)")
	}
	if len(text) > math.MaxInt32 {
		return nil, v.errorf("text of %d bytes is longer than llama_tokenize's int32 length", len(text))
	}
	s := v.getSession()
	defer v.putSession(s)
	s.frags = s.frags[:0]
	if text != "" {
		v.partition(s, text, parseSpecial)
	}
	out := make([]Token, 0, len(text)/3+4)
	var err error
	switch v.typ {
	case TypeSPM:
		prevSpecial := true
		if addSpecial && v.addBOS {
			if out, err = v.appendSpecial(out, v.bos, "BOS"); err != nil {
				return nil, err
			}
		}
		for _, f := range s.frags {
			if !f.isText {
				out = append(out, f.tok)
				prevSpecial = true
				continue
			}
			b := s.buf[:0]
			if v.addSpacePrefix && prevSpecial {
				b = append(b, "\u2581"...)
			}
			b = appendEscaped(b, text[f.off:f.off+f.n])
			s.buf = b
			if out, err = v.spm(s, b, out); err != nil {
				return nil, err
			}
			prevSpecial = false
		}
		if addSpecial && v.addEOS {
			if out, err = v.appendSpecial(out, v.eos, "EOS"); err != nil {
				return nil, err
			}
		}
	case TypeBPE:
		if addSpecial && v.addBOS {
			if out, err = v.appendSpecial(out, v.bos, "BOS"); err != nil {
				return nil, err
			}
		}
		for _, f := range s.frags {
			if !f.isText {
				out = append(out, f.tok)
				continue
			}
			t := text[f.off : f.off+f.n]
			if v.escapeWS {
				s.buf = appendEscaped(s.buf[:0], t)
				t = string(s.buf)
			}
			switch v.model {
			case "hybriddna":
				out, err = v.hybridDNA(s, t, out)
			case "whitespace":
				out, err = v.whitespace(s, t, out)
			default:
				out, err = v.bpe(s, t, out)
			}
			if err != nil {
				return nil, err
			}
		}
		if addSpecial && v.addEOS {
			if out, err = v.appendSpecial(out, v.eos, "EOS"); err != nil {
				return nil, err
			}
		}
	case TypeWPM:
		if addSpecial {
			if out, err = v.appendSpecial(out, v.bos, "BOS"); err != nil {
				return nil, err
			}
		}
		for _, f := range s.frags {
			if !f.isText {
				out = append(out, f.tok)
				continue
			}
			if out, err = v.wpm(s, text[f.off:f.off+f.n], out); err != nil {
				return nil, err
			}
		}
		if addSpecial {
			if out, err = v.appendSpecial(out, v.sep, "SEP"); err != nil {
				return nil, err
			}
		}
	case TypeUGM:
		if addSpecial && v.addBOS {
			if out, err = v.appendSpecial(out, v.bos, "BOS"); err != nil {
				return nil, err
			}
		}
		for _, f := range s.frags {
			if !f.isText {
				out = append(out, f.tok)
				continue
			}
			if out, err = v.ugmTokenize(s, text[f.off:f.off+f.n], out); err != nil {
				return nil, err
			}
		}
		if addSpecial && v.addEOS {
			if out, err = v.appendSpecial(out, v.eos, "EOS"); err != nil {
				return nil, err
			}
		}
	case TypeRWKV:
		for _, f := range s.frags {
			if !f.isText {
				out = append(out, f.tok)
				continue
			}
			if out, err = v.rwkvTokenize(text[f.off:f.off+f.n], out); err != nil {
				return nil, err
			}
		}
	case TypePLaMo2:
		for _, f := range s.frags {
			if !f.isText {
				out = append(out, f.tok)
				continue
			}
			out = v.plamo2.encode(s, text[f.off:f.off+f.n], out)
		}
	case TypeTest:
		nv := uint64(len(v.texts))
		for _, f := range s.frags {
			if !f.isText {
				out = append(out, f.tok)
				continue
			}
			for pos, end := f.off, f.off+f.n; pos < end; {
				k := min(5, end-pos)
				var h uint64
				for i := range k {
					h = h*31 + uint64(text[pos+i])
				}
				out = append(out, Token(h%nv))
				pos += k
			}
		}
	}
	if len(out) >= math.MaxInt32 {
		return nil, v.errorf("tokenization result size %d exceeds int32_t limit", len(out))
	}
	return out, nil
}

// appendEscaped appends text with every space turned into U+2581.
func appendEscaped(dst []byte, text string) []byte {
	for {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			return append(dst, text...)
		}
		dst = append(dst, text[:i]...)
		dst = append(dst, "\u2581"...)
		text = text[i+1:]
	}
}

// AppendPiece is llama_token_to_piece: it appends the text of token t to
// dst, after skipping up to lstrip leading spaces. Control and unknown
// tokens give nothing unless special is set.
func (v *Vocab) AppendPiece(dst []byte, t Token, lstrip int, special bool) ([]byte, error) {
	if v.typ == TypeNone {
		return dst, v.errorf("the model has no vocabulary (llama.cpp aborts)")
	}
	if t < 0 || int(t) >= len(v.texts) {
		return dst, v.errorf("token id %d out of range [0, %d)", t, len(v.texts))
	}
	if !special && v.attrs[t]&(AttrUnknown|AttrControl) != 0 {
		return dst, nil
	}
	p := v.piece(t)
	for i := 0; i < lstrip && len(p) > 0 && p[0] == ' '; i++ {
		p = p[1:]
	}
	return append(dst, p...), nil
}

// Detokenize is llama_detokenize: the text of the tokens, without the BOS
// and EOS the model adds where removeSpecial is set, with control tokens
// rendered where unparseSpecial is set, and with the model's clean-up of
// spaces.
func (v *Vocab) Detokenize(tokens []Token, removeSpecial, unparseSpecial bool) ([]byte, error) {
	if v.typ == TypeNone {
		return nil, nil
	}
	removeSpace := v.addSpacePrefix
	if removeSpecial && v.addBOS && len(tokens) > 0 && tokens[0] == v.bos {
		removeSpace = false
		tokens = tokens[1:]
	}
	if removeSpecial && v.addEOS && len(tokens) > 0 && tokens[len(tokens)-1] == v.eos {
		tokens = tokens[:len(tokens)-1]
	}
	n := 0
	for _, t := range tokens {
		if t >= 0 && int(t) < len(v.texts) {
			n += int(v.pieceOff[t+1] - v.pieceOff[t])
		}
	}
	text := make([]byte, 0, n)
	var err error
	for _, t := range tokens {
		ls := 0
		if removeSpace {
			ls = 1
		}
		if text, err = v.AppendPiece(text, t, ls, unparseSpecial); err != nil {
			return nil, err
		}
		removeSpace = false
	}
	if len(text) > math.MaxInt32 {
		return nil, v.errorf("detokenized text of %d bytes exceeds int32_t limit", len(text))
	}
	if v.cleanSpaces {
		text = cleanSpaces(text)
	}
	return text, nil
}

// cleanSpaces is detokenize's clean_up_tokenization_spaces, in place, pass
// for pass as the pin does it.
func cleanSpaces(text []byte) []byte {
	total := len(text)
	// " ?", " !", " .", " ,": drop the space
	t1 := total
	total = min(total, 1)
	for i := 1; i < t1; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	// " ' ": drop both spaces around a lone apostrophe
	t2 := total
	total = min(total, 1)
	for i := 1; i < t2; i++ {
		x := text[i]
		if x == '\'' && i+1 < t2 && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	// " 's", " 'm", " 're", " 've": drop the space
	t3 := total
	total = min(total, 1)
	for i := 1; i < t3; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < t3 {
			x1 := text[i+1]
			if x1 == 't' || x1 == 'd' {
			} else if x1 == 's' || x1 == 'm' {
				total--
			} else if i+2 < t3 {
				x2 := text[i+2]
				if (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e') {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}

// appendSpecial appends the special token tok (named what) that the
// vocabulary says to add, refusing where the vocabulary has none, where
// llama.cpp's tokenize asserts.
func (v *Vocab) appendSpecial(out []Token, tok Token, what string) ([]Token, error) {
	if tok == Null {
		return nil, v.errorf("the model adds %s but has no %s token", what, what)
	}
	return append(out, tok), nil
}
