// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llama_vocab::impl::load
// and init_tokenizer.

package vocab

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/vocab/internal/unicode"
)

// The metadata keys llama_vocab::impl::load reads.
const (
	keyModel          = "tokenizer.ggml.model"
	keyPre            = "tokenizer.ggml.pre"
	keyTokens         = "tokenizer.ggml.tokens"
	keyTokenType      = "tokenizer.ggml.token_type"
	keyTokenTypeCount = "tokenizer.ggml.token_type_count"
	keyScores         = "tokenizer.ggml.scores"
	keyMerges         = "tokenizer.ggml.merges"
	keyAddBOS         = "tokenizer.ggml.add_bos_token"
	keyAddEOS         = "tokenizer.ggml.add_eos_token"
	keyAddSEP         = "tokenizer.ggml.add_sep_token"
	keyAddPrefix      = "tokenizer.ggml.add_space_prefix"
	keyRemoveExtraWS  = "tokenizer.ggml.remove_extra_whitespaces"
	keyCharsmap       = "tokenizer.ggml.precompiled_charsmap"
	keyLowercase      = "tokenizer.ggml.normalizer.lowercase"
	keyStripAccents   = "tokenizer.ggml.normalizer.strip_accents"
	keySuppress       = "tokenizer.ggml.suppress_tokens"
	keyName           = "general.name"
	keyArch           = "general.architecture"
)

// dnaMarker is the suffix (U+E000) that keeps the DNA k-mers of a
// hybriddna vocabulary apart from equal BPE tokens in the text-to-id map.
const dnaMarker = "\xee\x80\x80"

// Open loads the vocabulary of the GGUF file at path from its metadata
// alone, as llama.cpp's vocab_only load does.
func Open(path string) (*Vocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return load(f, path)
}

// Load loads the vocabulary of an opened model (from the metadata of its
// first file).
func Load(m *gguf.Model) (*Vocab, error) {
	if m == nil || len(m.Files) == 0 {
		return nil, (&Vocab{}).errorf("no model")
	}
	path := ""
	if len(m.Paths) > 0 {
		path = m.Paths[0]
	}
	if path == "" {
		path = m.Files[0].Path
	}
	return load(m.Files[0], path)
}

// loader reads typed keys as llama_model_loader::get_key does.
type loader struct {
	f *gguf.File
	v *Vocab
}

func (l *loader) lookup(key string) (gguf.Value, bool) { return l.f.Lookup(key) }

// wrongType is get_key's error for a key of another type.
func (l *loader) wrongType(key string, got gguf.Value, want gguf.ValueType) error {
	return l.v.errorf("key %s has wrong type %s but expected type %s", key, got.Kind(), want)
}

func (l *loader) str(key string) (string, bool, error) {
	val, ok := l.lookup(key)
	if !ok {
		return "", false, nil
	}
	s, isStr := val.Str()
	if !isStr {
		return "", false, l.wrongType(key, val, gguf.TypeString)
	}
	return s, true, nil
}

func (l *loader) u32(key string) (uint32, bool, error) {
	val, ok := l.lookup(key)
	if !ok {
		return 0, false, nil
	}
	if val.Kind() != gguf.TypeUint32 {
		return 0, false, l.wrongType(key, val, gguf.TypeUint32)
	}
	u, _ := val.Uint()
	return uint32(u), true, nil
}

func (l *loader) boolean(key string) (bool, bool, error) {
	val, ok := l.lookup(key)
	if !ok {
		return false, false, nil
	}
	b, isBool := val.Bool()
	if !isBool {
		return false, false, l.wrongType(key, val, gguf.TypeBool)
	}
	return b, true, nil
}

// setBool sets *dst from a bool key when present.
func (l *loader) setBool(key string, dst *bool) error {
	b, ok, err := l.boolean(key)
	if ok {
		*dst = b
	}
	return err
}

// array checks that key holds an array of one of the element types.
func (l *loader) array(key string, elems ...gguf.ValueType) (gguf.Value, bool, error) {
	val, ok := l.lookup(key)
	if !ok {
		return val, false, nil
	}
	if !val.IsArray() || !slices.Contains(elems, val.ElemType()) {
		return val, false, l.v.errorf("invalid gguf type for %s", key)
	}
	return val, true, nil
}

