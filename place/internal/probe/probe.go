// Port of llama.cpp src/llama-model-loader.cpp (v0.5.0):
// weight_buft_supported.

// Package probe answers llama.cpp's weight_buft_supported question for
// package place: can a device run the op a weight is used with when the
// weight lives in a buffer of a given type? It builds the pin's tiny op
// over a zero-size buffer and asks supports_op, and caches the answers.
package probe

import (
	"context"
	"fmt"

	"github.com/ggload/ggload/ggml"
)

// Model is what of a model's hyperparameters the probes' shapes read (as
// llama.cpp's hparams give them).
type Model struct {
	Arch          string // the architecture, as messages print it
	ExpertUsedMax int64  // n_expert_used_max()
	RouterLayer   int64  // granite-switch's router layer, -1 when none
	EmbdHeadV     int64  // n_embd_head_v() of layer 0
	Head0         int64  // n_head() of layer 0
	SSMDState     int64
	SSMDInner     int64
	SSMNGroup     int64
	EmbdInp       int64 // n_embd_inp()
}

// Prober answers the question for the weights of one model. Answers are
// cached by everything they depend on: the op, the weight's type and
// shape, the buffer type, the device, and the hyperparameters the op's
// shape uses.
type Prober struct {
	ctx     context.Context // ends the planning between questions
	rt      *ggml.Runtime
	h       Model
	noCache bool

	cache  map[probeKey]bool
	Asked  int // questions
	Probes int // questions that reached the device
}

type probeKey struct {
	op    ggml.Op
	typ   ggml.Type
	ne    ggml.Shape
	buft  ggml.BufferType
	dev   *ggml.Device
	extra [4]int64
}

// New makes the prober of model h on rt's devices; ctx ends the
// questions. noCache asks every question anew (the tests' way to count
// them).
func New(ctx context.Context, rt *ggml.Runtime, h Model, noCache bool) *Prober {
	return &Prober{ctx: ctx, rt: rt, h: h, noCache: noCache, cache: map[probeKey]bool{}}
}

// Err is the error of the context that ends the questions.
func (p *Prober) Err() error { return p.ctx.Err() }

// extra is the part of the hyperparameters an op's probe shape reads.
func (p *Prober) extra(op ggml.Op) [4]int64 {
	h := p.h
	switch op {
	case ggml.OpMulMatID, ggml.OpAddID:
		return [4]int64{h.ExpertUsedMax, h.RouterLayer}
	case ggml.OpRope:
		return [4]int64{h.EmbdHeadV, h.Head0}
	case ggml.OpSSMScan:
		return [4]int64{h.SSMDState, h.SSMDInner, h.SSMNGroup}
	case ggml.OpIm2Col:
		return [4]int64{h.EmbdInp}
	}
	return [4]int64{}
}

// Supported reports whether dev supports op for weight w in buft.
func (p *Prober) Supported(name string, typ ggml.Type, ne ggml.Shape, op ggml.Op, buft ggml.BufferType, dev *ggml.Device) (bool, error) {
	if op == ggml.OpNone {
		return true, nil
	}
	p.Asked++
	key := probeKey{op, typ, ne, buft, dev, p.extra(op)}
	if !p.noCache {
		if ok, hit := p.cache[key]; hit {
			return ok, nil
		}
	}
	if err := p.ctx.Err(); err != nil {
		return false, fmt.Errorf("place: planning ended: %w", err)
	}
	ok, err := p.ask(name, typ, ne, op, buft, dev)
	if err != nil {
		return false, err
	}
	p.Probes++
	p.cache[key] = ok
	return ok, nil
}

func (p *Prober) ask(name string, typ ggml.Type, ne ggml.Shape, op ggml.Op, buft ggml.BufferType, dev *ggml.Device) (bool, error) {
	ctx, err := p.rt.NewContext(ggml.ContextParams{Tensors: 8, NoAlloc: true})
	if err != nil {
		return false, err
	}
	defer ctx.Free()
	w, err := ctx.NewTensor(typ, ne[:]...)
	if err != nil {
		return false, fmt.Errorf("place: tensor %q: %w", name, err)
	}
	opt, err := p.build(ctx, w, op)
	if err != nil {
		return false, fmt.Errorf("place: tensor %q (%s %v) cannot be used with %s as llama.cpp's probe builds it: %w", name, typ, ne, p.rt.OpName(op), err)
	}
	return dev.SupportsWeightOp(opt, w, buft)
}

