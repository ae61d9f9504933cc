package llama

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/ggload/ggload/bindings"
)

// vocabLib is libllama's vocabulary API (include/llama.h of v0.5.0).
type vocabLib struct {
	modelGetVocab func(m uintptr) uintptr `c:"llama_model_get_vocab"`
	nTokens       func(v uintptr) int32   `c:"llama_vocab_n_tokens"`
	vocabType     func(v uintptr) int32   `c:"llama_vocab_type"`

	bos    func(v uintptr) int32 `c:"llama_vocab_bos"`
	eos    func(v uintptr) int32 `c:"llama_vocab_eos"`
	eot    func(v uintptr) int32 `c:"llama_vocab_eot"`
	sep    func(v uintptr) int32 `c:"llama_vocab_sep"`
	nl     func(v uintptr) int32 `c:"llama_vocab_nl"`
	pad    func(v uintptr) int32 `c:"llama_vocab_pad"`
	mask   func(v uintptr) int32 `c:"llama_vocab_mask"`
	fimPre func(v uintptr) int32 `c:"llama_vocab_fim_pre"`
	fimSuf func(v uintptr) int32 `c:"llama_vocab_fim_suf"`
	fimMid func(v uintptr) int32 `c:"llama_vocab_fim_mid"`
	fimPad func(v uintptr) int32 `c:"llama_vocab_fim_pad"`
	fimRep func(v uintptr) int32 `c:"llama_vocab_fim_rep"`
	fimSep func(v uintptr) int32 `c:"llama_vocab_fim_sep"`

	addBOS func(v uintptr) bool `c:"llama_vocab_get_add_bos"`
	addEOS func(v uintptr) bool `c:"llama_vocab_get_add_eos"`
	addSEP func(v uintptr) bool `c:"llama_vocab_get_add_sep"`

	isEOG     func(v uintptr, t int32) bool    `c:"llama_vocab_is_eog"`
	isControl func(v uintptr, t int32) bool    `c:"llama_vocab_is_control"`
	text      func(v uintptr, t int32) *byte   `c:"llama_vocab_get_text"`
	score     func(v uintptr, t int32) float32 `c:"llama_vocab_get_score"`
	attr      func(v uintptr, t int32) uint32  `c:"llama_vocab_get_attr"`

	tokenize     func(v uintptr, text *byte, n int32, toks *int32, max int32, addSpecial, parseSpecial bool) int32      `c:"llama_tokenize"`
	tokenToPiece func(v uintptr, t int32, buf *byte, n int32, lstrip int32, special bool) int32                         `c:"llama_token_to_piece"`
	detokenize   func(v uintptr, toks *int32, n int32, text *byte, max int32, removeSpecial, unparseSpecial bool) int32 `c:"llama_detokenize"`
}

// vocabState is the vocabulary API, bound on first use.
type vocabState struct {
	once sync.Once
	lib  *vocabLib
	err  error
}

func (l *Lib) vocab() (*vocabLib, error) {
	l.voc.once.Do(func() {
		vl := &vocabLib{}
		if err := bindings.Bind(vl, l.handle); err != nil {
			l.voc.err = err
			return
		}
		l.voc.lib = vl
	})
	return l.voc.lib, l.voc.err
}

// Vocab is the llama_vocab of a loaded model. Its methods call libllama's
// vocabulary functions; token ids must be in range (libllama aborts the
// process on others).
type Vocab struct {
	l     *vocabLib
	h     uintptr
	owned *Model // the vocab_only model LoadVocab made, freed by Free
}

// loadMu serializes vocab_only loads, whose log lines are captured.
var loadMu sync.Mutex

// LoadVocab loads only the vocabulary of the GGUF at path, as
// llama-tokenize does: llama_model_default_params with vocab_only set,
// then llama_model_load_from_file. The error carries llama.cpp's own line.
// Free releases the model.
func (l *Lib) LoadVocab(path string) (*Vocab, error) {
	vl, err := l.vocab()
	if err != nil {
		return nil, err
	}
	h, err := l.loadVocabOnly(path)
	if err != nil {
		return nil, err
	}
	m := &Model{l, h}
	return &Vocab{l: vl, h: vl.modelGetVocab(h), owned: m}, nil
}

