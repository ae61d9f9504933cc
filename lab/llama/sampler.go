package llama

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// TokenData mirrors struct llama_token_data (12 bytes).
type TokenData struct {
	ID    int32
	Logit float32
	P     float32
}

// TokenDataArray mirrors struct llama_token_data_array (32 bytes).
type TokenDataArray struct {
	Data     *TokenData
	Size     uintptr
	Selected int64
	Sorted   bool
	_        [7]byte
}

// LogitBias mirrors struct llama_logit_bias.
type LogitBias struct {
	Token int32
	Bias  float32
}

// SamplerLib is libllama's sampler API (include/llama.h of v0.5.0).
// llama_sampler_chain_params, one bool, travels as the bool itself.
type SamplerLib struct {
	ChainInit      func(noPerf bool) uintptr                                                                         `c:"llama_sampler_chain_init"`
	ChainAdd       func(chain, s uintptr)                                                                            `c:"llama_sampler_chain_add"`
	ChainN         func(chain uintptr) int32                                                                         `c:"llama_sampler_chain_n"`
	ChainGet       func(chain uintptr, i int32) uintptr                                                              `c:"llama_sampler_chain_get"`
	Name           func(s uintptr) string                                                                            `c:"llama_sampler_name"`
	Apply          func(s uintptr, cur *TokenDataArray)                                                              `c:"llama_sampler_apply"`
	Accept         func(s uintptr, t int32)                                                                          `c:"llama_sampler_accept"`
	Reset          func(s uintptr)                                                                                   `c:"llama_sampler_reset"`
	Free           func(s uintptr)                                                                                   `c:"llama_sampler_free"`
	GetSeed        func(s uintptr) uint32                                                                            `c:"llama_sampler_get_seed"`
	InitGreedy     func() uintptr                                                                                    `c:"llama_sampler_init_greedy"`
	InitDist       func(seed uint32) uintptr                                                                         `c:"llama_sampler_init_dist"`
	InitTopK       func(k int32) uintptr                                                                             `c:"llama_sampler_init_top_k"`
	InitTopP       func(p float32, minKeep uintptr) uintptr                                                          `c:"llama_sampler_init_top_p"`
	InitMinP       func(p float32, minKeep uintptr) uintptr                                                          `c:"llama_sampler_init_min_p"`
	InitTypical    func(p float32, minKeep uintptr) uintptr                                                          `c:"llama_sampler_init_typical"`
	InitTemp       func(t float32) uintptr                                                                           `c:"llama_sampler_init_temp"`
	InitTempExt    func(t, delta, exponent float32) uintptr                                                          `c:"llama_sampler_init_temp_ext"`
	InitXTC        func(p, t float32, minKeep uintptr, seed uint32) uintptr                                          `c:"llama_sampler_init_xtc"`
	InitTopNSigma  func(n float32) uintptr                                                                           `c:"llama_sampler_init_top_n_sigma"`
	InitMirostat   func(nVocab int32, seed uint32, tau, eta float32, m int32) uintptr                                `c:"llama_sampler_init_mirostat"`
	InitMirostatV2 func(seed uint32, tau, eta float32) uintptr                                                       `c:"llama_sampler_init_mirostat_v2"`
	InitPenalties  func(nVocab, lastN int32, repeat, freq, present float32) uintptr                                  `c:"llama_sampler_init_penalties"`
	InitAdaptiveP  func(target, decay float32, seed uint32) uintptr                                                  `c:"llama_sampler_init_adaptive_p"`
	InitLogitBias  func(nVocab, n int32, biases *LogitBias) uintptr                                                  `c:"llama_sampler_init_logit_bias"`
	InitInfill     func(vocab uintptr) uintptr                                                                       `c:"llama_sampler_init_infill"`
	InitDRY        func(vocab uintptr, mult, base float32, allowed, lastN int32, breakers **byte, n uintptr) uintptr `c:"llama_sampler_init_dry"`
	ModelGetVocab  func(m uintptr) uintptr                                                                           `c:"llama_model_get_vocab"`

	// the grammar samplers
	InitGrammar             func(vocab uintptr, grammar, root string) uintptr                                                                     `c:"llama_sampler_init_grammar"`
	InitGrammarLazyPatterns func(vocab uintptr, grammar, root string, patterns **byte, nPatterns uintptr, tokens *int32, nTokens uintptr) uintptr `c:"llama_sampler_init_grammar_lazy_patterns"`
}

// samplerState is the lazily bound SamplerLib of a Lib.
type samplerState struct {
	lib *SamplerLib
	err error
	ok  bool
}

