package infer

import (
	"fmt"
	"slices"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/cpp"
	"github.com/ggload/ggload/internal/graph"
)

// llama_pooling_type.
const (
	poolingNone = 0
	poolingRank = 4
)

// Encode runs the model's encoder on the batch, as llama_encode does: one
// ubatch of every token (n_ubatch must hold them), each an output,
// attention not causal, no memory. The logits (where the model has an
// output) and, with the plan's Embeddings option, the embeddings are kept
// until the next call.
func (c *Context) Encode(b Batch) error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return c.encodeLocked(b)
}

func (c *Context) encodeLocked(b Batch) error {
	u, err := c.prepare(b, true)
	if err != nil {
		return err
	}
	if len(u.Tokens) > int(c.nUBatch) {
		return fmt.Errorf("infer: encode: the encoder requires n_ubatch >= n_tokens (%d > %d)", len(u.Tokens), c.nUBatch)
	}
	return c.checked("encode", func() error { return c.encode(u) })
}

// encode is llama_context::encode's ubatch: built as the encoder's graph,
// computed, its outputs kept.
func (c *Context) encode(b *graph.Ubatch) error {
	if err := c.reserveAgain(); err != nil {
		return err
	}
	n := len(b.Tokens)
	c.resetOutputs()
	c.outRow = make([]int32, n)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	u := &ubatch{Ubatch: b, index: idx}
	c.dropGraph() // (an encoder's graph is not kept)
	st, err := c.gc.BuildEncoder(b)
	if err != nil {
		return fmt.Errorf("infer: encode: %w", err)
	}
	defer st.Free()
	c.timings.Graphs++
	c.encoding = true
	err = c.setInputs(st, u, n, nil)
	c.encoding = false
	if err != nil {
		return err
	}
	if err := st.Compute(); err != nil {
		return fmt.Errorf("infer: encode: %w", err)
	}
	c.keepOutputs(st, u, n)
	if c.rep.Run.Arch == "t5" {
		// the decoder attends to the encoder's output (llama_cross)
		t := st.Result("t_embd")
		if t == nil {
			return fmt.Errorf("infer: encode: t5's encoder has no output")
		}
		x := &crossState{nEmbd: t.Ne[0], nEnc: t.Ne[1], embd: c.rows(t, 0, int(t.Ne[0]*t.Ne[1]))}
		for _, ids := range b.SeqIDs {
			x.seqs = append(x.seqs, slices.Clone(ids))
		}
		c.cross = x
		c.gc.SetCross(graph.Cross{NEmbd: x.nEmbd, NEnc: x.nEnc})
	}
	for i := range c.outRow {
		c.outRow[i] = int32(i)
	}
	c.outputs = n
	return nil
}

// embeddings says whether the context outputs embeddings (cparams).
func (c *Context) embeddings() bool { return c.gc.CParam("embeddings") != 0 }

// resetOutputs forgets the last batch's outputs.
func (c *Context) resetOutputs() {
	c.logits, c.embd, c.outputs = nil, nil, 0
	c.embdSeq = map[int32][]float32{}
}

// keepOutputs copies out a computed ubatch's nOut outputs: the logits,
// and with embeddings on, the embeddings: per output where the context
// does not pool them, else per sequence of the ubatch (rank pooling: the
// classifier's outputs), as llama_context::decode and encode copy them.
func (c *Context) keepOutputs(st *graph.Step, u *ubatch, nOut int) {
	if t := st.Result("t_logits"); t != nil {
		c.nVocab = int(t.Ne[0])
		c.logits = append(c.logits, c.rows(t, 0, nOut*c.nVocab)...)
	}
	if !c.embeddings() {
		return
	}
	t := st.Result("t_embd_pooled")
	if t == nil {
		t = st.Result("t_embd")
	}
	if t == nil {
		return
	}
	pooling := c.gc.CParam("pooling_type")
	if pooling == poolingNone {
		c.nEmbd = int(t.Ne[0])
		c.embd = append(c.embd, c.rows(t, 0, nOut*c.nEmbd)...)
		return
	}
	width := int(t.Ne[0])
	if pooling == poolingRank {
		width = int(c.hparam("n_cls_out"))
	}
	for k, s := range u.seqsUnq() {
		c.embdSeq[s] = c.rows(t, k*width, width)
	}
}

// embdFits refuses the embeddings llama_context::decode would read past
// their tensor's end: n_embd_out floats per output, or per sequence of
// the ubatch where it pools them (a model whose graph's embeddings are
// narrower than n_embd_out: DeepSeek-V4's, of one hyper-connection
// stream out of four).
func (c *Context) embdFits(st *graph.Step, u *ubatch, nOut int) error {
	if nOut == 0 || !c.embeddings() {
		return nil
	}
	t := st.Result("t_embd_pooled")
	if t == nil {
		t = st.Result("t_embd")
	}
	pooling := c.gc.CParam("pooling_type")
	if t == nil || pooling == poolingRank {
		return nil
	}
	width, err := c.rep.Run.Hparams().Call("n_embd_out")
	if err != nil {
		return fmt.Errorf("infer: decode: %w", err)
	}
	rows := int64(nOut)
	if pooling != poolingNone {
		rows = int64(len(u.seqsUnq()))
	}
	if have := t.Ne[0] * t.Ne[1] * t.Ne[2] * t.Ne[3]; rows*width > have {
		return fmt.Errorf("infer: decode: %s: %w", c.rep.Run.Arch, &cpp.Abort{
			Msg: fmt.Sprintf("GGML_ASSERT(offset + size <= ggml_nbytes(tensor) && \"tensor read out of bounds\") failed: %d rows of n_embd_out = %d floats from embeddings of %v",
				rows, width, t.Ne),
			Where: "llama_context::decode, reading the embeddings"})
	}
	return nil
}

// rows copies n floats of the tensor from element off.
func (c *Context) rows(t *ops.Tensor, off, n int) []float32 { return c.lib.TensorFloats(t, off, n) }

// hparam is a member of the model's hyperparameters.
func (c *Context) hparam(name string) int64 {
	v, _ := c.rep.Run.Hparams().Field(name)
	return v
}

// Embeddings are the embeddings of the last batch's sequence seq, pooled
// (llama_get_embeddings_seq); where the context does not pool them, use
// EmbeddingsIth.
func (c *Context) Embeddings(seq int32) ([]float32, error) {
	if err := c.hold(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	e, ok := c.embdSeq[seq]
	if !ok {
		return nil, fmt.Errorf("infer: embeddings: sequence %d has no pooled embeddings (embeddings on: %v, pooling %d)", seq, c.embeddings(), c.gc.CParam("pooling_type"))
	}
	return append([]float32(nil), e...), nil
}

// EmbeddingsIth are the embeddings of the last batch's token i (negative:
// counted from the last output), where the context does not pool them
// (llama_get_embeddings_ith).
func (c *Context) EmbeddingsIth(i int) ([]float32, error) {
	if err := c.hold(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	row := c.row(i)
	if row < 0 || c.nEmbd == 0 || len(c.embd) < int(row+1)*c.nEmbd {
		return nil, fmt.Errorf("infer: embeddings: token %d of the last batch has no embeddings (embeddings on: %v)", i, c.embeddings())
	}
	return append([]float32(nil), c.embd[int(row)*c.nEmbd:int(row+1)*c.nEmbd]...), nil
}

// crossState is what the encoder leaves the decoder (llama_cross): its
// output and each of its tokens' sequences.
type crossState struct {
	nEmbd, nEnc int64
	embd        []float32
	seqs        [][]int32
}