// LoadVocabOnly is llama_model_load_from_file of path with vocab_only
// set, then llama_model_free: what a vocabulary load costs in libllama.
func (l *Lib) LoadVocabOnly(path string) error {
	h, err := l.loadVocabOnly(path)
	if err != nil {
		return err
	}
	l.ModelFree(h)
	return nil
}

func (l *Lib) loadVocabOnly(path string) (uintptr, error) {
	p := l.ModelDefaultParams()
	p.VocabOnly = true
	loadMu.Lock()
	var lines []LogLine
	old := bindings.SetLogTap(func(level int, line string) { lines = append(lines, LogLine{level, line}) })
	h := l.ModelLoadFromFile(path, p)
	bindings.SetLogTap(old)
	loadMu.Unlock()
	if h == 0 {
		msg := "llama_model_load_from_file failed"
		for _, ln := range lines {
			if ln.Level == 4 && (msg == "llama_model_load_from_file failed" || strings.Contains(ln.Text, "error loading model")) {
				msg = strings.TrimSpace(ln.Text)
			}
		}
		return 0, fmt.Errorf("llama: %s: %s", path, msg)
	}
	return h, nil
}

// Vocab is the model's llama_vocab (llama_model_get_vocab); it lives as
// long as the model.
func (m *Model) Vocab() (*Vocab, error) {
	vl, err := m.l.vocab()
	if err != nil {
		return nil, err
	}
	return &Vocab{l: vl, h: vl.modelGetVocab(m.h)}, nil
}

// Free frees the model LoadVocab made; a model's own Vocab is freed with
// the model.
func (v *Vocab) Free() {
	if v.owned != nil {
		v.owned.Free()
		v.owned = nil
	}
	v.h = 0
}

// NTokens is llama_vocab_n_tokens.
func (v *Vocab) NTokens() int { return int(v.l.nTokens(v.h)) }

// Type is llama_vocab_type (llama.h's numbering: 1 SPM, 2 BPE, 3 WPM,
// 4 UGM, 5 RWKV, 6 PLaMo-2).
func (v *Vocab) Type() int { return int(v.l.vocabType(v.h)) }

// BOS is llama_vocab_bos; the special ids are -1 where the vocabulary has
// none.
func (v *Vocab) BOS() int32 { return v.l.bos(v.h) }

// EOS is llama_vocab_eos.
func (v *Vocab) EOS() int32 { return v.l.eos(v.h) }

// EOT is llama_vocab_eot.
func (v *Vocab) EOT() int32 { return v.l.eot(v.h) }

// SEP is llama_vocab_sep.
func (v *Vocab) SEP() int32 { return v.l.sep(v.h) }

// NL is llama_vocab_nl.
func (v *Vocab) NL() int32 { return v.l.nl(v.h) }

// PAD is llama_vocab_pad.
func (v *Vocab) PAD() int32 { return v.l.pad(v.h) }

// MASK is llama_vocab_mask.
func (v *Vocab) MASK() int32 { return v.l.mask(v.h) }

// FIMPre is llama_vocab_fim_pre.
func (v *Vocab) FIMPre() int32 { return v.l.fimPre(v.h) }

// FIMSuf is llama_vocab_fim_suf.
func (v *Vocab) FIMSuf() int32 { return v.l.fimSuf(v.h) }

// FIMMid is llama_vocab_fim_mid.
func (v *Vocab) FIMMid() int32 { return v.l.fimMid(v.h) }

// FIMPad is llama_vocab_fim_pad.
func (v *Vocab) FIMPad() int32 { return v.l.fimPad(v.h) }

