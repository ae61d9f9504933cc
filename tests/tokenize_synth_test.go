package tests

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
)

// Vocabularies of the tokenizer types the pin's models/ directory has no
// file of (UGM, RWKV, PLaMo-2), written with ggload's GGUF writer as the
// pin's converters write them: the tokenizer keys, and the
// hyperparameters of an architecture that uses the tokenizer (solved by
// lab/synth against llama.cpp's load_hparams), no tensors. Both sides load
// the vocabulary only.

// synthVocab is one synthesized vocabulary: its name, the architecture
// its file declares and its tokenizer keys.
type synthVocab struct {
	name string
	arch string
	kv   func(src string) ([]gguf.KV, error)
}

var synthVocabs = []synthVocab{
	{"synth-ugm-t5", "t5", ugmT5KV},
	{"synth-ugm-empty-charsmap", "t5", ugmSmallKV(true)},
	{"synth-ugm-no-charsmap", "t5encoder", ugmSmallKV(false)},
	{"synth-rwkv", "rwkv6", rwkvKV},
	{"synth-plamo2", "plamo2", plamo2KV},
}

// synthVocabFile writes the vocabulary's file into dir and returns its
// path.
func synthVocabFile(t testing.TB, dir, src string, sv synthVocab) string {
	t.Helper()
	kv, err := sv.kv(src)
	if err != nil {
		t.Fatalf("%s: %v", sv.name, err)
	}
	// the tokenizer alone, for the architecture's solver to read
	tok := gguf.NewWriter()
	for _, e := range kv {
		if err := tok.Set(e.Key, e.Value); err != nil {
			t.Fatalf("%s: %s: %v", sv.name, e.Key, err)
		}
	}
	tokPath := filepath.Join(dir, sv.name+"-tokenizer.gguf")
	if err := tok.WriteFile(tokPath); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	am, err := synth.NewArchModel(sv.arch, f, synth.ArchOptions{Layers: 1})
	if err != nil {
		t.Fatalf("%s: %s: %v", sv.name, sv.arch, err)
	}
	w := gguf.NewWriter()
	for _, e := range am.KV {
		if strings.HasPrefix(e.Key, "tokenizer.") {
			continue
		}
		if err := w.Set(e.Key, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range kv {
		if err := w.Set(e.Key, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, sv.name+".gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Token types of tokenizer.ggml.token_type (llama_token_type).
const (
	ttNormal      = 1
	ttUnknown     = 2
	ttControl     = 3
	ttUserDefined = 4
	ttUnused      = 5
	ttByte        = 6
)

// tokenizerKV makes the tokenizer keys of a vocabulary.
type tokenizerKV struct {
	kv []gguf.KV
}

func (b *tokenizerKV) set(key string, v any) error {
	var val gguf.Value
	switch x := v.(type) {
	case gguf.Value:
		val = x
	case string:
		val = gguf.String(x)
	case bool:
		val = gguf.Bool(x)
	case uint32:
		val = gguf.Uint32(x)
	default:
		a, err := gguf.Array(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		val = a
	}
	b.kv = append(b.kv, gguf.KV{Key: key, Value: val})
	return nil
}

// tokenList accumulates tokens, their scores and types, once each.
type tokenList struct {
	texts  []string
	scores []float32
	types  []int32
	seen   map[string]bool
}

func (l *tokenList) add(text string, score float32, typ int32) {
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if text == "" || l.seen[text] {
		return
	}
	l.seen[text] = true
	l.texts = append(l.texts, text)
	l.scores = append(l.scores, score)
	l.types = append(l.types, typ)
}

func (l *tokenList) keys(b *tokenizerKV) error {
	for _, e := range []struct {
		k string
		v any
	}{{"tokenizer.ggml.tokens", l.texts}, {"tokenizer.ggml.scores", l.scores}, {"tokenizer.ggml.token_type", l.types}} {
		if err := b.set(e.k, e.v); err != nil {
			return err
		}
	}
	return nil
}

// ugmCharsmap is the normalization of the synthesized T5-like vocabulary:
// prefixes (several code points, overlapping keys, an ASCII key inside a
// longer one) and their replacements (empty ones too).
var ugmCharsmap = map[string]string{
	"\u00a0": " ", "\u3000": " ", "\u2002": " ", "\t": " ", "\r\n": "\n",
	"Ａ": "A", "Ｂ": "B", "ａ": "a", "１": "1", "ﬁ": "fi", "ﬂ": "fl",
	"…": "...", "™": "TM", "①": "1", "e\u0301": "é", "A\u030a": "Å",
	"\u200b": "", "\u00ad": "", "ab": "AB", "abc": "y", "“": "\"", "”": "\"",
	"’": "'", "Ⅳ": "IV", "㎏": "kg", "ｶ": "カ", "ｶﾞ": "ガ", "ß": "ss",
}

// charsmap builds a precompiled charsmap as sentencepiece writes one: the
// byte size of an XOR-compressed double array (darts-clone's units: the
// label in bits 0-7, has-leaf in bit 8, the offset to the children in bits
// 10-30, a value unit's bit 31 set) whose keys are m's, then the
// replacements, each NUL-terminated, a key's value being the offset of
// its replacement.
func charsmap(m map[string]string) []byte {
	type node struct {
		kids     map[byte]*node
		terminal bool
		value    uint32
		index    uint32
	}
	root := &node{kids: map[byte]*node{}}
	var repl []byte
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := root
		for i := 0; i < len(k); i++ {
			c := n.kids[k[i]]
			if c == nil {
				c = &node{kids: map[byte]*node{}}
				n.kids[k[i]] = c
			}
			n = c
		}
		n.terminal, n.value = true, uint32(len(repl))
		repl = append(append(repl, m[k]...), 0)
	}
	var units []uint32
	used := map[uint32]bool{0: true}
	bases := map[uint32]bool{}
	grow := func(i uint32) {
		for uint32(len(units)) <= i {
			units = append(units, 0)
		}
	}
	grow(0)
	queue := []*node{root}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		var labels []byte
		if n.terminal {
			labels = append(labels, 0)
		}
		for c := range n.kids {
			labels = append(labels, c)
		}
		slices.Sort(labels)
		base := uint32(1)
	search:
		for ; ; base++ {
			if bases[base] {
				continue
			}
			for _, c := range labels {
				if i := base ^ uint32(c); i == 0 || used[i] {
					continue search
				}
			}
			break
		}
		bases[base] = true
		grow(base | 0xff) // every probe from this base stays in the array
		units[n.index] |= (n.index ^ base) << 10
		if n.terminal {
			units[n.index] |= 1 << 8
		}
		for _, c := range labels {
			i := base ^ uint32(c)
			used[i] = true
			if c == 0 {
				units[i] = 1<<31 | n.value
				continue
			}
			units[i] = uint32(c)
			k := n.kids[c]
			k.index = i
			queue = append(queue, k)
		}
	}
	out := binary.LittleEndian.AppendUint32(nil, uint32(4*len(units)))
	for _, u := range units {
		out = binary.LittleEndian.AppendUint32(out, u)
	}
	return append(out, repl...)
}

// ugmT5KV is a T5-like unigram vocabulary: the pieces and scores of the
// pin's llama-spm vocabulary (sentencepiece's, as T5's are), sentinel
// control tokens, user-defined tokens, unused ones, and a charsmap.
func ugmT5KV(src string) ([]gguf.KV, error) {
	f, err := gguf.Open(filepath.Join(src, "models", "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tv, _ := f.Lookup("tokenizer.ggml.tokens")
	texts, err := tv.Strings()
	if err != nil {
		return nil, err
	}
	sv, _ := f.Lookup("tokenizer.ggml.scores")
	scores, err := sv.Floats()
	if err != nil {
		return nil, err
	}
	var l tokenList
	l.add("<pad>", 0, ttControl)
	l.add("</s>", 0, ttControl)
	l.add("<unk>", 0, ttUnknown)
	for i, s := range texts {
		if strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
			continue // <unk>, <s>, </s> and the byte tokens
		}
		l.add(s, float32(scores[i]), ttNormal)
	}
	for i := range 4 {
		l.add(fmt.Sprintf("<extra_id_%d>", i), 0, ttControl)
	}
	for _, s := range []string{"<br>", "▁▁", "ﬁ", "<sep/>"} {
		l.add(s, 0, ttUserDefined)
	}
	l.add("<unused_0>", 0, ttUnused)
	var b tokenizerKV
	for _, e := range []struct {
		k string
		v any
	}{
		{"tokenizer.ggml.model", "t5"}, {"tokenizer.ggml.pre", "default"},
		{"tokenizer.ggml.eos_token_id", uint32(1)}, {"tokenizer.ggml.unknown_token_id", uint32(2)},
		{"tokenizer.ggml.padding_token_id", uint32(0)},
		{"tokenizer.ggml.add_bos_token", false}, {"tokenizer.ggml.add_eos_token", true},
		{"tokenizer.ggml.add_space_prefix", true}, {"tokenizer.ggml.remove_extra_whitespaces", true},
		{"tokenizer.ggml.precompiled_charsmap", charsmap(ugmCharsmap)},
	} {
		if err := b.set(e.k, e.v); err != nil {
			return nil, err
		}
	}
	return b.kv, l.keys(&b)
}

// smallPieces are the pieces of the small synthesized vocabularies.
var smallPieces = []string{
	"the", "and", "ing", "ion", "er", "re", "in", "on", "an", "th", "he", "Hello", "world", "llama", "cpp",
	"func", "return", "int", "if", "for", "==", "!=", "->", "::", "()", "{", "}", "//", "/*", "*/",
	"我", "想", "在", "工作", "天", "日本", "語", "한국", "어", "мир", "при", "вет", "γει", "ά", "σου",
	"ñ", "é", "ü", "ç", "ß", "😀", "🦙", "\u200d", "️", "ก", "า", "्", "न", "م", "ر", "ح", "ب", "א", "ב",
}

// ugmSmallKV is a small unigram vocabulary: the ASCII characters, the
// smallPieces with and without the space mark, a user-defined token;
// with an empty double array in its charsmap, or without a charsmap, and
// with the whitespace options the T5-like one leaves at their defaults.
func ugmSmallKV(emptyCharsmap bool) func(string) ([]gguf.KV, error) {
	return func(string) ([]gguf.KV, error) {
		var l tokenList
		l.add("<pad>", 0, ttControl)
		l.add("</s>", 0, ttControl)
		l.add("<unk>", 0, ttUnknown)
		l.add("▁", -2, ttNormal)
		for c := byte(' ') + 1; c < 0x7f; c++ {
			l.add(string(c), -5-float32(c%7)/3, ttNormal)
		}
		for i, p := range smallPieces {
			l.add("▁"+p, -3-float32(i%11)/4, ttNormal)
			l.add(p, -4-float32(i%5)/3, ttNormal)
		}
		l.add("<mask>", 0, ttUserDefined)
		l.add("▁▁", -1, ttUnused)
		var b tokenizerKV
		kv := []struct {
			k string
			v any
		}{
			{"tokenizer.ggml.model", "t5"},
			{"tokenizer.ggml.bos_token_id", uint32(1)},
		}
		if emptyCharsmap {
			// no double array: the replacements' section alone
			kv = append(kv, struct {
				k string
				v any
			}{"tokenizer.ggml.precompiled_charsmap", []uint8{0, 0, 0, 0, 0}},
				struct {
					k string
					v any
				}{"tokenizer.ggml.add_space_prefix", false})
		} else {
			kv = append(kv, struct {
				k string
				v any
			}{"tokenizer.ggml.remove_extra_whitespaces", false})
		}
		for _, e := range kv {
			if err := b.set(e.k, e.v); err != nil {
				return nil, err
			}
		}
		return b.kv, l.keys(&b)
	}
}

// rwkvEscape writes a token's bytes as the pin's converter does
// (Python's repr of bytes, without the b” around it).
func rwkvEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			sb.WriteString(`\\`)
		case c == '\'':
			sb.WriteString(`\'`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// rwkvKV is an RWKV "world" vocabulary: <s>, every byte, multi-byte
// tokens (words, pieces of other scripts, whitespace runs, pieces that
// end inside a UTF-8 sequence), padding tokens.
func rwkvKV(string) ([]gguf.KV, error) {
	var l tokenList
	l.add("<s>", 0, ttControl)
	for c := 0; c < 256; c++ {
		l.add(rwkvEscape(string([]byte{byte(c)})), 0, ttNormal)
	}
	for _, p := range smallPieces {
		l.add(rwkvEscape(p), 0, ttNormal)
		l.add(rwkvEscape(" "+p), 0, ttNormal)
		if len(p) > 2 {
			l.add(rwkvEscape(p[:len(p)-1]), 0, ttNormal) // may cut a code point
		}
	}
	for _, p := range []string{"  ", "    ", "\n\n", "\r\n", "\t\t", " \n", "\\n", "'s", "\"", "Hello world", "<s"} {
		l.add(rwkvEscape(p), 0, ttNormal)
	}
	n := len(l.texts)
	for i := n; i < n+5; i++ {
		l.add(fmt.Sprintf("[PAD%d]", i), 0, ttUnused)
	}
	var b tokenizerKV
	if err := b.set("tokenizer.ggml.model", "rwkv"); err != nil {
		return nil, err
	}
	if err := b.set("tokenizer.ggml.pre", "rwkv-world"); err != nil {
		return nil, err
	}
	if err := b.set("tokenizer.ggml.tokens", l.texts); err != nil {
		return nil, err
	}
	return b.kv, b.set("tokenizer.ggml.token_type", l.types)
}

// plamo2KV is a PLaMo-2 vocabulary: its special tokens, the 256 byte
// tokens, pieces with log-probability scores.
func plamo2KV(string) ([]gguf.KV, error) {
	var l tokenList
	l.add("<|plamo:unk|>", 0, ttUnknown)
	l.add("<|plamo:bos|>", 0, ttControl)
	l.add("<|plamo:eos|>", 0, ttControl)
	l.add("<|plamo:pad|>", 0, ttControl)
	for c := 0; c < 256; c++ {
		l.add(fmt.Sprintf("<0x%02X>", c), 0, ttByte)
	}
	for i, p := range smallPieces {
		l.add(p, -6-float32(i%13)/3, ttNormal)
		l.add(" "+p, -5-float32(i%7)/2, ttNormal)
	}
	for c := byte(' '); c < 0x7f; c++ {
		l.add(string(c), -8-float32(c%5)/4, ttNormal)
	}
	for _, p := range []string{"\n", "\n\n", "  ", "    ", "\t"} {
		l.add(p, -7, ttNormal)
	}
	l.add("[PAD1]", -1000, ttUnused)
	var b tokenizerKV
	for _, e := range []struct {
		k string
		v any
	}{
		{"tokenizer.ggml.model", "plamo2"}, {"tokenizer.ggml.pre", "default"},
		{"tokenizer.ggml.bos_token_id", uint32(1)}, {"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.padding_token_id", uint32(3)}, {"tokenizer.ggml.add_bos_token", true},
	} {
		if err := b.set(e.k, e.v); err != nil {
			return nil, err
		}
	}
	return b.kv, l.keys(&b)
}
