package tests

import (
	"bytes"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
)

// The tokenizer against libllama's: every vocabulary of the pin's models/
// directory and synthesized ones of the types it lacks (UGM, RWKV,
// PLaMo-2), loaded by ggload's vocab package and by libllama (vocab_only)
// in the same process. Compared: the vocabulary's description (size,
// type, special ids, add flags, every token's text, score, attributes,
// end-of-generation and control flags), every token's piece (lstrip 0
// and 1, special off and on), the tokens of the pin's test inputs and of
// random strings under every add_special and parse_special, and the text
// of random token sequences under every remove_special and
// unparse_special.
//
//	go test -run TestTokenize -v ./tests
//	GGLOAD_TOKENIZE_FUZZ=20000 go test -run TestTokenize ./tests   # a deeper run
//
// GGLOAD_TOKENIZE_FUZZ is the number of random strings per vocabulary
// (and half as many random token sequences).

// defaultFuzz is the number of random strings per vocabulary.
const defaultFuzz = 200

// tokSide is one side of the comparison: a vocabulary's API.
type tokSide interface {
	NTokens() int
	Type() int
	Specials() []int32 // bos, eos, eot, sep, nl, pad, mask, fim pre, suf, mid, pad, rep, sep
	AddFlags() [3]bool // add bos, eos, sep
	IsEOG(t int32) bool
	IsControl(t int32) bool
	Text(t int32) string
	Score(t int32) float32
	Attr(t int32) uint32
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	AppendPiece(dst []byte, t int32, lstrip int, special bool) ([]byte, error)
	Detokenize(tokens []int32, removeSpecial, unparseSpecial bool) ([]byte, error)
}

var specialNames = []string{"bos", "eos", "eot", "sep", "nl", "pad", "mask", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep"}

// llamaSide is libllama's vocabulary.
type llamaSide struct{ *llama.Vocab }

func (s llamaSide) Specials() []int32 {
	v := s.Vocab
	return []int32{v.BOS(), v.EOS(), v.EOT(), v.SEP(), v.NL(), v.PAD(), v.MASK(), v.FIMPre(), v.FIMSuf(), v.FIMMid(), v.FIMPad(), v.FIMRep(), v.FIMSep()}
}

func (s llamaSide) AddFlags() [3]bool { return [3]bool{s.AddBOS(), s.AddEOS(), s.AddSEP()} }

// tokenizeVocab is one vocabulary of the comparison.
type tokenizeVocab struct {
	name, path string
	inputs     []string // the pin's test inputs (.inp), if any
}

// tokenizeVocabs lists the pin's vocabularies and writes the synthesized
// ones into dir.
func tokenizeVocabs(t *testing.T, src, dir string) []tokenizeVocab {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(src, "models", "ggml-vocab-*.gguf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vocabularies in %s/models: %v", src, err)
	}
	var out []tokenizeVocab
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "ggml-vocab-"), ".gguf")
		out = append(out, tokenizeVocab{name: name, path: f, inputs: pinInputs(t, f+".inp")})
	}
	for _, sv := range synthVocabs {
		out = append(out, tokenizeVocab{name: sv.name, path: synthVocabFile(t, dir, src, sv)})
	}
	return out
}

// pinInputs reads a .inp file as tests/test-tokenizer-0.cpp does: texts
// separated by "\n__ggml_vocab_test__\n", a final separator ending the
// last; none where there is no file.
func pinInputs(t testing.TB, path string) []string {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	var out []string
	for s := string(raw); s != ""; {
		i := strings.Index(s, sep)
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		s = s[i+len(sep):]
	}
	return out
}

// fuzzCount is the number of random strings per vocabulary, and whether
// the run is a deep one.
func fuzzCount(t *testing.T) (int, bool) {
	if s := os.Getenv("GGLOAD_TOKENIZE_FUZZ"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("GGLOAD_TOKENIZE_FUZZ=%s: want a count", s)
		}
		return n, true
	}
	return defaultFuzz, false
}