// FIMRep is llama_vocab_fim_rep.
func (v *Vocab) FIMRep() int32 { return v.l.fimRep(v.h) }

// FIMSep is llama_vocab_fim_sep.
func (v *Vocab) FIMSep() int32 { return v.l.fimSep(v.h) }

// AddBOS is llama_vocab_get_add_bos.
func (v *Vocab) AddBOS() bool { return v.l.addBOS(v.h) }

// AddEOS is llama_vocab_get_add_eos.
func (v *Vocab) AddEOS() bool { return v.l.addEOS(v.h) }

// AddSEP is llama_vocab_get_add_sep.
func (v *Vocab) AddSEP() bool { return v.l.addSEP(v.h) }

// IsEOG is llama_vocab_is_eog.
func (v *Vocab) IsEOG(t int32) bool { return v.l.isEOG(v.h, t) }

// IsControl is llama_vocab_is_control.
func (v *Vocab) IsControl(t int32) bool { return v.l.isControl(v.h, t) }

// Text is llama_vocab_get_text.
func (v *Vocab) Text(t int32) string { return bindings.GoString(v.l.text(v.h, t)) }

// Score is llama_vocab_get_score.
func (v *Vocab) Score(t int32) float32 { return v.l.score(v.h, t) }

// Attr is llama_vocab_get_attr (llama_token_attr bits).
func (v *Vocab) Attr(t int32) uint32 { return v.l.attr(v.h, t) }

// ErrOverflow is returned by Tokenize where llama_tokenize reports that
// the result would not fit an int32 count.
var ErrOverflow = errors.New("llama: llama_tokenize: token count overflows int32")

// Tokenize is llama_tokenize of text. Where the first buffer is too small
// (a negative result: the count needed), it tokenizes again into one of
// the size asked.
func (v *Vocab) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	buf := make([]byte, len(text)+1) // never a nil pointer, even for ""
	copy(buf, text)
	toks := make([]int32, len(text)+4)
	for try := 0; try < 2; try++ {
		n := v.l.tokenize(v.h, &buf[0], int32(len(text)), &toks[0], int32(len(toks)), addSpecial, parseSpecial)
		switch {
		case n == math.MinInt32:
			return nil, ErrOverflow
		case n >= 0:
			return toks[:n], nil
		}
		toks = make([]int32, -n)
	}
	return nil, fmt.Errorf("llama: llama_tokenize asked for a larger buffer twice")
}

// AppendPiece is llama_token_to_piece of t appended to dst, with the
// buffer grown to the size a negative result asks for.
func (v *Vocab) AppendPiece(dst []byte, t int32, lstrip int, special bool) ([]byte, error) {
	buf := make([]byte, 64)
	for try := 0; try < 2; try++ {
		n := v.l.tokenToPiece(v.h, t, &buf[0], int32(len(buf)), int32(lstrip), special)
		if n >= 0 {
			return append(dst, buf[:n]...), nil
		}
		buf = make([]byte, -n)
	}
	return dst, fmt.Errorf("llama: llama_token_to_piece of %d asked for a larger buffer twice", t)
}

// Detokenize is llama_detokenize of tokens, with the buffer grown to the
// size a negative result asks for.
func (v *Vocab) Detokenize(tokens []int32, removeSpecial, unparseSpecial bool) ([]byte, error) {
	var tp *int32
	if len(tokens) > 0 {
		tp = &tokens[0]
	}
	buf := make([]byte, 16*len(tokens)+16)
	for try := 0; try < 2; try++ {
		n := v.l.detokenize(v.h, tp, int32(len(tokens)), &buf[0], int32(len(buf)), removeSpecial, unparseSpecial)
		if n >= 0 {
			return buf[:n], nil
		}
		if n == math.MinInt32 {
			return nil, fmt.Errorf("llama: llama_detokenize: text length overflows int32")
		}
		buf = make([]byte, -n)
	}
	return nil, fmt.Errorf("llama: llama_detokenize asked for a larger buffer twice")
}
