// Port of llama.cpp src/unicode.cpp (v0.5.0): the hand-written splitters
// of the common pre-tokenizer patterns (unicode_regex_split_custom).

package unicode

// The hand-written splitters of unicode.cpp (unicode_regex_split_custom_*),
// each equal to its pattern as the C++ implements it. They see one piece
// [lo, hi) of the text at a time: outside it a code point reads as
// outOfRange and its flags as zero.

const outOfRange = 0xFFFFFFFF

// piece walks one piece of the text and records the lengths of its words.
type piece struct {
	cpts    []uint32
	fl      []Flags
	lo, hi  int
	prevEnd int
	out     []int
}

func (p *piece) cpt(i int) uint32 {
	if i >= p.lo && i < p.hi {
		return p.cpts[i]
	}
	return outOfRange
}

func (p *piece) flags(i int) Flags {
	if i >= p.lo && i < p.hi {
		return p.fl[i]
	}
	return 0
}

// add ends a word at end and returns its length; empty words are not
// recorded.
func (p *piece) add(end int) int {
	n := end - p.prevEnd
	if n > 0 {
		p.out = append(p.out, n)
	}
	p.prevEnd = end
	return n
}

// contraction returns the length of 's 't 'm 'd 're 've 'll at pos (the
// apostrophe included), 0 if none; fold lower-cases the letters first.
func (p *piece) contraction(pos int, fold bool) int {
	if p.cpt(pos) != '\'' || pos+1 >= p.hi {
		return 0
	}
	n := p.cpt(pos + 1)
	if fold {
		n = ToLower(n)
	}
	if n == 's' || n == 't' || n == 'm' || n == 'd' {
		return 2
	}
	if pos+2 < p.hi {
		nn := p.cpt(pos + 2)
		if fold {
			nn = ToLower(nn)
		}
		if n == 'r' && nn == 'e' || n == 'v' && nn == 'e' || n == 'l' && nn == 'l' {
			return 3
		}
	}
	return 0
}

// whitespace counts the whitespace run at pos and where its last \r or \n
// ends (0 if none).
func (p *piece) whitespace(pos int) (n, lastRN int) {
	for p.flags(pos + n).IsWhitespace() {
		if c := p.cpt(pos + n); c == '\r' || c == '\n' {
			lastRN = pos + n + 1
		}
		n++
	}
	return n, lastRN
}

func splitCustom(expr string, cpts []uint32, fl []Flags, offsets []int) []int {
	var walk func(p *piece)
	switch expr {
	case reGPT2:
		walk = walkGPT2
	case reLlama3, reLlama3Alt:
		walk = func(p *piece) { walkLlama3(p, 3, false) }
	case reQwen2:
		walk = func(p *piece) { walkLlama3(p, 1, false) }
	case reQwen35:
		walk = func(p *piece) { walkLlama3(p, 1, true) }
	case reKimiK2:
		walk = walkKimiK2
	case reAFMoE, reTinyAyaDig:
		walk = walkAFMoE
	default:
		return nil
	}
	p := &piece{cpts: cpts, fl: fl, out: make([]int, 0, len(offsets))}
	start := 0
	for _, off := range offsets {
		p.lo, p.hi, p.prevEnd = start, start+off, start
		start += off
		walk(p)
	}
	return p.out
}

// walkGPT2 is 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+.
func walkGPT2(p *piece) {
	for pos := p.lo; pos < p.hi; {
		c := p.cpt(pos)
		f := p.flags(pos)
		if n := p.contraction(pos, false); n > 0 {
			pos += p.add(pos + n)
			continue
		}
		f2 := f
		if c == ' ' {
			f2 = p.flags(pos + 1)
		}
		sp := 0
		if c == ' ' {
			sp = 1
		}
		switch {
		case f2.IsLetter():
			pos += sp
			for p.flags(pos).IsLetter() {
				pos++
			}
			p.add(pos)
			continue
		case f2.IsNumber():
			pos += sp
			for p.flags(pos).IsNumber() {
				pos++
			}
			p.add(pos)
			continue
		case f2&(Whitespace|Letter|Number) == 0 && f2 != 0:
			pos += sp
			for g := p.flags(pos); g&(Whitespace|Letter|Number) == 0 && g != 0; g = p.flags(pos) {
				pos++
			}
			p.add(pos)
			continue
		}
		n, _ := p.whitespace(pos)
		if n > 1 && p.cpt(pos+n) != outOfRange {
			pos += n - 1
			p.add(pos)
			continue
		}
		if n > 0 {
			pos += n
			p.add(pos)
			continue
		}
		pos++
		p.add(pos)
	}
}