// Samplers binds libllama's sampler API (once).
func (l *Lib) Samplers() (*SamplerLib, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if !l.smp.ok {
		l.smp.ok = true
		s := &SamplerLib{}
		if err := bindings.Bind(s, l.handle); err != nil {
			l.smp.err = fmt.Errorf("llama: samplers: %w", err)
		} else {
			l.smp.lib = s
		}
	}
	return l.smp.lib, l.smp.err
}

// VocabOnly loads the vocabulary of a GGUF file as llama.cpp's
// vocab_only load does, for the samplers that need one; the model is
// freed with Free, the vocabulary is the llama_vocab pointer.
func (l *Lib) VocabOnly(path string) (*Model, uintptr, error) {
	s, err := l.Samplers()
	if err != nil {
		return nil, 0, err
	}
	h, err := l.loadVocabOnly(path)
	if err != nil {
		return nil, 0, err
	}
	return &Model{l, h}, s.ModelGetVocab(h), nil
}

// DRY is llama_sampler_init_dry with Go strings for the breakers.
func (s *SamplerLib) DRY(vocab uintptr, mult, base float32, allowed, lastN int32, breakers []string) uintptr {
	var pin runtime.Pinner
	defer pin.Unpin()
	ptrs := make([]*byte, len(breakers)+1)
	for i, b := range breakers {
		c := append([]byte(b), 0)
		pin.Pin(&c[0])
		ptrs[i] = &c[0]
	}
	pin.Pin(&ptrs[0])
	return s.InitDRY(vocab, mult, base, allowed, lastN, &ptrs[0], uintptr(len(breakers)))
}

// GrammarLazy is llama_sampler_init_grammar_lazy_patterns with Go
// strings for the patterns.
func (s *SamplerLib) GrammarLazy(vocab uintptr, grammar, root string, patterns []string, tokens []int32) uintptr {
	var pin runtime.Pinner
	defer pin.Unpin()
	ptrs := make([]*byte, len(patterns)+1)
	for i, p := range patterns {
		c := append([]byte(p), 0)
		pin.Pin(&c[0])
		ptrs[i] = &c[0]
	}
	pin.Pin(&ptrs[0])
	var tp *int32
	if len(tokens) > 0 {
		pin.Pin(&tokens[0])
		tp = &tokens[0]
	}
	return s.InitGrammarLazyPatterns(vocab, grammar, root, &ptrs[0], uintptr(len(patterns)), tp, uintptr(len(tokens)))
}

// LogitBias is llama_sampler_init_logit_bias.
func (s *SamplerLib) LogitBias(nVocab int32, biases []LogitBias) uintptr {
	if len(biases) == 0 {
		return s.InitLogitBias(nVocab, 0, nil)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&biases[0])
	return s.InitLogitBias(nVocab, int32(len(biases)), &biases[0])
}

// ApplyTo runs llama_sampler_apply over data and returns the window of
// data the sampler left (a sampler may move the array's start), the
// selected index and the sorted flag.
func (s *SamplerLib) ApplyTo(smpl uintptr, data []TokenData, selected int64, sorted bool) ([]TokenData, int64, bool) {
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&data[0])
	arr := &TokenDataArray{Data: &data[0], Size: uintptr(len(data)), Selected: selected, Sorted: sorted}
	pin.Pin(arr)
	s.Apply(smpl, arr)
	off := (uintptr(unsafe.Pointer(arr.Data)) - uintptr(unsafe.Pointer(&data[0]))) / unsafe.Sizeof(TokenData{})
	return data[off : off+arr.Size], arr.Selected, arr.Sorted
}

// MathLib is the C library's single-precision functions that llama.cpp's
// samplers call, for holding a port of them to the same results.
type MathLib struct {
	Expf  func(x float32) float32    `c:"expf"`
	Logf  func(x float32) float32    `c:"logf"`
	Log2f func(x float32) float32    `c:"log2f"`
	Powf  func(x, y float32) float32 `c:"powf"`
}

var (
	mathOnce sync.Once
	mathLib  *MathLib
	mathErr  error
)

// Libm binds the process's libm (libm.so.6), as libllama links it.
func Libm() (*MathLib, error) {
	mathOnce.Do(func() {
		h, err := bindings.OpenLibrary("libm.so.6")
		if err != nil {
			mathErr = fmt.Errorf("llama: libm: %w", err)
			return
		}
		m := &MathLib{}
		if err := bindings.Bind(m, h); err != nil {
			mathErr = fmt.Errorf("llama: libm: %w", err)
			return
		}
		mathLib = m
	})
	return mathLib, mathErr
}
