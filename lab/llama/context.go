package llama

import (
	"errors"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// ContextParams mirrors struct llama_context_params (include/llama.h of
// v0.5.0): 160 bytes, 8-byte aligned.
type ContextParams struct {
	NCtx              uint32
	NBatch            uint32
	NUBatch           uint32
	NSeqMax           uint32
	NRSSeq            uint32
	NOutputsMax       uint32
	NOutputsMaxPerSeq uint32
	NThreads          int32
	NThreadsBatch     int32
	CtxType           int32
	RopeScalingType   int32
	PoolingType       int32
	AttentionType     int32
	FlashAttnType     int32
	RopeFreqBase      float32
	RopeFreqScale     float32
	YarnExtFactor     float32
	YarnAttnFactor    float32
	YarnBetaFast      float32
	YarnBetaSlow      float32
	YarnOrigCtx       uint32
	DefragThold       float32
	CbEval            uintptr
	CbEvalUserData    uintptr
	TypeK             int32
	TypeV             int32
	AbortCallback     uintptr
	AbortCallbackData uintptr
	Embeddings        bool
	OffloadKQV        bool
	NoPerf            bool
	OpOffload         bool
	SWAFull           bool
	KVUnified         bool
	_                 [2]byte
	Samplers          uintptr
	NSamplers         uintptr
	CtxOther          uintptr
}

// contextLib is libllama's context API.
type contextLib struct {
	ContextDefaultParams func() ContextParams                     `c:"llama_context_default_params"`
	InitFromModel        func(m uintptr, p ContextParams) uintptr `c:"llama_init_from_model"`
	Free                 func(ctx uintptr)                        `c:"llama_free"`
	NCtx                 func(ctx uintptr) uint32                 `c:"llama_n_ctx"`
	NBatch               func(ctx uintptr) uint32                 `c:"llama_n_batch"`
	NUBatch              func(ctx uintptr) uint32                 `c:"llama_n_ubatch"`
	NSeqMax              func(ctx uintptr) uint32                 `c:"llama_n_seq_max"`
	// std::map<ggml_backend_buffer_type_t, llama_memory_breakdown_data>
	// returned by value: purego passes the result's address first
	memoryBreakdown func(ret *stdMap, ctx uintptr) `c:"_Z26llama_get_memory_breakdownPK13llama_context"`
}

// stdMap is libstdc++'s std::map (a _Rb_tree): the comparator (empty,
// padded to 8 bytes), the header node (color, parent, leftmost,
// rightmost) and the node count: 48 bytes.
type stdMap struct {
	_      uintptr
	color  int32
	_      int32
	parent unsafe.Pointer
	left   unsafe.Pointer
	right  unsafe.Pointer
	count  uintptr
}

// rbNode is _Rb_tree_node_base, followed in memory by the value.
type rbNode struct {
	color  int32
	_      int32
	parent unsafe.Pointer
	left   unsafe.Pointer
	right  unsafe.Pointer
}

// Context is a llama_context.
type Context struct {
	l *Lib
	h uintptr
}

// BreakdownEntry is one buffer type's line of llama_get_memory_breakdown.
type BreakdownEntry struct {
	BufferType bindings.Buft
	Model      uint64
	Context    uint64
	Compute    uint64
}

// NewContext makes a context for m with p (llama_init_from_model); the
// error carries llama.cpp's own line.
func (m *Model) NewContext(p ContextParams) (*Context, []LogLine, error) {
	return m.NewContextTap(p, nil)
}

// NewContextTap is NewContext with each of llama.cpp's log lines also
// handed to tap as it comes (before a native abort can lose it).
func (m *Model) NewContextTap(p ContextParams, tap func(LogLine)) (*Context, []LogLine, error) {
	cl, err := m.l.context()
	if err != nil {
		return nil, nil, err
	}
	var lines []LogLine
	old := bindings.SetLogTap(func(level int, line string) {
		lines = append(lines, LogLine{level, line})
		if tap != nil {
			tap(LogLine{level, line})
		}
	})
	h := cl.InitFromModel(m.h, p)
	bindings.SetLogTap(old)
	if h == 0 {
		msg := "llama_init_from_model failed"
		for _, ln := range lines {
			if ln.Level == 4 {
				msg = strings.TrimSpace(ln.Text)
			}
		}
		return nil, lines, errors.New("llama: " + msg)
	}
	return &Context{m.l, h}, lines, nil
}

// ContextDefaultParams is llama_context_default_params.
func (l *Lib) ContextDefaultParams() (ContextParams, error) {
	cl, err := l.context()
	if err != nil {
		return ContextParams{}, err
	}
	return cl.ContextDefaultParams(), nil
}

func (l *Lib) context() (*contextLib, error) {
	l.ctxOnce.Do(func() {
		cl := &contextLib{}
		if err := bindings.Bind(cl, l.handle); err != nil {
			l.ctxErr = err
			return
		}
		l.ctxLib = cl
	})
	return l.ctxLib, l.ctxErr
}

// Free frees the context.
func (c *Context) Free() {
	if c.h != 0 {
		c.l.ctxLib.Free(c.h)
		c.h = 0
	}
}

// Sizes are the context's n_ctx, n_batch, n_ubatch and n_seq_max.
func (c *Context) Sizes() (nCtx, nBatch, nUBatch, nSeqMax uint32) {
	cl := c.l.ctxLib
	return cl.NCtx(c.h), cl.NBatch(c.h), cl.NUBatch(c.h), cl.NSeqMax(c.h)
}

// MemoryBreakdown is llama_get_memory_breakdown: per buffer type, the
// model's, the context's (memory modules) and the compute buffers' bytes.
// The map is read in its order (the buffer types' addresses) and left to
// the harness's process (a few nodes per call).
func (c *Context) MemoryBreakdown() []BreakdownEntry {
	var m stdMap
	c.l.ctxLib.memoryBreakdown(&m, c.h)
	runtime.KeepAlive(&m)
	var out []BreakdownEntry
	header := unsafe.Pointer(&m.color)
	for n := m.left; n != nil && n != header && len(out) < int(m.count); n = rbNext(n, header) {
		v := unsafe.Add(n, unsafe.Sizeof(rbNode{}))
		out = append(out, BreakdownEntry{
			BufferType: *(*bindings.Buft)(v),
			Model:      *(*uint64)(unsafe.Add(v, 8)),
			Context:    *(*uint64)(unsafe.Add(v, 16)),
			Compute:    *(*uint64)(unsafe.Add(v, 24)),
		})
	}
	return out
}

// rbNext is _Rb_tree_increment: the in-order successor.
func rbNext(n, header unsafe.Pointer) unsafe.Pointer {
	x := (*rbNode)(n)
	if x.right != nil {
		y := x.right
		for (*rbNode)(y).left != nil {
			y = (*rbNode)(y).left
		}
		return y
	}
	y := x.parent
	for y != header && n == (*rbNode)(y).right {
		n = y
		y = (*rbNode)(y).parent
	}
	if (*rbNode)(n).right != y {
		return y
	}
	return n
}
