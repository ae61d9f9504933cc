package infer

// Info is what a context is made of, as a server reads it from
// llama_n_ctx, llama_n_ctx_seq, llama_pooling_type and the model's
// hyperparameters.
type Info struct {
	Arch                   string
	NCtx, NCtxSeq, NSeqMax int // llama_n_ctx, llama_n_ctx_seq, llama_n_seq_max
	NBatch, NUBatch        int
	NCtxTrain              int  // llama_model_n_ctx_train
	NSWA                   int  // llama_model_n_swa (0: no sliding window)
	NRSSeq                 int  // llama_n_rs_seq: a recurrent state's rollback snapshots
	Pooling                int  // llama_pooling_type (0 none, 1 mean, 2 cls, 3 last, 4 rank)
	Embeddings             bool // the context outputs embeddings (cparams.embeddings)
	Memory                 bool // llama_get_memory is not null
	Recurrent              bool // the memory has a recurrent state
	NEmbdOut               int  // llama_model_n_embd_out (rank pooling: its classifier's outputs)
	NVocab                 int  // the logits' width
	CausalAttn, KVUnified  bool
	CanShift               bool // llama_memory_can_shift
	MemoryClass            string
}

// Info describes the context.
func (c *Context) Info() Info {
	if c.hold() != nil {
		return Info{}
	}
	defer c.mu.Unlock()
	cm := c.model.Plan.Context
	i := Info{Arch: c.rep.Run.Arch, NSeqMax: int(c.nSeqMax), NBatch: int(c.nBatch), NUBatch: int(c.nUBatch), CausalAttn: c.causal,
		NCtxTrain: int(c.hparam("n_ctx_train")), NSWA: int(c.hparam("n_swa")), Pooling: int(c.gc.CParam("pooling_type")),
		Embeddings: c.embeddings(), NVocab: c.vocabSize(), CanShift: c.canShift() == nil}
	if cm != nil {
		i.NCtx, i.NCtxSeq, i.KVUnified = int(cm.NCtx), int(cm.NCtxSeq), cm.KVUnified
	}
	if mem := c.rep.Memory; mem != nil && len(mem.Caches) > 0 {
		i.Memory, i.MemoryClass = true, mem.Class
	}
	if c.recr != nil {
		i.Recurrent, i.NRSSeq = true, int(c.recr.nRSSeq)
	}
	if w, err := c.rep.Run.Hparams().Call("n_embd_out"); err == nil {
		i.NEmbdOut = int(w)
	}
	if i.Pooling == poolingRank {
		i.NEmbdOut = int(c.hparam("n_cls_out"))
	}
	return i
}
