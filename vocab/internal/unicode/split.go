// Port of llama.cpp src/unicode.cpp (v0.5.0): unicode_regex_split.

package unicode

import (
	"fmt"
	"strings"
	"sync"
)

// The patterns that unicode_regex_split_custom recognises, each with its
// hand-written splitter.
const (
	reGPT2       = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	reLlama3     = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reLlama3Alt  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2      = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen35     = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reKimiK2     = `\p{Han}+`
	reAFMoE      = `\p{AFMoE_digits}`
	reNewlines   = `[^\n]+|[\n]+`
	reTinyAyaDig = `\d{1,3}(?=(?:\d{3})*\b)`
)

// ucatNames are the \p{..} names that make unicode_regex_split match over
// the collapsed text, with the category each stands for.
var ucatNames = []struct {
	name string
	cat  Flags
}{
	// in the order of the C++ std::map (byte order of the names)
	{`\p{L}`, Letter},
	{`\p{Ll}`, Letter},
	{`\p{Lm}`, Letter},
	{`\p{Lo}`, Letter},
	{`\p{Lt}`, Letter},
	{`\p{Lu}`, Letter},
	{`\p{M}`, AccentMark},
	{`\p{N}`, Number},
	{`\p{P}`, Punctuation},
	{`\p{S}`, Symbol},
}

// ucatByte is the byte that stands for a category in the collapsed text;
// ucatASCII the ASCII members of the category, as bracket contents.
var (
	ucatByte = map[Flags]byte{Number: 0xD1, Letter: 0xD2, Punctuation: 0xD3, AccentMark: 0xD4, Symbol: 0xD5}

	ucatASCII = map[Flags]string{
		Number:      "\x30-\x39",
		Letter:      "\x41-\x5A\x61-\x7A",
		Punctuation: "\x21-\x23\x25-\x2A\x2C-\x2F\x3A-\x3B\x3F-\x40\\\x5B-\\\x5D\x5F\\\x7B\\\x7D",
		AccentMark:  "",
		Symbol:      "\\\x24\\\x2B\x3C-\x3E\x5E\x60\\\x7C\\\x7E",
	}
)

func usesCategory(expr string) bool {
	for _, u := range ucatNames {
		if strings.Contains(expr, u.name) {
			return true
		}
	}
	return false
}

// compiled caches the programs of the patterns met so far, by pattern.
var compiled sync.Map // string -> *compiledExpr

type compiledExpr struct {
	prog      *program
	collapsed bool
	err       error
}

// compileExpr compiles a pattern as unicode_regex_split's fallback would:
// with \p{..} rewritten into brackets of collapsed bytes where the pattern
// names a category, else as a wregex over its code points.
func compileExpr(expr string) *compiledExpr {
	if c, ok := compiled.Load(expr); ok {
		return c.(*compiledExpr)
	}
	c := &compiledExpr{}
	cpts := CptsFromUTF8(expr)
	if usesCategory(expr) {
		c.collapsed = true
		for _, r := range cpts {
			if r >= 128 {
				c.err = fmt.Errorf("unicode: regex %q includes both unicode categories and non-ASCII characters", expr)
				break
			}
		}
		if c.err == nil {
			pat := collapseExpr(expr)
			units := make([]int32, len(pat))
			for i := 0; i < len(pat); i++ {
				units[i] = int32(int8(pat[i]))
			}
			c.prog, c.err = compile(units, expr, false)
		}
	} else {
		units := make([]int32, len(cpts))
		for i, r := range cpts {
			units[i] = int32(r)
		}
		c.prog, c.err = compile(units, expr, true)
	}
	v, _ := compiled.LoadOrStore(expr, c)
	return v.(*compiledExpr)
}

// collapseExpr rewrites each known \p{..} of expr into the bytes of the
// collapsed text that stand for it, as unicode_regex_split does: inside a
// bracket the marker byte and the ASCII members are added to it, outside
// they become a bracket of their own.
func collapseExpr(expr string) string {
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		if expr[i] == '[' && (i == 0 || expr[i-1] != '\\') {
			b.WriteByte('[')
			inside = true
			continue
		}
		if inside && expr[i] == ']' && expr[i-1] != '\\' {
			b.WriteByte(']')
			inside = false
			continue
		}
		if expr[i] == '\\' && i+3 < len(expr) && expr[i+1] == 'p' && expr[i+2] == '{' {
			if k := strings.IndexByte(expr[i+3:], '}'); k >= 0 && i+3+k <= i+10 {
				closing := i + 3 + k
				pat := expr[i : closing+1]
				for _, u := range ucatNames {
					if u.name != pat {
						continue
					}
					if !inside {
						b.WriteByte('[')
					}
					b.WriteByte(ucatByte[u.cat])
					b.WriteString(ucatASCII[u.cat])
					if !inside {
						b.WriteByte(']')
					}
					i = closing
					goto next
				}
			}
		}
		b.WriteByte(expr[i])
	next:
	}
	return b.String()
}

