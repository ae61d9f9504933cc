package unicode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// oracle builds testdata/split.cpp with the pin's src/unicode.cpp and
// src/unicode-data.cpp and returns the program.
func oracle(t testing.TB) string {
	t.Helper()
	src := testenv.SourceTree(t)
	prog, err := filepath.Abs(filepath.Join("testdata", "split.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	return cxx.Build(t, "unicode-split", []string{"src/unicode.cpp", "src/unicode-data.cpp", prog}, "-O2", "-include", filepath.Join(src, "src", "unicode.h"))
}

// runOracle runs the oracle in mode with input on stdin and returns its
// output.
func runOracle(t testing.TB, bin, mode string, input []byte) []byte {
	t.Helper()
	cmd := cxx.Command(t, bin, mode)
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("split oracle %s: %v\n%s", mode, err, stderr.Bytes())
	}
	return out
}

type wbuf struct{ bytes.Buffer }

func (w *wbuf) u32(v int) { binary.Write(&w.Buffer, binary.LittleEndian, uint32(v)) }
func (w *wbuf) str(s string) {
	w.u32(len(s))
	w.WriteString(s)
}

type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) take(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = io.ErrUnexpectedEOF
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *rbuf) u8() uint8   { return r.take(1)[0] }
func (r *rbuf) u16() uint16 { return binary.LittleEndian.Uint16(r.take(2)) }
func (r *rbuf) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *rbuf) str() string { return string(r.take(int(r.u32()))) }

// The pieces of the random corpus: ASCII, whitespace of every kind,
// contractions, and a sample of the scripts and categories that the
// pre-tokenizers tell apart.
var corpusAtoms = []string{
	"a", "b", "Z", "x", "hello", "World", "THE", "é", "Ünïcödé", "ß", "ǅ", "ʰ",
	"0", "1", "7", "42", "12345", "9876543", "٣", "४", "๓", "Ⅻ", "½", "²", "𝟘",
	" ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\v", "\f", "\u0085", "\u00a0", "\u2028", "\u2029", "\u3000", "\u2003", "\u1680", "\u202f",
	"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "'", "'x", "'r", "'l",
	".", ",", "!", "?", ";", ":", "-", "_", "(", ")", "[", "]", "{", "}", "\\", "/", "\"", "#", "$", "%", "&", "*", "+", "<", "=", ">", "@", "^", "`", "|", "~",
	"…", "。", "，", "、", "।", "۔", "،", "“", "”", "‘", "’", "—", "！", "：", "；", "～", "·", "«", "»", "¡", "¿",
	"\u0301", "\u0308", "\u0327", "e\u0301", "\u093f", "\u0e34", "\u05b8",
	"αβγ", "Ωμέγα", "Привет", "мир", "ЖЁ", "Ꙁ", "Ա",
	"中文", "漢字", "你好世界", "㐀", "𠀀", "豈", "丁", "龥", "鿿",
	"한국어", "가", "힣", "ㄱ", "ᄀ", "ひらがな", "カタカナ", "ｶﾀｶﾅ", "ー", "ㄅ",
	"ภาษาไทย", "ก", "ລາວ", "ខ្មែរ", "မြန်မာ", "हिन्दी", "नमस्ते", "বাংলা", "తెలుగు", "عربي", "עברית",
	"😀", "🦙", "👍🏽", "❤️", "🇺🇸", "©", "€", "∑", "√", "→", "★", "♪",
	"\x00", "\x01", "\x1b", "\x7f", "\u200b", "\u200d", "\ufeff", "\ue000", "\U000f0000",
	"<sentinel:12>", "IMGIMGABZ", "    ", "µ", "ǅ",
	// invalid UTF-8: values past U+10FFFF, surrogates, overlong forms,
	// truncated and stray bytes
	"\xf7\xbf\xbf\xbf", "\xf4\x90\x80\x80", "\xed\xa0\x80", "\xc0\x80", "\xe4\xb8", "\x80", "\xff", "\xf8\x88\x80\x80\x80",
}

// corpus returns n random strings drawn from corpusAtoms and a few random
// code points, plus the pin's models/*.inp texts.
func corpus(t testing.TB, n int, rng *rand.Rand) []string {
	var out []string
	for i := 0; i < n; i++ {
		k := 1 + rng.Intn(12)
		var b strings.Builder
		for j := 0; j < k; j++ {
			switch r := rng.Intn(20); {
			case r == 0:
				b.WriteRune(rune(0x80 + rng.Intn(0x3000)))
			case r == 1:
				b.WriteRune(rune(0x10000 + rng.Intn(0x20000)))
			default:
				b.WriteString(corpusAtoms[rng.Intn(len(corpusAtoms))])
			}
		}
		out = append(out, b.String())
	}
	return append(out, inpTexts(t)...)
}