func load(f *gguf.File, path string) (*Vocab, error) {
	v := &Vocab{
		path: path, typ: TypeSPM, preType: preDefault,
		bos: 1, eos: 2, eot: Null, eom: Null, unk: 0, sep: Null, pad: Null, mask: Null, nl: 13,
		fimPre: Null, fimSuf: Null, fimMid: Null, fimPad: Null, fimRep: Null, fimSep: Null,
		escapeWS: true, lowercase: true,
	}
	for i := range v.byteTok {
		v.byteTok[i], v.hexTok[i] = Null, Null
	}
	l := &loader{f: f, v: v}
	var err error
	var charsmap []byte

	var ok bool
	if v.model, ok, err = l.str(keyModel); err != nil {
		return nil, err
	} else if !ok {
		return nil, v.errorf("key not found in model: %s", keyModel)
	}
	if v.pre, _, err = l.str(keyPre); err != nil {
		return nil, err
	}
	if _, _, err = l.u32(keyTokenTypeCount); err != nil {
		return nil, err
	}

	switch v.model {
	case "no_vocab", "none":
		return v.loadNone(l)
	case "llama":
		v.typ = TypeSPM
		v.bos, v.eos, v.unk, v.sep, v.pad, v.mask = 1, 2, 0, Null, Null, Null
	case "bert":
		v.typ = TypeWPM
		v.bos, v.eos, v.unk, v.sep, v.pad, v.mask = 101, Null, 100, 102, 0, 103
		v.addSEP = true
	case "gpt2", "hybriddna", "whitespace", "gemma4":
		v.typ = TypeBPE
		if err := v.loadMerges(l, v.model != "gemma4" && v.pre == "kimi-k2"); err != nil {
			return nil, err
		}
		if v.model == "gemma4" {
			v.bos, v.eos, v.unk, v.sep, v.pad, v.mask = Null, Null, Null, Null, Null, Null
			v.pre = "gemma4"
		} else {
			v.bos, v.eos, v.unk, v.sep, v.pad, v.mask = 11, 11, Null, Null, Null, Null
		}
	case "t5":
		v.typ = TypeUGM
		v.bos, v.eos, v.unk, v.sep, v.pad, v.mask = Null, 1, 2, Null, 0, Null
		if charsmap, err = v.loadCharsmap(l); err != nil {
			return nil, err
		}
	case "rwkv":
		v.typ = TypeRWKV
		v.bos, v.eos, v.unk, v.sep, v.pad = Null, Null, Null, Null, Null
	case "test":
		v.typ = TypeTest
		v.bos, v.eos, v.unk, v.sep, v.pad, v.mask = Null, Null, Null, Null, Null, Null
	case "plamo2":
		v.typ = TypePLaMo2
		v.bos, v.eos, v.unk, v.sep, v.pad, v.mask = 1, 2, 0, Null, 3, Null
	default:
		return nil, v.errorf("unknown tokenizer: '%s'", v.model)
	}

	switch v.typ {
	case TypeBPE:
		v.addSpacePrefix, v.escapeWS, v.cleanSpaces = false, false, true
		r, ok := preRules[v.pre]
		if !ok {
			return nil, v.errorf("unknown pre-tokenizer type: '%s'", v.pre)
		}
		v.preType = r.typ
		switch r.cleanSpaces {
		case -1:
			v.cleanSpaces = false
		case 1:
			v.cleanSpaces = true
		}
		v.ignoreMerges = v.ignoreMerges || r.ignoreMerges
		v.addBOS = v.addBOS || r.addBOS
		v.addSEP = v.addSEP || r.addSEP
		v.escapeWS = v.escapeWS || r.escapeWS
		if r.nullBOS {
			v.bos = Null
		}
		if r.noLowercase {
			v.lowercase = false
		}
	case TypeSPM:
		v.addSpacePrefix, v.cleanSpaces, v.addBOS, v.addEOS = true, false, true, false
	case TypeWPM:
		v.addSpacePrefix, v.cleanSpaces, v.addBOS, v.addEOS, v.addSEP = false, true, true, false, true
	case TypeUGM:
		v.addBOS, v.addEOS = false, true
	case TypeRWKV:
		v.addSpacePrefix, v.cleanSpaces, v.addBOS, v.addEOS = false, false, false, false
	}
	if err := l.setBool(keyAddPrefix, &v.addSpacePrefix); err != nil {
		return nil, err
	}
	if err := l.setBool(keyRemoveExtraWS, &v.removeExtraWS); err != nil {
		return nil, err
	}

	if err := v.loadTokens(l); err != nil {
		return nil, err
	}
	if err := v.initTokenizer(charsmap); err != nil {
		return nil, err
	}
	if err := v.findNewline(); err != nil {
		return nil, err
	}
	if err := v.loadSpecial(l); err != nil {
		return nil, err
	}
	v.buildSpecialCache()
	if err := v.buildPieces(); err != nil {
		return nil, err
	}
	if err := v.fixAttrs(l); err != nil {
		return nil, err
	}
	return v, nil
}

