// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llm_tokenizer_plamo2.

package vocab

import (
	"math"
	"slices"
	"strconv"
)

// plamo2Tokenizer is llm_tokenizer_plamo2: the suffix table of every token
// and the byte fallback tokens.
type plamo2Tokenizer struct {
	bytes    [256]Token
	toSuffix map[int64]int32
	table    [][4]int32 // piece length, token id, score, piece id
}

const (
	plamoInvalid = -20000000
	plamoUnknown = -10000000
)

// cptsOf is unicode_cpts_from_utf8.
func cptsOf(s string) []uint32 {
	out := make([]uint32, 0, len(s))
	for off := 0; off < len(s); {
		var c uint32
		c, off = decodeCpt(s, off)
		out = append(out, c)
	}
	return out
}

// utf8Of is the concatenated unicode_cpt_to_utf8 of cpts; false where one
// has no encoding.
func utf8Of(cpts []uint32) (string, bool) {
	b := make([]byte, 0, len(cpts)*2)
	for _, c := range cpts {
		var ok bool
		if b, ok = appendCpt(b, c); !ok {
			return "", false
		}
	}
	return string(b), true
}

// newPLaMo2 is llm_tokenizer_plamo2::build.
func newPLaMo2(v *Vocab) (*plamo2Tokenizer, error) {
	t := &plamo2Tokenizer{toSuffix: map[int64]int32{}}
	scoreOf := map[string]float32{}
	nan := float32(math.NaN())
	bad := func(id int, c uint32) error {
		return v.errorf("token %d (%q): code point %#x has no UTF-8 encoding (llama.cpp throws invalid codepoint)", id, v.texts[id], c)
	}
	for id, text := range v.texts {
		if v.attrs[id]&AttrByte != 0 {
			if len(text) == 6 && text[:3] == "<0x" && text[5] == '>' && isHex(text[3]) && isHex(text[4]) {
				t.bytes[unhex(text[3])<<4|unhex(text[4])] = Token(id)
			}
			continue
		}
		scoreOf[text] = v.scores[id]
		cpts := cptsOf(text)
		for i := 1; i < len(cpts); i++ {
			suf, ok := utf8Of(cpts[i:])
			if !ok {
				return nil, bad(id, cpts[i])
			}
			if _, seen := scoreOf[suf]; !seen {
				scoreOf[suf] = nan
			}
		}
	}
	for i, id := range t.bytes {
		if id == 0 {
			return nil, v.errorf("Byte token for <0x%s> is not set", strconv.Itoa(i))
		}
	}
	suffixes := make([]string, 0, len(scoreOf)+1)
	for s := range scoreOf {
		suffixes = append(suffixes, s)
	}
	suffixes = append(suffixes, "")
	slices.SortFunc(suffixes, func(a, b string) int {
		i, j := len(a)-1, len(b)-1
		for i >= 0 && j >= 0 {
			if a[i] != b[j] {
				if a[i] < b[j] {
					return -1
				}
				return 1
			}
			i--
			j--
		}
		switch {
		case i < 0 && j < 0:
			return 0
		case i < 0:
			return -1
		}
		return 1
	})
	suffixID := make(map[string]int32, len(suffixes))
	pieces := int32(0)
	for _, suf := range suffixes {
		suffixID[suf] = pieces
		if suf == "" {
			pieces++
			continue
		}
		cpts := cptsOf(suf)
		rest, ok := utf8Of(cpts[1:])
		if !ok {
			return nil, v.errorf("suffix %q has a code point with no UTF-8 encoding", suf)
		}
		t.toSuffix[int64(cpts[0])<<32|int64(suffixID[rest])] = pieces
		count := int32(1)
		for l := len(cpts); l > 0; l-- {
			p, _ := utf8Of(cpts[:l])
			if _, ok := scoreOf[p]; ok {
				count++
			}
		}
		pieces += count
	}
	t.table = make([][4]int32, pieces)
	row := 0
	for _, suf := range suffixes {
		cpts := cptsOf(suf)
		for l := len(cpts); l > 0; l-- {
			p, _ := utf8Of(cpts[:l])
			sc, ok := scoreOf[p]
			if !ok {
				continue
			}
			tok := int32(-1)
			if id, ok := v.toID[p]; ok {
				tok = id
			}
			score := int32(plamoInvalid)
			if !math.IsNaN(float64(sc)) && !math.IsInf(float64(sc), 0) {
				score = int32(math.Round(float64(sc) * 1e4))
			}
			t.table[row] = [4]int32{int32(l), tok, score, suffixID[p]}
			row++
		}
		t.table[row] = [4]int32{1, -1, plamoUnknown, 0}
		row++
	}
	return t, nil
}

// encode is llm_tokenizer_plamo2::encode.
func (t *plamo2Tokenizer) encode(s *session, text string, out []Token) []Token {
	data := s.cpts[:0]
	for off := 0; off < len(text); {
		var c uint32
		c, off = decodeCpt(text, off)
		data = append(data, c)
	}
	s.cpts = data
	if len(data) > 0 && data[0] == 0xFEFF {
		data = data[1:]
	}
	n := len(data)
	if n == 0 {
		return out
	}
	scores := make([]int64, n+1)
	for i := range scores {
		scores[i] = 1 << 60
	}
	scores[n] = 0
	path := make([][3]int32, n+1) // token length, token id, number of tokens
	suffix := int32(0)
	for i := n - 1; i >= 0; i-- {
		c := data[i]
		for p := int(suffix); p < len(t.table); p++ {
			code := int64(c)<<32 | int64(t.table[p][3])
			if id, ok := t.toSuffix[code]; ok {
				suffix = id
			} else {
				suffix = 0
			}
			if suffix > 0 || t.table[p][2] == plamoUnknown {
				break
			}
		}
		for p := int(suffix); p < len(t.table); p++ {
			score := t.table[p][2]
			if score > plamoInvalid {
				l := t.table[p][0]
				sc := scores[i+int(l)] - int64(score)
				if sc < scores[i] {
					scores[i] = sc
					path[i][0] = l
					path[i][1] = t.table[p][1]
					path[i][2] = path[i+int(l)][2] + 1
					if score == plamoUnknown {
						path[i][2] += b2i(c >= 0x80) + b2i(c >= 0x800) + b2i(c >= 0x10000)
					}
				}
			}
			if score == plamoUnknown {
				break
			}
		}
	}
	for pos := 0; pos < n; {
		if path[pos][1] >= 0 {
			out = append(out, path[pos][1])
		} else {
			c := data[pos]
			k := 1 + int(b2i(c >= 0x80)+b2i(c >= 0x800)+b2i(c >= 0x10000))
			for i := range k {
				var b byte
				switch {
				case k == 1:
					b = byte(c)
				case i == 0:
					b = byte(int(0xF00) >> k)
				default:
					b = 0x80
				}
				out = append(out, t.bytes[b|byte((c>>((k-i-1)*6))&0x3F)])
			}
		}
		if path[pos][0] <= 0 {
			break // (the pin asserts a positive length)
		}
		pos += int(path[pos][0])
	}
	return out
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