// walkLlama3 is llama3's pattern (maxDigits 3), qwen2's (maxDigits 1) and
// qwen3.5's (maxDigits 1, marks: \p{M} joins the letters).
func walkLlama3(p *piece, maxDigits int, marks bool) {
	word := Letter
	if marks {
		word |= AccentMark
	}
	for pos := p.lo; pos < p.hi; {
		c := p.cpt(pos)
		f := p.flags(pos)
		if n := p.contraction(pos, true); n > 0 {
			pos += p.add(pos + n)
			continue
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+ (qwen3.5: [\p{L}\p{M}]+)
		if !(c == '\r' || c == '\n' || f.IsNumber()) {
			if f&word != 0 || p.flags(pos+1)&word != 0 {
				pos++
				for p.flags(pos)&word != 0 {
					pos++
				}
				p.add(pos)
				continue
			}
		}
		// \p{N}{1,3} or \p{N}
		if f.IsNumber() {
			ini := pos
			for p.flags(pos).IsNumber() {
				pos++
				if pos-ini >= maxDigits {
					p.add(pos)
					ini = pos
				}
			}
			p.add(pos)
			continue
		}
		// ' ?[^\s\p{L}\p{N}]+[\r\n]*' (qwen3.5: \p{M} too); the test of
		// the first is on f2, its emptiness on f, as in the C++
		f2 := f
		if c == ' ' {
			f2 = p.flags(pos + 1)
		}
		stop := Whitespace | Letter | Number
		if marks {
			stop |= AccentMark
		}
		if f2&stop == 0 && f != 0 {
			if c == ' ' {
				pos++
			}
			for g := p.flags(pos); g&stop == 0 && g != 0; g = p.flags(pos) {
				pos++
			}
			for c2 := p.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = p.cpt(pos) {
				pos++
			}
			p.add(pos)
			continue
		}
		n, lastRN := p.whitespace(pos)
		if lastRN > 0 {
			pos = lastRN
			p.add(pos)
			continue
		}
		if n > 1 && p.cpt(pos+n) != outOfRange {
			pos += n - 1
			p.add(pos)
			continue
		}
		if n > 0 {
			pos += n
			p.add(pos)
			continue
		}
		pos++
		p.add(pos)
	}
}

// walkKimiK2 is Kimi K2's pattern: runs of Han, letter words without Han
// with an optional contraction, \p{N}{1,3}, then as llama3.
func walkKimiK2(p *piece) {
	letter := func(i int) bool { return p.flags(i).IsLetter() && !IsHan(p.cpt(i)) }
	for pos := p.lo; pos < p.hi; {
		c := p.cpt(pos)
		f := p.flags(pos)
		if IsHan(c) {
			for IsHan(p.cpt(pos)) {
				pos++
			}
			p.add(pos)
			continue
		}
		lead := !(c == '\r' || c == '\n' || f.IsLetter() || f.IsNumber())
		if f.IsLetter() && !IsHan(c) || lead && letter(pos+1) {
			if lead {
				pos++
			}
			has := false
			for letter(pos) {
				has = true
				pos++
			}
			if has || !lead && letter(pos) {
				if !has {
					pos++
				}
				for letter(pos) {
					pos++
				}
				if p.cpt(pos) == '\'' && pos+1 < p.hi {
					n := ToLower(p.cpt(pos + 1))
					if n == 's' || n == 't' || n == 'm' || n == 'd' {
						pos += 2
					} else if pos+2 < p.hi {
						nn := ToLower(p.cpt(pos + 2))
						if n == 'r' && nn == 'e' || n == 'v' && nn == 'e' || n == 'l' && nn == 'l' {
							pos += 3
						}
					}
				}
				p.add(pos)
				continue
			} else if lead {
				pos--
			}
		}
		if f.IsNumber() {
			ini := pos
			for p.flags(pos).IsNumber() {
				pos++
				if pos-ini >= 3 {
					p.add(pos)
					ini = pos
				}
			}
			p.add(pos)
			continue
		}
		f2 := f
		if c == ' ' {
			f2 = p.flags(pos + 1)
		}
		const stop = Whitespace | Letter | Number
		if f2&stop == 0 && f2 != 0 {
			if c == ' ' {
				pos++
			}
			for g := p.flags(pos); g&stop == 0 && g != 0; g = p.flags(pos) {
				pos++
			}
			for c2 := p.cpt(pos); c2 == '\r' || c2 == '\n'; c2 = p.cpt(pos) {
				pos++
			}
			p.add(pos)
			continue
		}
		n, lastRN := p.whitespace(pos)
		if lastRN > 0 {
			pos = lastRN
			p.add(pos)
			continue
		}
		if n > 1 && p.cpt(pos+n) != outOfRange {
			pos += n - 1
			p.add(pos)
			continue
		}
		if n > 0 {
			pos += n
			p.add(pos)
			continue
		}
		pos++
		p.add(pos)
	}
}

// walkAFMoE splits each run of digits into groups of three from its end
// (the text before a run goes with its first group) and keeps the rest of
// the piece whole, as unicode_regex_split_custom_afmoe.
func walkAFMoE(p *piece) {
	for pos := p.lo; pos < p.hi; {
		if !p.flags(pos).IsNumber() {
			pos++
			continue
		}
		first := pos
		for p.flags(pos).IsNumber() && pos < p.hi {
			pos++
		}
		count := pos - first
		cur := first
		if r := count % 3; r > 0 {
			p.add(cur + r)
			cur += r
		}
		for cur < first+count {
			p.add(cur + 3)
			cur += 3
		}
	}
	if p.prevEnd < p.hi {
		p.add(p.hi)
	}
}

// splitNewlines is [^\n]+|[\n]+: alternating runs of other code points
// and of newlines.
func splitNewlines(cpts []uint32, offsets []int) []int {
	out := make([]int, 0, len(offsets))
	start := 0
	for _, off := range offsets {
		pos, hi := start, start+off
		for pos < hi {
			nl := cpts[pos] == '\n'
			run := pos
			for pos < hi && (cpts[pos] == '\n') == nl {
				pos++
			}
			out = append(out, pos-run)
		}
		start = hi
	}
	return out
}