// loadNone is the "no_vocab" branch: no tokenizer, optionally dummy tokens.
func (v *Vocab) loadNone(l *loader) (*Vocab, error) {
	v.typ = TypeNone
	v.bos, v.eos, v.unk, v.sep, v.pad, v.mask, v.nl = Null, Null, Null, Null, Null, Null, Null
	arch, _, err := l.str(keyArch)
	if err != nil {
		return nil, err
	}
	n, ok, err := l.u32(arch + ".vocab_size")
	if err != nil {
		return nil, err
	}
	if ok {
		v.texts = make([]string, n)
		v.scores = make([]float32, n)
		v.attrs = make([]Attr, n)
	}
	v.pieceOff = make([]uint32, len(v.texts)+1)
	return v, nil
}

// loadMerges reads tokenizer.ggml.merges into the BPE ranks; optional says
// a missing key is allowed (Kimi-K2).
func (v *Vocab) loadMerges(l *loader, optional bool) error {
	val, ok := l.lookup(keyMerges)
	if !ok {
		if optional {
			v.ranks = map[string]int32{}
			return nil
		}
		return v.errorf("cannot find tokenizer merges in model file")
	}
	if !val.IsArray() || val.ElemType() != gguf.TypeString {
		return v.errorf("invalid gguf type for %s", keyMerges)
	}
	merges, err := val.Strings()
	if err != nil {
		return v.errorf("%s: %v", keyMerges, err)
	}
	// gguf_get_arr_n is read into an int
	n := int(int32(uint32(len(merges))))
	// Keyed by the whole line: a lookup of two texts without spaces joined
	// by one space finds exactly the line the pin's (first, second) split
	// would find; the other lines the pin stores can never be looked up.
	v.ranks = make(map[string]int32, max(n, 0))
	for i := 0; i < n; i++ {
		w := merges[i]
		if len(w) < 2 || strings.IndexByte(w[1:], ' ') < 0 {
			continue
		}
		if _, dup := v.ranks[w]; !dup { // emplace keeps the first rank
			v.ranks[w] = int32(i)
		}
	}
	return nil
}

// loadCharsmap reads the UGM precompiled character map.
func (v *Vocab) loadCharsmap(l *loader) ([]byte, error) {
	val, ok, err := l.array(keyCharsmap, gguf.TypeInt8, gguf.TypeUint8)
	if err != nil || !ok {
		if err == nil {
			if _, present := l.lookup(keyCharsmap); present {
				err = v.errorf("invalid gguf type for %s", keyCharsmap)
			}
		}
		return nil, err
	}
	b, err := val.ArrayBytes()
	if err != nil {
		return nil, v.errorf("%s: %v", keyCharsmap, err)
	}
	if len(b) < 4 {
		return nil, v.errorf("%s: precompiled_charsmap too small for xcda_blob_size header!", keyCharsmap)
	}
	if uint64(binary.LittleEndian.Uint32(b))+4 >= uint64(len(b)) {
		return nil, v.errorf("%s: Index out of array bounds in precompiled charsmap!", keyCharsmap)
	}
	return b, nil
}