// RegexSplit splits text into words with the regex list exprs, as
// llama.cpp's unicode_regex_split: each pattern splits every piece that the
// previous ones left, through a hand-written splitter for the patterns the
// C++ has one for and otherwise through a std::regex-compatible matcher,
// over the "collapsed" text (one byte per code point, standing for its
// category) where the pattern names a \p{..} category and over the code
// points otherwise. The text between matches stays a piece of its own;
// empty matches give empty pieces. With byteEncode, every byte of every
// word is then spelled with GPT-2's byte-to-text map.
//
// The error reports what the C++ throws for: a pattern std::regex
// rejects, a pattern with both a category and non-ASCII text, or a word
// with a decoded value past U+10FFFF (from a 4-byte sequence of invalid
// UTF-8) that it cannot encode again.
func RegexSplit(text string, exprs []string, byteEncode bool) ([]string, error) {
	cpts := CptsFromUTF8(text)
	var fl []Flags // the flags of cpts, for the hand-written splitters
	var collapsed, wide []int32
	offsets := []int{len(cpts)}
	for _, expr := range exprs {
		var tmp []int
		switch expr {
		case reGPT2, reLlama3, reLlama3Alt, reQwen2, reQwen35, reKimiK2, reAFMoE, reTinyAyaDig:
			if fl == nil {
				fl = cptFlags(cpts)
			}
			tmp = splitCustom(expr, cpts, fl, offsets)
		case reNewlines:
			tmp = splitNewlines(cpts, offsets)
		}
		if len(tmp) > 0 {
			offsets = tmp
			continue
		}
		c := compileExpr(expr)
		if c.err != nil {
			return nil, c.err
		}
		if c.collapsed {
			if collapsed == nil {
				collapsed = collapse(cpts)
			}
			offsets = c.prog.splitSTL(collapsed, offsets)
		} else {
			if wide == nil {
				wide = widen(cpts)
			}
			offsets = c.prog.splitSTL(wide, offsets)
		}
	}
	// all words are written into one buffer and cut from one string
	buf := make([]byte, 0, 2*len(text)+8)
	ends := make([]int, 0, len(offsets))
	start := 0
	for _, off := range offsets {
		for _, c := range cpts[start : start+off] {
			switch {
			case c > 0x10FFFF:
				return nil, fmt.Errorf("unicode: invalid code point 0x%X in the text", c)
			case !byteEncode:
				buf = AppendUTF8(buf, c)
			case c < 0x80:
				buf = append(buf, byteText[c]...)
			default:
				var enc [4]byte
				for _, b := range AppendUTF8(enc[:0], c) {
					buf = append(buf, byteText[b]...)
				}
			}
		}
		start += off
		ends = append(ends, len(buf))
	}
	all := string(buf)
	words := make([]string, len(ends))
	prev := 0
	for i, e := range ends {
		words[i] = all[prev:e]
		prev = e
	}
	return words, nil
}

func cptFlags(cpts []uint32) []Flags {
	t := table()
	fl := make([]Flags, len(cpts))
	for i, c := range cpts {
		fl[i] = t.of(c)
	}
	return fl
}

// collapse is the collapsed text: ASCII as is, non-ASCII whitespace as
// 0x0B, other code points as the byte of their category (0xD0 for a
// category without one), held as signed chars.
func collapse(cpts []uint32) []int32 {
	t := table()
	out := make([]int32, len(cpts))
	for i, c := range cpts {
		if c < 128 {
			out[i] = int32(c)
			continue
		}
		f := t.of(c)
		switch {
		case f.IsWhitespace():
			out[i] = 0x0B
		default:
			b, ok := ucatByte[f.CategoryFlag()]
			if !ok {
				b = 0xD0
			}
			out[i] = int32(int8(b))
		}
	}
	return out
}

// widen is the text as the wregex path sees it: the code points, with
// non-ASCII whitespace as 0x0B.
func widen(cpts []uint32) []int32 {
	t := table()
	out := make([]int32, len(cpts))
	for i, c := range cpts {
		if c > 0x7F && t.of(c).IsWhitespace() {
			out[i] = 0x0B
		} else {
			out[i] = int32(c)
		}
	}
	return out
}