func TestTokenize(t *testing.T) {
	rt := testenv.Runtime(t)
	src := testenv.SourceTree(t)
	l := openLlama(t, rt)
	n, deep := fuzzCount(t)
	for _, tv := range tokenizeVocabs(t, src, t.TempDir()) {
		t.Run(tv.name, func(t *testing.T) {
			t.Parallel()
			theirs, err := l.LoadVocab(tv.path)
			ours, ourErr := openOurs(tv.path)
			if err != nil || ourErr != nil {
				if err == nil || ourErr == nil {
					t.Fatalf("libllama: %v; ggload: %v", err, ourErr)
				}
				t.Logf("both refuse: libllama: %v; ggload: %v", err, ourErr)
				return
			}
			defer theirs.Free()
			c := &tokCompare{t: t, name: tv.name, ours: ours, theirs: llamaSide{theirs}}
			t0 := time.Now()
			attrs := make([]uint32, theirs.NTokens())
			for id := range attrs {
				attrs[id] = theirs.Attr(int32(id))
			}
			ids := sweep(attrs, deep)
			c.describe(ids)
			t1 := time.Now()
			c.pieces(ids)
			t2 := time.Now()
			inputs := slices.Clone(tv.inputs)
			r := rand.New(rand.NewPCG(nameHash(tv.name), 1))
			g := newTextGen(r, llamaSide{theirs}, attrs)
			for range n {
				inputs = append(inputs, g.text())
			}
			for _, s := range inputs {
				c.tokenize(s)
			}
			t3 := time.Now()
			t.Logf("describe %v pieces %v tokenize %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
			for range n / 2 {
				c.detokenize(g.ids())
			}
			// where libllama would end the process, ggload answers (an
			// error or tokens), without a panic
			for _, s := range []string{"a\xf4\x90\x80\x80b", "\xf7\xbf\xbf\xbf", " \xf5\x80\x80\x80 x"} {
				for _, parseSpecial := range []bool{false, true} {
					ours.Tokenize(s, true, parseSpecial)
				}
			}
			if c.diffs > 0 {
				t.Errorf("%s: %d differences (the first %d shown)", tv.name, c.diffs, min(c.diffs, maxShown))
			} else {
				t.Logf("%s: %d tokens (%d described and rendered), %d texts (%d of the pin), %d sequences: equal", tv.name, theirs.NTokens(), len(ids), len(inputs), len(tv.inputs), n/2)
			}
		})
	}
}

func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// maxShown bounds the differences a vocabulary reports in full.
const maxShown = 12

// tokCompare compares two sides on one vocabulary and reports each
// difference as a Go quoted input with both answers.
type tokCompare struct {
	t            *testing.T
	name         string
	ours, theirs tokSide
	diffs        int
}

func (c *tokCompare) differ(format string, args ...any) {
	c.t.Helper()
	c.diffs++
	if c.diffs <= maxShown {
		c.t.Errorf("%s: "+format, append([]any{c.name}, args...)...)
	}
}

// sweepLimit is how many tokens a default run describes and renders
// per vocabulary: all of a vocabulary up to that size; of a larger one,
// every token that is not a plain one (control, user-defined, unknown,
// byte, unused) and an even sample of the others. A deeper run
// (GGLOAD_TOKENIZE_FUZZ set) takes every token.
const sweepLimit = 30000

// sweep lists the token ids the per-token comparisons cover, from
// libllama's attributes.
func sweep(attrs []uint32, all bool) []int32 {
	n := len(attrs)
	stride := 1
	if !all && n > sweepLimit {
		stride = (n + sweepLimit - 1) / sweepLimit
	}
	var ids []int32
	for id, a := range attrs {
		if id%stride == 0 || a&attrNormal == 0 {
			ids = append(ids, int32(id))
		}
	}
	return ids
}

func (c *tokCompare) describe(ids []int32) {
	o, th := c.ours, c.theirs
	if o.NTokens() != th.NTokens() || o.Type() != th.Type() {
		c.differ("n_tokens %d, type %d; llama.cpp: %d, %d", o.NTokens(), o.Type(), th.NTokens(), th.Type())
		return
	}
	os, ts := o.Specials(), th.Specials()
	for i := range ts {
		if os[i] != ts[i] {
			c.differ("special %s: %d; llama.cpp: %d", specialNames[i], os[i], ts[i])
		}
	}
	if o.AddFlags() != th.AddFlags() {
		c.differ("add bos, eos, sep: %v; llama.cpp: %v", o.AddFlags(), th.AddFlags())
	}
	for _, id := range ids {
		ot, tt := o.Text(id), th.Text(id)
		if i := strings.IndexByte(ot, 0); i >= 0 {
			ot = ot[:i] // llama_vocab_get_text returns a C string
		}
		if ot != tt || math.Float32bits(o.Score(id)) != math.Float32bits(th.Score(id)) || o.Attr(id) != th.Attr(id) ||
			o.IsEOG(id) != th.IsEOG(id) || o.IsControl(id) != th.IsControl(id) {
			c.differ("token %d: text %q score %v attr %#x eog %v control %v; llama.cpp: %q %v %#x %v %v", id,
				ot, o.Score(id), o.Attr(id), o.IsEOG(id), o.IsControl(id),
				tt, th.Score(id), th.Attr(id), th.IsEOG(id), th.IsControl(id))
		}
	}
}

func (c *tokCompare) pieces(ids []int32) {
	var ob, tb []byte
	for _, id := range ids {
		for _, lstrip := range []int{0, 1} {
			for _, special := range []bool{false, true} {
				var oerr, terr error
				ob, oerr = c.ours.AppendPiece(ob[:0], id, lstrip, special)
				tb, terr = c.theirs.AppendPiece(tb[:0], id, lstrip, special)
				if (oerr != nil) != (terr != nil) || !bytes.Equal(ob, tb) {
					c.differ("piece of %d (lstrip %d, special %v): %q (%v); llama.cpp: %q (%v)", id, lstrip, special, ob, oerr, tb, terr)
				}
			}
		}
	}
}

func (c *tokCompare) tokenize(s string) {
	for _, addSpecial := range []bool{false, true} {
		for _, parseSpecial := range []bool{false, true} {
			o, oerr := c.ours.Tokenize(s, addSpecial, parseSpecial)
			th, terr := c.theirs.Tokenize(s, addSpecial, parseSpecial)
			if (oerr != nil) != (terr != nil) || !slices.Equal(o, th) {
				c.differ("tokenize(%q, add_special %v, parse_special %v):\n\tggload    %v (%v)\n\tllama.cpp %v (%v)", s, addSpecial, parseSpecial, o, oerr, th, terr)
			}
		}
	}
}

func (c *tokCompare) detokenize(ids []int32) {
	for _, removeSpecial := range []bool{false, true} {
		for _, unparseSpecial := range []bool{false, true} {
			o, oerr := c.ours.Detokenize(ids, removeSpecial, unparseSpecial)
			th, terr := c.theirs.Detokenize(ids, removeSpecial, unparseSpecial)
			if (oerr != nil) != (terr != nil) || !bytes.Equal(o, th) {
				c.differ("detokenize(%v, remove_special %v, unparse_special %v):\n\tggload    %q (%v)\n\tllama.cpp %q (%v)", ids, removeSpecial, unparseSpecial, o, oerr, th, terr)
			}
		}
	}
}

// textGen makes random texts and token sequences for a vocabulary.
type textGen struct {
	r        *rand.Rand
	n        int32
	special  []string // texts of control, user-defined and unknown tokens
	specialI []int32
	texts    []string // texts of random tokens
}

// Token attributes (llama_token_attr).
const (
	attrUnknown     = 1 << 0
	attrNormal      = 1 << 2
	attrControl     = 1 << 3
	attrUserDefined = 1 << 4
	attrByte        = 1 << 5
)

func newTextGen(r *rand.Rand, v tokSide, attrs []uint32) *textGen {
	g := &textGen{r: r, n: int32(v.NTokens())}
	for id, a := range attrs {
		if a&(attrUnknown|attrControl|attrUserDefined) != 0 && len(g.special) < 4096 {
			g.special = append(g.special, v.Text(int32(id)))
			g.specialI = append(g.specialI, int32(id))
		}
	}
	for _, id := range v.Specials() {
		if id >= 0 && id < g.n {
			g.specialI = append(g.specialI, id)
		}
	}
	for range 2000 {
		if g.n > 0 {
			g.texts = append(g.texts, v.Text(r.Int32N(g.n)))
		}
	}
	return g
}

// textPieces are fragments random texts are made of.
var textPieces = []string{
	"Hello", " world", "llama.cpp", "the", " quick", "brown", "fox", "I'm", " you're", "'s", "'LL", "don't", "HELLO", "ĠHello",
	"0", "7", "42", "1234567", "3.14159", "1,000,000", "0x1F", "2024-06-01", "½", "²", "٣", "४", "Ⅻ",
	" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n ", "\v", "\f", "\u00a0", "\u3000", "\u2009", "\u200b", "\u2028", "\u0085", "\ufeff",
	"func main() {\n\tfmt.Println(\"hi\")\n}\n", "if (a != b && c >= d) { return x->y; }", "#include <stdio.h>", "def f(x):\n    return x**2\n",
	"<html><body class=\"x\">", "SELECT * FROM t WHERE id = 1;", "a_b-c.d/e\\f", "$$\\frac{1}{2}$$", "@user #tag https://x.y/z?q=1&r=2",
	"!!!", "???", "...", "---", "===", "```", "\"\"\"", "''", "«»", "—", "–", "•", "→", "©", "€", "£", "¥",
	"é", "e\u0301", "ñ", "Ångström", "straße", "ﬁ", "Ａｂｃ", "１２３", "İstanbul", "ǅ", "ﬀ", "ŉ",
	"привет", "мир", "Γειά σου", "שלום", "مرحبا", "नमस्ते", "สวัสดี", "안녕하세요", "こんにちは", "カタカナ", "ｶﾞ", "我想在apple工作", "天～", "漢字", "𠀋",
	"😀", "🦙", "👍🏽", "👨\u200d👩\u200d👧", "🏳️\u200d🌈", "😶\u200d🌫️", "✅", "❤️", "🇯🇵", "\U0001F9D1\u200D\U0001F4BB",
	"\u0301", "\u0300\u0301", "\u034f", "\u00ad", "\u0000", "\x7f", "\x01",
	"\x80", "\xff", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x8f\xbf\xbf", "\xfe\xff",
	"<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "[CLS]", "[SEP]", "<mask>", "▁", "▁▁",
}

// text is a random text: fragments, random code points of many scripts,
// special-token texts, token texts and random bytes, concatenated. Texts
// that would make libllama throw past its C API and end the process are
// left out (see beyondUnicode).
func (g *textGen) text() string {
	for {
		if s := g.anyText(); !beyondUnicode(s) {
			return s
		}
	}
}

// beyondUnicode reports whether s holds a four-byte sequence that
// unicode_cpt_from_utf8 decodes to a code point past U+10FFFF (lead byte
// F4 to F7): re-encoding it (unicode_cpt_to_utf8, in the pre-tokenizers)
// throws std::invalid_argument through llama_tokenize, which ends the
// process. ggload's answer to such texts is checked on its own.
func beyondUnicode(s string) bool {
	for i := 0; i+3 < len(s); i++ {
		b := s[i]
		if b&0xf8 != 0xf0 || s[i+1]&0xc0 != 0x80 || s[i+2]&0xc0 != 0x80 || s[i+3]&0xc0 != 0x80 {
			continue
		}
		if uint32(b&7)<<18|uint32(s[i+1]&0x3f)<<12 > 0x10ffff {
			return true
		}
	}
	return false
}

func (g *textGen) anyText() string {
	var sb strings.Builder
	parts := 1 + g.r.IntN(12)
	for range parts {
		switch k := g.r.IntN(10); {
		case k < 4:
			sb.WriteString(textPieces[g.r.IntN(len(textPieces))])
		case k < 6:
			for range 1 + g.r.IntN(6) {
				sb.WriteRune(g.randRune())
			}
		case k < 7 && len(g.special) > 0:
			sb.WriteString(g.special[g.r.IntN(len(g.special))])
		case k < 9 && len(g.texts) > 0:
			for range 1 + g.r.IntN(4) {
				sb.WriteString(g.texts[g.r.IntN(len(g.texts))])
			}
		default:
			for range 1 + g.r.IntN(3) {
				sb.WriteByte(byte(g.r.IntN(256)))
			}
		}
	}
	return sb.String()
}

// runeRanges are the code point ranges random runes come from.
var runeRanges = [][2]rune{
	{0x20, 0x7e}, {0x09, 0x0d}, {0xa0, 0x24f}, {0x300, 0x36f}, {0x370, 0x3ff}, {0x400, 0x4ff}, {0x590, 0x5ff}, {0x600, 0x6ff},
	{0x900, 0x97f}, {0xe00, 0xe7f}, {0x1100, 0x11ff}, {0x2000, 0x206f}, {0x2100, 0x22ff}, {0x3000, 0x30ff}, {0x4e00, 0x9fff},
	{0xac00, 0xd7a3}, {0xf900, 0xfaff}, {0xfe00, 0xfe0f}, {0xff00, 0xffef}, {0x1f300, 0x1faff}, {0x20000, 0x2a6df}, {0xe0000, 0xe007f},
	{0x10000, 0x10ffff},
}

func (g *textGen) randRune() rune {
	rg := runeRanges[g.r.IntN(len(runeRanges))]
	r := rg[0] + g.r.Int32N(rg[1]-rg[0]+1)
	if !utf8.ValidRune(r) {
		return 0xfffd
	}
	return r
}

// ids is a random token sequence: any ids, special and control ones more
// often than their share.
func (g *textGen) ids() []int32 {
	out := make([]int32, g.r.IntN(16))
	for i := range out {
		if len(g.specialI) > 0 && g.r.IntN(4) == 0 {
			out[i] = g.specialI[g.r.IntN(len(g.specialI))]
		} else {
			out[i] = g.r.Int32N(g.n)
		}
	}
	return out
}