// loadTokens reads the token list, scores and types.
func (v *Vocab) loadTokens(l *loader) error {
	tv, ok := l.lookup(keyTokens)
	if !ok {
		return v.errorf("cannot find tokenizer vocab in model file")
	}
	if !tv.IsArray() || tv.ElemType() != gguf.TypeString {
		return v.errorf("invalid gguf type for %s", keyTokens)
	}
	n := uint32(tv.Len())
	if uint64(n) != tv.Len() || n > math.MaxInt32 {
		return v.errorf("%s: %d tokens is more than llama.cpp can index", keyTokens, tv.Len())
	}

	var scoreBytes []byte
	scoreInt := false
	if sv, ok := l.lookup(keyScores); ok {
		if !sv.IsArray() || (sv.ElemType() != gguf.TypeInt32 && sv.ElemType() != gguf.TypeFloat32) {
			return v.errorf("invalid gguf type for %s", keyScores)
		}
		if ns := uint32(sv.Len()); ns < n {
			return v.errorf("Index out of array bounds for scores (%d < %d)", ns, n)
		}
		b, err := sv.ArrayBytes()
		if err != nil {
			return v.errorf("%s: %v", keyScores, err)
		}
		scoreBytes, scoreInt = b, sv.ElemType() == gguf.TypeInt32
	}
	var typeBytes []byte
	if tt, ok := l.lookup(keyTokenType); ok {
		if !tt.IsArray() || tt.ElemType() != gguf.TypeInt32 {
			return v.errorf("invalid gguf type for %s", keyTokenType)
		}
		if nt := uint32(tt.Len()); nt < n {
			return v.errorf("Index out of array bounds for toktypes (%d < %d)", nt, n)
		}
		b, err := tt.ArrayBytes()
		if err != nil {
			return v.errorf("%s: %v", keyTokenType, err)
		}
		typeBytes = b
	}

	words, err := tv.Strings()
	if err != nil {
		return v.errorf("%s: %v", keyTokens, err)
	}
	words = words[:n]
	v.texts = words
	v.scores = make([]float32, n)
	v.attrs = make([]Attr, n)
	v.toID = make(map[string]Token, n)
	le := binary.LittleEndian
	for i := range n {
		w := words[i]
		if w == "" {
			w = "[EMPTY_" + strconv.Itoa(int(i)) + "]"
			words[i] = w
		}
		v.toID[w] = Token(i)
		if len(v.toID) != int(i)+1 {
			return v.errorf("%s: token %d (%q) repeats an earlier token's text (llama.cpp asserts id_to_token.size() == token_to_id.size())", keyTokens, i, w)
		}
		v.maxTokenLen = max(v.maxTokenLen, len(w))
		switch {
		case scoreBytes == nil:
		case scoreInt:
			v.scores[i] = float32(int32(le.Uint32(scoreBytes[4*i:])))
		default:
			v.scores[i] = math.Float32frombits(le.Uint32(scoreBytes[4*i:]))
		}
		a := AttrNormal
		if typeBytes != nil {
			switch int32(le.Uint32(typeBytes[4*i:])) {
			case 2:
				a = AttrUnknown
			case 5:
				a = AttrUnused
			case 1:
				a = AttrNormal
			case 3:
				a = AttrControl
			case 4:
				a = AttrUserDefined
			case 6:
				a = AttrByte
			default:
				a = AttrUndefined
			}
		}
		v.attrs[i] = a
	}

	if v.model == "hybriddna" {
		if oov, ok := v.toID["<oov>"]; ok {
			for i := int(oov) + 1; i < len(words); i++ {
				if w := words[i]; len(w) > len(dnaMarker) && strings.HasSuffix(w, dnaMarker) {
					words[i] = w[:len(w)-len(dnaMarker)]
				}
			}
		}
	}
	return nil
}