// build makes the op as weight_buft_supported does
// (src/llama-model-loader.cpp:927-1064).
func (p *Prober) build(ctx *ggml.Context, w *ggml.Tensor, op ggml.Op) (*ggml.Tensor, error) {
	ne := w.Shape()
	switch op {
	case ggml.OpGetRows:
		b, err := i32(ctx, 512)
		if err != nil {
			return nil, err
		}
		return ctx.GetRows(w, b)
	case ggml.OpMulMat:
		b, err := f32(ctx, ne[0], 512, ne[2], ne[3])
		if err != nil {
			return nil, err
		}
		return ctx.MulMat(w, b)
	case ggml.OpMulMatID, ggml.OpAddID:
		return p.buildExperts(ctx, w, op)
	case ggml.OpAdd, ggml.OpMul:
		a, err := f32(ctx, ne[0], ne[1], ne[2], ne[3])
		if err != nil {
			return nil, err
		}
		if op == ggml.OpAdd {
			return ctx.Add(a, w)
		}
		return ctx.Mul(a, w)
	case ggml.OpDiv:
		a, err := f32(ctx, ne[0])
		if err != nil {
			return nil, err
		}
		return ctx.Div(a, w)
	case ggml.OpRope:
		a, err := f32(ctx, p.h.EmbdHeadV, p.h.Head0, 512)
		if err != nil {
			return nil, err
		}
		b, err := i32(ctx, 512)
		if err != nil {
			return nil, err
		}
		return ctx.RopeExt(a, b, w, ggml.RopeParams{})
	case ggml.OpSSMConv:
		sx, err := f32(ctx, ne[0]-1+512, ne[1], 3)
		if err != nil {
			return nil, err
		}
		return ctx.SSMConv(sx, w)
	case ggml.OpSSMScan:
		return p.buildSSMScan(ctx, w)
	case ggml.OpRWKVWKV6:
		return buildRWKVWKV6(ctx, w)
	case ggml.OpIm2Col:
		b, err := f32(ctx, p.h.EmbdInp, ne[1], 1, 1)
		if err != nil {
			return nil, err
		}
		return ctx.Im2Col(w, b, 1, 0, 0, 0, 1, 0, false, ggml.TypeF16)
	case ggml.OpScale:
		return ctx.Scale(w, 1)
	}
	return nil, fmt.Errorf("llama.cpp has no probe for op %s", p.rt.OpName(op))
}

// buildExperts makes MUL_MAT_ID or ADD_ID over expert weight w, for the
// experts a token uses.
func (p *Prober) buildExperts(ctx *ggml.Context, w *ggml.Tensor, op ggml.Op) (*ggml.Tensor, error) {
	ne := w.Shape()
	// granite-switch's router layer routes to one adapter at a time
	n := p.h.ExpertUsedMax
	if op == ggml.OpMulMatID && p.h.RouterLayer >= 0 {
		n = 1
	}
	if n <= 0 {
		return nil, fmt.Errorf("the model uses experts but %s.expert_used_count is 0", p.h.Arch)
	}
	a, err := f32(ctx, ne[0], n, 512)
	if err != nil {
		return nil, err
	}
	ids, err := i32(ctx, n, 512)
	if err != nil {
		return nil, err
	}
	if op == ggml.OpMulMatID {
		return ctx.MulMatID(w, a, ids)
	}
	return ctx.AddID(a, w, ids)
}

// buildSSMScan makes SSM_SCAN over w (ssm_a), its state and inputs shaped
// by the hyperparameters.
func (p *Prober) buildSSMScan(ctx *ggml.Context, w *ggml.Tensor) (*ggml.Tensor, error) {
	ne, h := w.Shape(), p.h
	dState := ne[0]
	if dState == 1 {
		dState = h.SSMDState
	}
	nHead := ne[1]
	if nHead <= 0 {
		return nil, fmt.Errorf("ssm_a has no heads")
	}
	headDim := h.SSMDInner / nHead
	nGroup := max(h.SSMNGroup, 1)
	s, err := f32(ctx, dState, headDim, nHead, 3)
	if err != nil {
		return nil, err
	}
	x, err := f32(ctx, headDim, nHead, 512, 3)
	if err != nil {
		return nil, err
	}
	dt, err := f32(ctx, nHead, 512, 3)
	if err != nil {
		return nil, err
	}
	B, err := f32(ctx, dState, nGroup, 512, 3)
	if err != nil {
		return nil, err
	}
	C, err := f32(ctx, dState, nGroup, 512, 3)
	if err != nil {
		return nil, err
	}
	ids, err := i32(ctx, 3)
	if err != nil {
		return nil, err
	}
	return ctx.SSMScan(s, x, dt, w, B, C, ids)
}

// buildRWKVWKV6 makes RWKV_WKV6 over w with llama.cpp's fixed probe sizes.
func buildRWKVWKV6(ctx *ggml.Context, w *ggml.Tensor) (*ggml.Tensor, error) {
	const S, H, T, N = 123, 123, 123, 123
	var ts [4]*ggml.Tensor
	for i := range ts {
		t, err := f32(ctx, S, H, T)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	state, err := f32(ctx, S, N, S, H)
	if err != nil {
		return nil, err
	}
	return ctx.RWKVWKV6(ts[0], ts[1], ts[2], w, ts[3], state)
}

// f32 and i32 make a probe's inputs.
func f32(ctx *ggml.Context, ne ...int64) (*ggml.Tensor, error) {
	return ctx.NewTensor(ggml.TypeF32, ne...)
}

func i32(ctx *ggml.Context, ne ...int64) (*ggml.Tensor, error) {
	return ctx.NewTensor(ggml.TypeI32, ne...)
}