// inpTexts are the inputs of the pin's tokenizer test files.
func inpTexts(t testing.TB) []string {
	src := testenv.SourceTree(t)
	files, _ := filepath.Glob(filepath.Join(src, "models", "*.inp"))
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range strings.Split(string(b), "\n__ggml_vocab_test__\n") {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

func TestTablesAgainstCxx(t *testing.T) {
	t.Parallel()
	bin := oracle(t)
	r := &rbuf{b: runOracle(t, bin, "tables", nil)}
	bad := 0
	for c := uint32(0); c < 0x110010; c++ {
		f, lo, nfd, han := Flags(r.u16()), r.u32(), r.u32(), r.u8() != 0
		enc := string(r.take(int(r.u8())))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := FlagsOf(c); got != f {
			t.Errorf("FlagsOf(0x%X) = 0x%X, llama.cpp 0x%X", c, got, f)
			bad++
		}
		if got := ToLower(c); got != lo {
			t.Errorf("ToLower(0x%X) = 0x%X, llama.cpp 0x%X", c, got, lo)
			bad++
		}
		if got := NFD([]uint32{c})[0]; got != nfd {
			t.Errorf("NFD(0x%X) = 0x%X, llama.cpp 0x%X", c, got, nfd)
			bad++
		}
		if got := IsHan(c); got != han {
			t.Errorf("IsHan(0x%X) = %v, llama.cpp %v", c, got, han)
			bad++
		}
		if got := CptToUTF8(c); got != enc {
			t.Errorf("CptToUTF8(0x%X) = %q, llama.cpp %q", c, got, enc)
			bad++
		}
		if got := string(AppendUTF8([]byte("x"), c)); got != "x"+enc {
			t.Errorf("AppendUTF8(x, 0x%X) = %q, llama.cpp x%q", c, got, enc)
			bad++
		}
		if bad > 20 {
			t.Fatal("too many differences")
		}
	}
	for b := 0; b < 256; b++ {
		s := string(r.take(int(r.u8())))
		if got := ByteToUTF8(byte(b)); got != s {
			t.Errorf("ByteToUTF8(0x%02X) = %q, llama.cpp %q", b, got, s)
		}
		if got, ok := UTF8ToByte(s); !ok || got != byte(b) {
			t.Errorf("UTF8ToByte(%q) = 0x%02X, %v; want 0x%02X", s, got, ok, b)
		}
	}
	if r.err != nil || len(r.b) != 0 {
		t.Fatalf("oracle output: %v, %d bytes left", r.err, len(r.b))
	}
	if _, ok := UTF8ToByte("a\x00"); ok {
		t.Errorf("UTF8ToByte of a text that is no byte's succeeded")
	}
}

// randomBytes is a byte string biased to UTF-8 lead and continuation bytes.
func randomBytes(rng *rand.Rand) string {
	n := rng.Intn(16)
	b := make([]byte, n)
	for i := range b {
		switch rng.Intn(4) {
		case 0:
			b[i] = byte(rng.Intn(0x80))
		case 1:
			b[i] = 0x80 | byte(rng.Intn(0x40))
		case 2:
			b[i] = 0xC0 | byte(rng.Intn(0x40))
		default:
			b[i] = byte(rng.Intn(256))
		}
	}
	return string(b)
}

func TestDecodeAgainstCxx(t *testing.T) {
	t.Parallel()
	bin := oracle(t)
	rng := rand.New(rand.NewSource(1))
	var texts []string
	for i := 0; i < 3000; i++ {
		texts = append(texts, randomBytes(rng))
	}
	texts = append(texts, corpus(t, 500, rng)...)
	var in wbuf
	in.u32(len(texts))
	for _, s := range texts {
		in.str(s)
	}
	r := &rbuf{b: runOracle(t, bin, "decode", in.Bytes())}
	for _, s := range texts {
		n := int(r.u32())
		want := make([]uint32, n)
		for i := range want {
			want[i] = r.u32()
		}
		if got := CptsFromUTF8(s); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("CptsFromUTF8(%q) = %X, llama.cpp %X", s, got, want)
		}
		for off := 0; off < len(s); off++ {
			ok, c, next := r.u8() != 0, r.u32(), int(r.u32())
			gc, gn, err := CptFromUTF8(s, off)
			if (err == nil) != ok || ok && (gc != c || gn != next) {
				t.Errorf("CptFromUTF8(%q, %d) = 0x%X, %d, %v; llama.cpp 0x%X, %d, ok %v", s, off, gc, gn, err, c, next, ok)
			}
		}
		ok, f := r.u8() != 0, Flags(r.u16())
		if got := FlagsOfUTF8(s); ok && got != f || !ok && got != Undefined {
			t.Errorf("FlagsOfUTF8(%q) = 0x%X, llama.cpp 0x%X (ok %v)", s, got, f, ok)
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	if len(r.b) != 0 {
		t.Fatalf("oracle output: %d bytes left", len(r.b))
	}
	t.Logf("%d byte strings decoded as llama.cpp does", len(texts))
}

// compareSplit holds RegexSplit to the oracle for the list exprs over texts.
func compareSplit(t *testing.T, bin string, exprs []string, texts []string, byteEncode bool) {
	var in wbuf
	in.u32(len(exprs))
	for _, e := range exprs {
		in.str(e)
	}
	if byteEncode {
		in.WriteByte(1)
	} else {
		in.WriteByte(0)
	}
	in.u32(len(texts))
	for _, s := range texts {
		in.str(s)
	}
	r := &rbuf{b: runOracle(t, bin, "split", in.Bytes())}
	bad := 0
	for _, s := range texts {
		status := r.u32()
		var want []string
		var msg string
		if status == 0 {
			want = make([]string, r.u32())
			for i := range want {
				want[i] = r.str()
			}
		} else {
			msg = r.str()
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		got, err := RegexSplit(s, exprs, byteEncode)
		switch {
		case status != 0 && err == nil:
			t.Errorf("RegexSplit(%q) = %q, llama.cpp throws %q", s, got, msg)
			bad++
		case status == 0 && err != nil:
			t.Errorf("RegexSplit(%q): %v; llama.cpp %q", s, err, want)
			bad++
		case status == 0 && !equalWords(got, want):
			t.Errorf("RegexSplit(%q)\n got %q\nwant %q", s, got, want)
			bad++
		}
		if bad >= 5 {
			t.Fatalf("stopping after %d differences", bad)
		}
	}
}

func equalWords(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// isCustom reports whether every pattern of exprs has a hand-written
// splitter in unicode.cpp (the oracle is fast on those).
func isCustom(exprs []string) bool {
	for _, e := range exprs {
		switch e {
		case reGPT2, reLlama3, reLlama3Alt, reQwen2, reQwen35, reKimiK2, reAFMoE, reTinyAyaDig, reNewlines:
		default:
			return false
		}
	}
	return true
}

// TestSplitAgainstCxx holds RegexSplit to llama.cpp's unicode_regex_split
// for every distinct list of PreRegexes, with the list's own byte
// encoding, over random text of every kind, random bytes (invalid UTF-8
// included), the empty text and the pin's models/*.inp inputs. The lists
// that std::regex runs get fewer random texts: the C++ compiles its
// patterns on every call.
func TestSplitAgainstCxx(t *testing.T) {
	bin := oracle(t)
	rng := rand.New(rand.NewSource(2))
	inp := inpTexts(t)
	random := corpus(t, 1500, rng)[:1500]
	var invalid []string
	for i := 0; i < 300; i++ {
		invalid = append(invalid, randomBytes(rng))
	}
	byList := map[string][]string{}
	for _, name := range sortedKeys(PreRegexes) {
		k := strings.Join(PreRegexes[name], "\x00") + fmt.Sprint(PreRawUTF8[name])
		byList[k] = append(byList[k], name)
	}
	total := 0
	for _, k := range sortedKeys(byList) {
		names := byList[k]
		exprs := PreRegexes[names[0]]
		n := 250
		if isCustom(exprs) {
			n = len(random)
		}
		texts := append(append(append([]string{""}, random[:n]...), invalid[:n/5]...), inp...)
		total += len(texts)
		t.Run(names[0], func(t *testing.T) {
			t.Parallel()
			compareSplit(t, bin, exprs, texts, !PreRawUTF8[names[0]])
			t.Logf("%d texts, the list of %s", len(texts), strings.Join(names, " "))
		})
	}
	t.Logf("%d distinct lists for %d pre-tokenizer types, %d texts in all", len(byList), len(PreRegexes), total)
}

// TestSplitComparisonFindsDifferences is the negative control of
// compareSplit's decoding: the oracle's answers for one list are not
// RegexSplit's for another.
func TestSplitComparisonFindsDifferences(t *testing.T) {
	t.Parallel()
	bin := oracle(t)
	texts := []string{"Hello world's 12345 numbers", "a  b\n\n c"}
	var in wbuf
	in.u32(1)
	in.str(PreRegexes["GPT2"][0])
	in.WriteByte(1)
	in.u32(len(texts))
	for _, s := range texts {
		in.str(s)
	}
	r := &rbuf{b: runOracle(t, bin, "split", in.Bytes())}
	differ := 0
	for _, s := range texts {
		if r.u32() != 0 {
			t.Fatalf("oracle failed on %q: %s", s, r.str())
		}
		want := make([]string, r.u32())
		for i := range want {
			want[i] = r.str()
		}
		gpt2, err := RegexSplit(s, PreRegexes["GPT2"], true)
		if err != nil || !equalWords(gpt2, want) {
			t.Errorf("GPT2 list: %q, %v; oracle %q", gpt2, err, want)
		}
		llama3, _ := RegexSplit(s, PreRegexes["LLAMA3"], true)
		if !equalWords(llama3, want) {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("the LLAMA3 list split every text as the GPT2 list does")
	}
}