// initTokenizer is llama_vocab::impl::init_tokenizer: the per-type tables.
func (v *Vocab) initTokenizer(charsmap []byte) error {
	switch v.typ {
	case TypeBPE:
		v.byteEncode = v.preType.byteEncoded()
		exprs, ok := unicode.PreRegexes[string(v.preType)]
		if !ok || len(exprs) == 0 {
			return v.errorf("no pre-tokenizer expressions for %s in package unicode", v.preType)
		}
		v.regex = exprs
		for b := range 256 {
			if id, ok := v.toID[string([]byte{byte(b)})]; ok {
				v.byteTok[b] = id
			}
		}
	case TypeUGM:
		v.ugm = newUGM(v, charsmap)
	case TypeRWKV:
		v.rwkv = newTrie()
		var buf []byte
		for id, text := range v.texts {
			buf = unescapeRWKV(buf[:0], text)
			v.rwkv.insert(buf, Token(id))
		}
	case TypePLaMo2:
		t, err := newPLaMo2(v)
		if err != nil {
			return err
		}
		v.plamo2 = t
	}
	for b := range 256 {
		if id, ok := v.toID[hexByte(byte(b))]; ok {
			v.hexTok[b] = id
		}
	}
	return nil
}

// hexByte is "<0xXX>" for b.
func hexByte(b byte) string {
	const hex = "0123456789ABCDEF"
	return string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})
}

// findNewline sets the newline token as the load does.
func (v *Vocab) findNewline() error {
	switch v.typ {
	case TypeSPM:
		if id, ok := v.byteToToken('\n'); ok {
			v.nl = id
		} else {
			v.nl = v.pad
		}
	case TypeWPM:
		v.nl = v.pad
	case TypeRWKV:
		ids, err := v.Tokenize("\n", false, false)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return v.errorf("model vocab missing newline token")
		}
		v.nl = ids[0]
	default:
		ids, err := v.Tokenize("\n", false, false)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			v.nl = v.pad
		} else {
			v.nl = ids[0]
		}
	}
	return nil
}

// byteToToken is llama_vocab::byte_to_token; false where the pin's at()
// would throw.
func (v *Vocab) byteToToken(b byte) (Token, bool) {
	switch v.typ {
	case TypeSPM, TypeUGM:
		if id := v.hexTok[b]; id != Null {
			return id, true
		}
		id, ok := v.toID[string([]byte{b})]
		return id, ok
	case TypeWPM, TypeBPE:
		id, ok := v.toID[unicode.ByteToUTF8(b)]
		return id, ok
	case TypePLaMo2:
		id := v.hexTok[b]
		return id, id != Null
	case TypeTest:
		return Null, true
	}
	return Null, false
}

// The keys of the special token ids, in the order the load reads them.
var specialKeys = [...]string{
	"tokenizer.ggml.bos_token_id",
	"tokenizer.ggml.eos_token_id",
	"tokenizer.ggml.eot_token_id",
	"tokenizer.ggml.eom_token_id",
	"tokenizer.ggml.unknown_token_id",
	"tokenizer.ggml.seperator_token_id",
	"tokenizer.ggml.padding_token_id",
	"tokenizer.ggml.mask_token_id",
	"tokenizer.ggml.fim_pre_token_id",
	"tokenizer.ggml.fim_suf_token_id",
	"tokenizer.ggml.fim_mid_token_id",
	"tokenizer.ggml.fim_pad_token_id",
	"tokenizer.ggml.fim_rep_token_id",
	"tokenizer.ggml.fim_sep_token_id",
	"tokenizer.ggml.prefix_token_id",
	"tokenizer.ggml.suffix_token_id",
	"tokenizer.ggml.middle_token_id",
}

