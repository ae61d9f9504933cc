// Port of llama.cpp include/llama.h and src/llama-vocab.h (v0.5.0):
// llama_vocab's types and getters.

package vocab

import (
	"fmt"
	"sync"
)

// Token is a token id, llama_token.
type Token = int32

// Null is LLAMA_TOKEN_NULL, the id of no token.
const Null Token = -1

// Type is a vocabulary type, llama_vocab_type with llama.h's numbering.
type Type int

// The vocabulary types.
const (
	TypeNone   Type = 0 // no vocabulary
	TypeSPM    Type = 1 // SentencePiece-style BPE with byte fallback
	TypeBPE    Type = 2 // GPT-2-style byte-level BPE
	TypeWPM    Type = 3 // BERT WordPiece
	TypeUGM    Type = 4 // T5 Unigram
	TypeRWKV   Type = 5 // RWKV greedy trie
	TypePLaMo2 Type = 6 // PLaMo-2 table-driven tokenizer
	TypeTest   Type = 7 // llama.cpp's test tokenizer (hash of 5-byte chunks)
)

// String is llama_vocab::type_name.
func (t Type) String() string {
	switch t {
	case TypeNone:
		return "no vocab"
	case TypeSPM:
		return "SPM"
	case TypeBPE:
		return "BPE"
	case TypeWPM:
		return "WPM"
	case TypeUGM:
		return "UGM"
	case TypeRWKV:
		return "RWKV"
	case TypePLaMo2:
		return "PLaMo2"
	case TypeTest:
		return "TEST"
	}
	return "unknown"
}

// Attr is a set of token attributes, llama_token_attr with llama.h's bits.
type Attr uint32

// The token attributes.
const (
	AttrUndefined   Attr = 0
	AttrUnknown     Attr = 1 << 0
	AttrUnused      Attr = 1 << 1
	AttrNormal      Attr = 1 << 2
	AttrControl     Attr = 1 << 3
	AttrUserDefined Attr = 1 << 4
	AttrByte        Attr = 1 << 5
	AttrNormalized  Attr = 1 << 6
	AttrLStrip      Attr = 1 << 7
	AttrRStrip      Attr = 1 << 8
	AttrSingleWord  Attr = 1 << 9
)

// Vocab is a loaded vocabulary. It is not changed after Load and is safe
// for concurrent use.
type Vocab struct {
	path    string // the file, for errors
	typ     Type
	model   string // tokenizer.ggml.model
	pre     string // the pre-tokenizer name as llama.cpp holds it
	preType preType

	texts       []string
	scores      []float32
	attrs       []Attr
	toID        map[string]Token
	maxTokenLen int

	bos, eos, eot, eom, unk, sep, pad, mask, nl Token
	fimPre, fimSuf, fimMid, fimPad, fimRep      Token
	fimSep                                      Token

	addSpacePrefix, addBOS, addEOS, addSEP bool
	ignoreMerges, cleanSpaces              bool
	removeExtraWS, escapeWS, wsAsSuffix    bool
	lowercase, stripAccents                bool

	eog      []Token // sorted
	suppress []Token
	specials []Token // cache_special_tokens, in the pin's order

	pieceBuf []byte   // token_to_piece(special=true) of every token, concatenated
	pieceOff []uint32 // n+1 offsets into pieceBuf

	// BPE
	ranks      map[string]int32 // merge line "left right" -> rank
	regex      []string
	byteEncode bool
	byteTok    [256]Token // the token whose text is the one raw byte (BPE byte fallback)
	hexTok     [256]Token // the "<0xXX>" token of each byte

	ugm    *ugmTokenizer
	rwkv   *trie
	plamo2 *plamo2Tokenizer

	pool sync.Pool // *session
}

// Type is the vocabulary type.
func (v *Vocab) Type() Type { return v.typ }

// Pre is the pre-tokenizer name, tokenizer.ggml.pre as llama.cpp holds it
// after loading ("default" when the file has none).
func (v *Vocab) Pre() string {
	if v.pre == "" {
		return "default"
	}
	return v.pre
}

// Model is tokenizer.ggml.model.
func (v *Vocab) Model() string { return v.model }

// NTokens is the number of tokens, llama_vocab_n_tokens.
func (v *Vocab) NTokens() int { return len(v.texts) }

// BOS is the beginning-of-sentence token, or Null.
func (v *Vocab) BOS() Token { return v.bos }

