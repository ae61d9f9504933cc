// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llm_tokenizer_wpm.

package vocab

import "github.com/ggload/ggload/vocab/internal/unicode"

// isChineseChar is llm_tokenizer_wpm_session::is_chinese_char.
func isChineseChar(c uint32) bool {
	return (c >= 0x04E00 && c <= 0x09FFF) ||
		(c >= 0x03400 && c <= 0x04DBF) ||
		(c >= 0x20000 && c <= 0x2A6DF) ||
		(c >= 0x2A700 && c <= 0x2B73F) ||
		(c >= 0x2B740 && c <= 0x2B81F) ||
		(c >= 0x2B920 && c <= 0x2CEAF) ||
		(c >= 0x0F900 && c <= 0x0FAFF) ||
		(c >= 0x2F800 && c <= 0x2FA1F)
}

// wpm is llm_tokenizer_wpm_session::tokenize: the BERT normalization and
// split, then the longest-match WordPiece per word.
func (v *Vocab) wpm(s *session, text string, out []Token) ([]Token, error) {
	cpts := s.cpts[:0]
	for off := 0; off < len(text); {
		var c uint32
		c, off = decodeCpt(text, off)
		cpts = append(cpts, c)
	}
	s.cpts = cpts
	if v.stripAccents {
		cpts = unicode.NFD(cpts)
	}
	// words are ranges of buf, boundaries in s.words (start offsets, then
	// the end)
	buf := append(s.buf[:0], "\u2581"...)
	bounds := s.words[:0]
	start := len(buf)
	finish := func() {
		if len(buf) > start {
			bounds = append(bounds, start, len(buf))
			buf = append(buf, "\u2581"...)
			start = len(buf)
		}
	}
	for _, c := range cpts {
		f := unicode.FlagsOf(c)
		if f.IsWhitespace() {
			finish()
			continue
		}
		if c == 0 || c == 0xFFFD || f.IsControl() {
			continue
		}
		if v.stripAccents && f.IsAccentMark() {
			continue
		}
		single := f.IsPunctuation() || (c < 0x7F && f.IsSymbol()) || isChineseChar(c)
		if v.lowercase {
			c = unicode.ToLower(c)
		}
		if single {
			finish()
		}
		var ok bool
		if buf, ok = appendCpt(buf, c); !ok {
			return out, v.errorf("code point %#x has no UTF-8 encoding (llama.cpp throws invalid codepoint)", c)
		}
		if single {
			finish()
		}
	}
	finish()
	s.buf, s.words = buf, bounds
	str := string(buf)
	for w := 0; w < len(bounds); w += 2 {
		word := str[bounds[w]-3 : bounds[w+1]] // with its phantom space
		n := len(word)
		cur := len(out)
		for i := 0; i < n; i++ {
			match := false
			for j := min(n, i+v.maxTokenLen+1); j > i; j-- {
				if id, ok := v.toID[word[i:j]]; ok {
					out = append(out, id)
					match = true
					i = j - 1
					break
				}
			}
			if !match {
				out = out[:cur]
				break
			}
		}
		if len(out) == cur {
			out = append(out, v.unk)
		}
	}
	return out, nil
}
