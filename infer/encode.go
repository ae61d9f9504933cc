// Port of llama.cpp src/llama-context.cpp (v0.5.0): llama_context::encode
// and the embeddings it outputs.

package infer

import (
	"fmt"
	"slices"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/graph"
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
	return c.model.Use("encode", func() error { return c.encodeLocked(b) })
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
	c.batchOut = n
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
	if err := c.checkEmbdReads(st, u, n); err != nil {
		return fmt.Errorf("infer: encode: %s: %w", c.rep.Run.Arch, err)
	}
	if err := c.compute(st); err != nil {
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

// resetOutputs forgets the last batch's outputs (the logits' memory is
// kept for the next batch's, as llama.cpp keeps its output buffer).
func (c *Context) resetOutputs() {
	c.logits, c.embd, c.outputs = c.logits[:0], nil, 0
	c.embdSeq = map[int32][]float32{}
}

// keepOutputs copies out a computed ubatch's nOut outputs: the logits,
// and with embeddings on, the embeddings: per output where the context
// does not pool them, else per sequence of the ubatch (rank pooling: the
// classifier's outputs), as llama_context::decode and encode copy them.
func (c *Context) keepOutputs(st *graph.Step, u *ubatch, nOut int) {
	if t := st.Result("t_logits"); t != nil {
		c.nVocab = int(t.Ne[0])
		if need := c.batchOut * c.nVocab; cap(c.logits) < need {
			// the batch's logits in one allocation, the rows kept so far
			// moved into it (none, but for a batch whose first ubatch
			// showed the width)
			c.logits = append(make([]float32, 0, need), c.logits...)
		}
		c.logits = c.appendRows(c.logits, t, nOut*c.nVocab)
	}
	t := c.embdResult(st)
	if t == nil {
		return
	}
	width := c.embdWidth()
	if c.gc.CParam("pooling_type") == poolingNone {
		c.nEmbd = width
		c.embd = append(c.embd, c.rows(t, 0, nOut*width)...)
		return
	}
	for k, s := range u.seqsUnq() {
		c.embdSeq[s] = c.rows(t, k*width, width)
	}
}

// embdResult is the graph's embeddings llama.cpp copies out with
// embeddings on: the pooled ones where the graph pools; nil with
// embeddings off or none.
func (c *Context) embdResult(st *graph.Step) *ops.Tensor {
	if !c.embeddings() {
		return nil
	}
	if t := st.Result("t_embd_pooled"); t != nil {
		return t
	}
	return st.Result("t_embd")
}

// embdWidth is what llama.cpp copies out per output (pooling none) or per
// sequence: the model's n_embd_out, or with rank pooling, its n_cls_out.
func (c *Context) embdWidth() int {
	if c.gc.CParam("pooling_type") == poolingRank {
		return int(c.hparam("n_cls_out"))
	}
	w, _ := c.rep.Run.Hparams().Call("n_embd_out")
	return int(w)
}

// checkEmbdReads refuses a ubatch whose embeddings llama.cpp would read
// past the end of the graph's tensor (ggml asserts): its nOut outputs,
// or its sequences, of embdWidth floats each.
func (c *Context) checkEmbdReads(st *graph.Step, u *ubatch, nOut int) error {
	t := c.embdResult(st)
	if t == nil || nOut == 0 {
		return nil
	}
	n := nOut
	if c.gc.CParam("pooling_type") != poolingNone {
		n = len(u.seqsUnq())
	}
	if need := uint64(n) * uint64(c.embdWidth()) * 4; need > c.lib.NBytes(t) {
		return &cpp.Abort{Msg: "GGML_ASSERT(offset + size <= ggml_nbytes(tensor) && \"tensor read out of bounds\") failed", Where: fmt.Sprintf("ggml_backend_tensor_get_async: llama.cpp reads %d outputs of n_embd_out = %d floats from %s, of %d bytes", n, c.embdWidth(), ops.NameOf(t), c.lib.NBytes(t))}
	}
	return nil
}

// rows copies n floats of the tensor from element off.
func (c *Context) rows(t *ops.Tensor, off, n int) []float32 { return c.lib.TensorFloats(t, off, n) }

// appendRows appends the tensor's first n floats to dst, read straight
// into its spare capacity where it has enough (startOutputs sizes the
// logits for the whole batch: they are held once).
func (c *Context) appendRows(dst []float32, t *ops.Tensor, n int) []float32 {
	at := len(dst)
	dst = slices.Grow(dst, n)[:at+n]
	c.lib.ReadFloats(t, 0, dst[at:])
	return dst
}

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
