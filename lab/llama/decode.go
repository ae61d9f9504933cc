package llama

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/place"
)

// Batch mirrors struct llama_batch (include/llama.h of v0.5.0): 56 bytes.
type Batch struct {
	NTokens int32
	_       int32
	Token   *int32
	Embd    *float32
	Pos     *int32
	NSeqID  *int32
	SeqID   **int32
	Logits  *int8
}

// decodeLib is libllama's decoding API.
type decodeLib struct {
	Decode          func(ctx uintptr, b Batch) int32        `c:"llama_decode"`
	GetLogitsIth    func(ctx uintptr, i int32) *float32     `c:"llama_get_logits_ith"`
	SetNThreads     func(ctx uintptr, n, nBatch int32)      `c:"llama_set_n_threads"`
	GetMemory       func(ctx uintptr) uintptr               `c:"llama_get_memory"`
	MemorySeqRm     func(m uintptr, seq, p0, p1 int32) bool `c:"llama_memory_seq_rm"`
	MemorySeqCp     func(m uintptr, src, dst, p0, p1 int32) `c:"llama_memory_seq_cp"`
	MemorySeqKeep   func(m uintptr, seq int32)              `c:"llama_memory_seq_keep"`
	MemoryClear     func(m uintptr, data bool)              `c:"llama_memory_clear"`
	MemorySeqAdd    func(m uintptr, seq, p0, p1, d int32)   `c:"llama_memory_seq_add"`
	MemorySeqDiv    func(m uintptr, seq, p0, p1, d int32)   `c:"llama_memory_seq_div"`
	MemorySeqPosMax func(m uintptr, seq int32) int32        `c:"llama_memory_seq_pos_max"`
	ModelGetVocab   func(m uintptr) uintptr                 `c:"llama_model_get_vocab"`
	VocabNTokens    func(v uintptr) int32                   `c:"llama_vocab_n_tokens"`
}

func (l *Lib) decoder() (*decodeLib, error) {
	l.decOnce.Do(func() {
		d := &decodeLib{}
		if err := bindings.Bind(d, l.handle); err != nil {
			l.decErr = err
			return
		}
		l.decLib = d
	})
	return l.decLib, l.decErr
}

// SetThreads is llama_set_n_threads.
func (c *Context) SetThreads(n, nBatch int) error {
	d, err := c.l.decoder()
	if err != nil {
		return err
	}
	d.SetNThreads(c.h, int32(n), int32(nBatch))
	return nil
}

// Decode is llama_decode of tokens: positions and sequences as given (nil:
// llama.cpp fills them in), logits for the flagged tokens (nil: the
// last). A non-zero return is an error naming it.
func (c *Context) Decode(tokens, pos []int32, seqs [][]int32, logits []bool) error {
	return c.decode(tokens, nil, pos, seqs, logits)
}

// DecodeEmbd is llama_decode of a batch of input embeddings (one row of
// n_embd_inp floats per token): batch.embd in place of batch.token.
func (c *Context) DecodeEmbd(embd [][]float32, pos []int32, seqs [][]int32, logits []bool) error {
	return c.decode(nil, embd, pos, seqs, logits)
}