// EOS is the end-of-sentence token, or Null.
func (v *Vocab) EOS() Token { return v.eos }

// EOT is the end-of-turn token, or Null.
func (v *Vocab) EOT() Token { return v.eot }

// EOM is the end-of-message token, or Null.
func (v *Vocab) EOM() Token { return v.eom }

// UNK is the unknown token, or Null.
func (v *Vocab) UNK() Token { return v.unk }

// SEP is the separator token, or Null.
func (v *Vocab) SEP() Token { return v.sep }

// NL is the newline token, or Null.
func (v *Vocab) NL() Token { return v.nl }

// PAD is the padding token, or Null.
func (v *Vocab) PAD() Token { return v.pad }

// MASK is the mask token, or Null.
func (v *Vocab) MASK() Token { return v.mask }

// FIMPre is the fill-in-the-middle prefix token, or Null.
func (v *Vocab) FIMPre() Token { return v.fimPre }

// FIMSuf is the fill-in-the-middle suffix token, or Null.
func (v *Vocab) FIMSuf() Token { return v.fimSuf }

// FIMMid is the fill-in-the-middle middle token, or Null.
func (v *Vocab) FIMMid() Token { return v.fimMid }

// FIMPad is the fill-in-the-middle padding token, or Null.
func (v *Vocab) FIMPad() Token { return v.fimPad }

// FIMRep is the fill-in-the-middle repository token, or Null.
func (v *Vocab) FIMRep() Token { return v.fimRep }

// FIMSep is the fill-in-the-middle file separator token, or Null.
func (v *Vocab) FIMSep() Token { return v.fimSep }

// AddBOS reports whether Tokenize with addSpecial prepends BOS.
func (v *Vocab) AddBOS() bool { return v.addBOS }

// AddEOS reports whether Tokenize with addSpecial appends EOS.
func (v *Vocab) AddEOS() bool { return v.addEOS }

// AddSEP reports whether the model's tokenizer appends SEP (llama_vocab_get_add_sep).
func (v *Vocab) AddSEP() bool { return v.addSEP }

// EOG is the end-of-generation set, in increasing order. The caller must
// not change it.
func (v *Vocab) EOG() []Token { return v.eog }

// SuppressTokens is tokenizer.ggml.suppress_tokens less the ids out of
// range. The caller must not change it.
func (v *Vocab) SuppressTokens() []Token { return v.suppress }

// IsEOG reports whether t ends generation, llama_vocab_is_eog.
func (v *Vocab) IsEOG(t Token) bool {
	if t == Null {
		return false
	}
	lo, hi := 0, len(v.eog)
	for lo < hi {
		m := (lo + hi) / 2
		if v.eog[m] < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(v.eog) && v.eog[lo] == t
}

// IsControl reports whether t is a control token, llama_vocab_is_control;
// false for ids out of range.
func (v *Vocab) IsControl(t Token) bool { return v.Attr(t)&AttrControl != 0 }

// Text is the text of token t as stored in the vocabulary, or "" for an id
// out of range.
func (v *Vocab) Text(t Token) string {
	if t < 0 || int(t) >= len(v.texts) {
		return ""
	}
	return v.texts[t]
}

// Score is the score of token t, or 0 for an id out of range.
func (v *Vocab) Score(t Token) float32 {
	if t < 0 || int(t) >= len(v.scores) {
		return 0
	}
	return v.scores[t]
}

// Attr is the attributes of token t, or AttrUndefined for an id out of
// range.
func (v *Vocab) Attr(t Token) Attr {
	if t < 0 || int(t) >= len(v.attrs) {
		return AttrUndefined
	}
	return v.attrs[t]
}

// TokenID is llama_vocab::text_to_token: the token whose text is exactly
// text.
func (v *Vocab) TokenID(text string) (Token, bool) {
	id, ok := v.toID[text]
	return id, ok
}

// piece is the cached token_to_piece(t, special=true).
func (v *Vocab) piece(t Token) []byte {
	return v.pieceBuf[v.pieceOff[t]:v.pieceOff[t+1]]
}

// errorf is an error naming the file.
func (v *Vocab) errorf(format string, args ...any) error {
	if v.path != "" {
		return fmt.Errorf("vocab: %s: %s", v.path, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("vocab: %s", fmt.Sprintf(format, args...))
}