// loadSpecial reads the special ids and flags, detects special tokens by
// their text and builds the end-of-generation set.
func (v *Vocab) loadSpecial(l *loader) error {
	ids := [...]*Token{&v.bos, &v.eos, &v.eot, &v.eom, &v.unk, &v.sep, &v.pad, &v.mask,
		&v.fimPre, &v.fimSuf, &v.fimMid, &v.fimPad, &v.fimRep, &v.fimSep,
		&v.fimPre, &v.fimSuf, &v.fimMid}
	n := len(v.texts)
	for i, key := range specialKeys {
		id := ids[i]
		if *id >= 0 && int(*id) >= n {
			*id = Null
		}
		nid, ok, err := l.u32(key)
		if err != nil {
			return err
		}
		if ok && uint64(nid) < uint64(n) {
			*id = Token(nid)
		}
	}
	if err := l.setBool(keyAddBOS, &v.addBOS); err != nil {
		return err
	}
	if err := l.setBool(keyAddEOS, &v.addEOS); err != nil {
		return err
	}
	if err := l.setBool(keyAddSEP, &v.addSEP); err != nil {
		return err
	}
	if v.preType == "GEMMA4" {
		v.addBOS = true
	}
	if err := l.setBool(keyLowercase, &v.lowercase); err != nil {
		return err
	}
	v.stripAccents = v.lowercase
	if err := l.setBool(keyStripAccents, &v.stripAccents); err != nil {
		return err
	}
	if sv, ok, err := l.array(keySuppress, gguf.TypeInt32); err != nil {
		return err
	} else if ok {
		b, err := sv.ArrayBytes()
		if err != nil {
			return v.errorf("%s: %v", keySuppress, err)
		}
		cnt := int(int32(uint32(sv.Len())))
		for i := 0; i < cnt; i++ {
			if id := int32(binary.LittleEndian.Uint32(b[4*i:])); id >= 0 && int(id) < n {
				v.suppress = append(v.suppress, id)
			}
		}
	}

	v.detectSpecial()

	// unused: control tokens whose text says so
	for id, a := range v.attrs {
		if a&AttrControl != 0 && a&AttrUnused == 0 && strings.Contains(cstr(v.texts[id]), "unused") {
			v.attrs[id] = a | AttrUnused
		}
	}

	eog := map[Token]bool{}
	for _, id := range []Token{v.fimPad, v.fimRep, v.fimSep} {
		if id != Null {
			eog[id] = true
		}
	}
	for _, text := range eogTexts {
		if id, ok := v.toID[text]; ok {
			eog[id] = true
			v.attrs[id] |= AttrControl
		}
	}
	for _, text := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := v.toID[text]; ok {
			v.attrs[id] = AttrUserDefined
		}
	}
	for _, id := range []Token{v.eos, v.eot, v.eom} {
		if id != Null {
			eog[id] = true
		}
	}
	v.eog = v.eog[:0]
	for id := range eog {
		v.eog = append(v.eog, id)
	}
	slices.Sort(v.eog)

	// o200k_harmony and solar-open: "<|end|>" is not an end of generation
	var hasReturn, hasCall, hasEnd, hasFlush bool
	endID := Null
	for _, id := range v.eog {
		if id < 0 || int(id) >= n {
			continue
		}
		switch v.texts[id] {
		case "<|return|>":
			hasReturn = true
		case "<|call|>", "<|calls|>":
			hasCall = true
		case "<|flush|>":
			hasFlush = true
		case "<|end|>":
			hasEnd, endID = true, id
		}
	}
	if (hasReturn && hasCall && hasEnd) || (hasCall && hasFlush && hasEnd) {
		v.eog = slices.DeleteFunc(v.eog, func(t Token) bool { return t == endID })
		v.attrs[endID] = AttrUserDefined
	}
	// gemma4 and paddleocr: "</s>" is not an end of generation
	hasTool, hasS := false, false
	sID := Null
	for _, id := range v.eog {
		if id < 0 || int(id) >= n {
			continue
		}
		switch v.texts[id] {
		case "<|tool_response>":
			hasTool = true
		case "</s>":
			hasS, sID = true, id
		}
	}
	if hasTool && hasS {
		v.eog = slices.DeleteFunc(v.eog, func(t Token) bool { return t == sID })
		v.attrs[sID] = AttrNormal
	}
	return nil
}

// cstr is s up to its first NUL, as strstr sees it.
func cstr(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// eogTexts are the texts the load marks as end of generation.
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
	"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
	"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
	"<｜end▁of▁sentence｜>", "[e~[",
}