func (c *Context) decode(tokens []int32, embd [][]float32, pos []int32, seqs [][]int32, logits []bool) error {
	d, err := c.l.decoder()
	if err != nil {
		return err
	}
	n := len(tokens)
	if embd != nil {
		n = len(embd)
	}
	if n == 0 {
		return fmt.Errorf("llama: decode of no tokens")
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	b := Batch{NTokens: int32(n)}
	if embd != nil {
		flat := make([]float32, 0, n*len(embd[0]))
		for _, row := range embd {
			flat = append(flat, row...)
		}
		pin.Pin(&flat[0])
		b.Embd = &flat[0]
	} else {
		pin.Pin(&tokens[0])
		b.Token = &tokens[0]
	}
	if pos != nil {
		pin.Pin(&pos[0])
		b.Pos = &pos[0]
	}
	if seqs != nil {
		nsid := make([]int32, n)
		ptrs := make([]*int32, n)
		for i, s := range seqs {
			nsid[i] = int32(len(s))
			pin.Pin(&s[0])
			ptrs[i] = &s[0]
		}
		pin.Pin(&nsid[0])
		pin.Pin(&ptrs[0])
		b.NSeqID, b.SeqID = &nsid[0], &ptrs[0]
	}
	if logits != nil {
		lg := make([]int8, n)
		for i, v := range logits {
			if v {
				lg[i] = 1
			}
		}
		pin.Pin(&lg[0])
		b.Logits = &lg[0]
	}
	if rc := d.Decode(c.h, b); rc != 0 {
		return fmt.Errorf("llama: llama_decode returned %d", rc)
	}
	return nil
}

// Logits is a copy of llama_get_logits_ith(i): nVocab floats.
func (c *Context) Logits(i int, nVocab int) ([]float32, error) {
	d, err := c.l.decoder()
	if err != nil {
		return nil, err
	}
	p := d.GetLogitsIth(c.h, int32(i))
	if p == nil {
		return nil, fmt.Errorf("llama: no logits for token %d", i)
	}
	return append([]float32(nil), unsafe.Slice(p, nVocab)...), nil
}

// NVocab is the model's vocabulary size.
func (m *Model) NVocab() (int, error) {
	d, err := m.l.decoder()
	if err != nil {
		return 0, err
	}
	return int(d.VocabNTokens(d.ModelGetVocab(m.h))), nil
}

// SeqRm is llama_memory_seq_rm; an error where it returns false.
func (c *Context) SeqRm(seq, p0, p1 int32) error {
	d, err := c.l.decoder()
	if err != nil {
		return err
	}
	if !d.MemorySeqRm(d.GetMemory(c.h), seq, p0, p1) {
		return fmt.Errorf("llama: llama_memory_seq_rm(%d, %d, %d) returned false", seq, p0, p1)
	}
	return nil
}

// SeqCp is llama_memory_seq_cp.
func (c *Context) SeqCp(src, dst, p0, p1 int32) error {
	d, err := c.l.decoder()
	if err != nil {
		return err
	}
	d.MemorySeqCp(d.GetMemory(c.h), src, dst, p0, p1)
	return nil
}

// SeqPosMax is llama_memory_seq_pos_max (-1 where an error stops it).
func (c *Context) SeqPosMax(seq int32) int32 {
	d, err := c.l.decoder()
	if err != nil {
		return -1
	}
	return d.MemorySeqPosMax(d.GetMemory(c.h), seq)
}

// SeqAdd is llama_memory_seq_add.
func (c *Context) SeqAdd(seq, p0, p1, d int32) error {
	dl, err := c.l.decoder()
	if err != nil {
		return err
	}
	dl.MemorySeqAdd(dl.GetMemory(c.h), seq, p0, p1, d)
	return nil
}

// SeqDiv is llama_memory_seq_div.
func (c *Context) SeqDiv(seq, p0, p1, d int32) error {
	dl, err := c.l.decoder()
	if err != nil {
		return err
	}
	dl.MemorySeqDiv(dl.GetMemory(c.h), seq, p0, p1, d)
	return nil
}

// Clear is llama_memory_clear(mem, true).
func (c *Context) Clear() error {
	d, err := c.l.decoder()
	if err != nil {
		return err
	}
	d.MemoryClear(d.GetMemory(c.h), true)
	return nil
}

// SeqKeep is llama_memory_seq_keep.
func (c *Context) SeqKeep(seq int32) error {
	d, err := c.l.decoder()
	if err != nil {
		return err
	}
	d.MemorySeqKeep(d.GetMemory(c.h), seq)
	return nil
}

// embdLib is libllama's embeddings API.
type embdLib struct {
	GetEmbeddingsSeq func(ctx uintptr, seq int32) *float32 `c:"llama_get_embeddings_seq"`
	GetEmbeddingsIth func(ctx uintptr, i int32) *float32   `c:"llama_get_embeddings_ith"`
	Encode           func(ctx uintptr, b Batch) int32      `c:"llama_encode"`
	NEmbdOut         func(m uintptr) int32                 `c:"llama_model_n_embd_out"`
	PoolingType      func(ctx uintptr) int32               `c:"llama_pooling_type"`
}

// Embeddings are a copy of the context's embeddings: of sequence seq
// where it pools them (llama_get_embeddings_seq), else of token i
// (llama_get_embeddings_ith), n floats.
func (c *Context) Embeddings(seq int32, i int, n int) ([]float32, error) {
	e := &embdLib{}
	if err := bindings.Bind(e, c.l.handle); err != nil {
		return nil, err
	}
	var p *float32
	if e.PoolingType(c.h) != 0 {
		p = e.GetEmbeddingsSeq(c.h, seq)
	} else {
		p = e.GetEmbeddingsIth(c.h, int32(i))
	}
	if p == nil {
		return nil, fmt.Errorf("llama: no embeddings")
	}
	return append([]float32(nil), unsafe.Slice(p, n)...), nil
}

// NEmbdOut is llama_model_n_embd_out: the embeddings' width.
func (m *Model) NEmbdOut() (int, error) {
	e := &embdLib{}
	if err := bindings.Bind(e, m.l.handle); err != nil {
		return 0, err
	}
	return int(e.NEmbdOut(m.h)), nil
}

// Encode is llama_encode of tokens (the positions and sequences llama.cpp
// fills in).
func (c *Context) Encode(tokens []int32) error {
	e := &embdLib{}
	if err := bindings.Bind(e, c.l.handle); err != nil {
		return err
	}
	if len(tokens) == 0 {
		return fmt.Errorf("llama: encode of no tokens")
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&tokens[0])
	if rc := e.Encode(c.h, Batch{NTokens: int32(len(tokens)), Token: &tokens[0]}); rc != 0 {
		return fmt.Errorf("llama: llama_encode returned %d", rc)
	}
	return nil
}

// OpenContext loads the model at path with libllama as llama.cpp's tools
// would with params (LoadFor) and makes a context of its context options
// computing on threads CPU threads: what a comparison with ggload's
// forward pass runs. Free the context, then the model.
func (l *Lib) OpenContext(rt *ggml.Runtime, path string, params place.Params, threads int) (*Model, *Context, error) {
	ld, err := LoadFor(rt, path, params)
	if err != nil {
		return nil, nil, err
	}
	lm, _, err := l.LoadModel(ld)
	if err != nil {
		return nil, nil, err
	}
	cp, err := l.ContextParamsFor(params.Context)
	if err == nil {
		var ctx *Context
		if ctx, _, err = lm.NewContext(cp); err == nil {
			if err = ctx.SetThreads(threads, threads); err == nil {
				return lm, ctx, nil
			}
			ctx.Free()
		}
	}
	lm.Free()
	return nil, nil, err
}