// detectTexts are, per special id the load detects by text, the texts
// that mark it.
var detectTexts = [...][]string{
	{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"},
	{"<|eom_id|>"},
	{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
	{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
	{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
	{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
	{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
	{"<|file_sep|>"},
}

// detectSpecial is the load's detection of EOT, EOM and the FIM tokens by
// their text, for the ids the metadata left unset. The pin walks its
// unordered_map of texts and takes the first match; where several texts
// of one kind are present, the order of that walk decides, and hashOrder
// reproduces it.
func (v *Vocab) detectSpecial() {
	dst := [...]*Token{&v.eot, &v.eom, &v.fimPre, &v.fimSuf, &v.fimMid, &v.fimPad, &v.fimRep, &v.fimSep}
	var cands [len(dst)][]Token
	needOrder := false
	for k, texts := range detectTexts {
		if *dst[k] != Null {
			continue
		}
		for _, t := range texts {
			if id, ok := v.toID[t]; ok {
				cands[k] = append(cands[k], id)
			}
		}
		if len(cands[k]) > 1 {
			needOrder = true
		}
	}
	var rank []int32
	if needOrder {
		rank = hashOrder(v.texts, v.model == "hybriddna", v.toID)
	}
	for k := range dst {
		if len(cands[k]) == 0 {
			continue
		}
		best := cands[k][0]
		for _, id := range cands[k][1:] {
			if rank[id] < rank[best] {
				best = id
			}
		}
		*dst[k] = best
		v.attrs[best] |= AttrControl
	}
}

// buildSpecialCache is cache_special_tokens: the control, user-defined and
// unknown tokens, longest text first, in the order libstdc++'s std::sort
// leaves them.
func (v *Vocab) buildSpecialCache() {
	for id, a := range v.attrs {
		if a&(AttrControl|AttrUserDefined|AttrUnknown) != 0 {
			v.specials = append(v.specials, Token(id))
		}
	}
	texts := v.texts
	stdSort(v.specials, func(a, b Token) bool { return len(texts[a]) > len(texts[b]) })
}

// buildPieces fills the piece cache: token_to_piece(id, special=true) of
// every token, computed with the attributes of this point of the load.
func (v *Vocab) buildPieces() error {
	n := len(v.texts)
	v.pieceOff = make([]uint32, n+1)
	total := 0
	for _, t := range v.texts {
		total += len(t)
	}
	buf := make([]byte, 0, total+n/4)
	for id := range n {
		var err error
		buf, err = v.appendRawPiece(buf, Token(id))
		if err != nil {
			return err
		}
		if len(buf) > math.MaxUint32 {
			return v.errorf("piece cache over 4 GiB")
		}
		v.pieceOff[id+1] = uint32(len(buf))
	}
	v.pieceBuf = buf
	return nil
}

// appendRawPiece is token_to_piece without the cache, for special=true and
// lstrip=0.
func (v *Vocab) appendRawPiece(dst []byte, id Token) ([]byte, error) {
	text := v.texts[id]
	a := v.attrs[id]
	switch v.typ {
	case TypeSPM, TypeWPM, TypeUGM, TypeBPE:
		switch {
		case a&(AttrUnknown|AttrControl|AttrUserDefined) != 0:
			return append(dst, text...), nil
		case a&AttrNormal != 0:
			if v.typ != TypeBPE || v.escapeWS {
				return appendUnescaped(dst, text), nil
			}
			return v.appendDecoded(dst, id, text)
		case a&AttrByte != 0:
			b, err := v.tokenToByte(id)
			if err != nil {
				return dst, err
			}
			return append(dst, b), nil
		}
		return dst, nil
	case TypeRWKV:
		return unescapeRWKV(dst, text), nil
	case TypeTest:
		return strconv.AppendInt(dst, int64(uint32(id)), 16), nil
	case TypePLaMo2:
		if a&AttrByte != 0 && len(text) == 6 && text[:3] == "<0x" && text[5] == '>' && isHex(text[3]) && isHex(text[4]) {
			return append(dst, unhex(text[3])<<4|unhex(text[4])), nil
		}
		return append(dst, text...), nil
	}
	return dst, nil
}

// tokenToByte is llama_vocab::token_to_byte for a byte token.
func (v *Vocab) tokenToByte(id Token) (byte, error) {
	text := v.texts[id]
	if v.typ == TypeWPM {
		return 0, v.errorf("token %d (%q) is a byte token of a WPM vocabulary (llama.cpp aborts)", id, text)
	}
	if len(text) < 3 {
		return 0, v.errorf("byte token %d (%q) is shorter than \"<0x\" (llama.cpp throws out_of_range)", id, text)
	}
	s := text[3:min(len(text), 5)]
	return byte(strtol16(s)), nil
}

// strtol16 is strtol(s, NULL, 16) of the C library.
func strtol16(s string) int64 {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i+2 < len(s)+0 && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && isHex(s[i+2]) {
		i += 2
	}
	var x int64
	for ; i < len(s) && isHex(s[i]); i++ {
		x = x*16 + int64(unhex(s[i]))
	}
	if neg {
		x = -x
	}
	return x
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

// appendUnescaped appends text with every U+2581 turned into a space.
func appendUnescaped(dst []byte, text string) []byte {
	for {
		i := strings.Index(text, "\u2581")
		if i < 0 {
			return append(dst, text...)
		}
		dst = append(dst, text[:i]...)
		dst = append(dst, ' ')
		text = text[i+3:]
	}
}

// appendDecoded is llama_decode_text: the GPT-2 byte decoding of a token.
func (v *Vocab) appendDecoded(dst []byte, id Token, text string) ([]byte, error) {
	table := byteOfCpt()
	for off := 0; off < len(text); {
		cpt, next := decodeCpt(text, off)
		off = next
		if cpt < uint32(len(table)) && table[cpt] >= 0 {
			dst = append(dst, byte(table[cpt]))
			continue
		}
		var tmp [4]byte
		u, ok := appendCpt(tmp[:0], cpt)
		if !ok {
			return dst, v.errorf("token %d (%q): code point %#x has no UTF-8 encoding (llama.cpp throws invalid codepoint)", id, text, cpt)
		}
		dst = append(dst, "[UNK_BYTE_0x"...)
		for _, c := range u {
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		}
		dst = append(dst, text...)
		dst = append(dst, ']')
	}
	return dst, nil
}

// byteOfCpt is unicode_utf8_to_byte as a table: the byte whose GPT-2 text
// is the code point, or -1.
var byteOfCpt = sync.OnceValue(func() []int16 {
	var cpts [256]uint32
	top := uint32(0)
	for b := range 256 {
		s := unicode.ByteToUTF8(byte(b))
		cpt, n := decodeCpt(s, 0)
		if s == "" || n != len(s) || (cpt == 0xFFFD && s != "\uFFFD") {
			cpts[b] = math.MaxUint32
			continue
		}
		cpts[b] = cpt
		top = max(top, cpt)
	}
	if top > 1<<16 {
		top = 1 << 16
	}
	t := make([]int16, top+1)
	for i := range t {
		t[i] = -1
	}
	for b, c := range cpts {
		if c <= top {
			t[c] = int16(b)
		}
	}
	return t
})

// fixAttrs is the load's last step: attributes set by model, tokenizer or
// architecture name.
func (v *Vocab) fixAttrs(l *loader) error {
	name, _, err := l.str(keyName)
	if err != nil {
		return err
	}
	pre, _, err := l.str(keyPre)
	if err != nil {
		return err
	}
	arch, _, err := l.str(keyArch)
	if err != nil {
		return err
	}
	lower := []byte(name)
	for i, c := range lower {
		if c >= 'A' && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	name = string(lower)
	any := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	set := func(text string, a Attr, on bool) error {
		id, ok := v.toID[text]
		if !ok {
			return v.errorf("token %q is not in the vocabulary (llama.cpp's token_to_id.at throws)", text)
		}
		if on {
			v.attrs[id] |= a
		} else {
			v.attrs[id] &^= a
		}
		return nil
	}
	switch {
	case any(pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || any(arch, "nomic-bert-moe", "jina-bert-v3"):
		if _, ok := v.toID["<mask>"]; ok {
			return set("<mask>", AttrLStrip, true)
		}
	case any(name, "phi-3", "phi3"):
		for _, id := range v.specials {
			v.attrs[id] |= AttrRStrip
		}
		if err := set("</s>", AttrRStrip, true); err != nil {
			return err
		}
		for _, t := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if err := set(t, AttrRStrip, false); err != nil {
				return err
			}
		}
	case any(name, "modern-bert"):
		if _, ok := v.toID["[MASK]"]; ok {
			return set("[MASK]", AttrLStrip, true)
		}
	}
	return nil
}
