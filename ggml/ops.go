package ggml

import (
	"fmt"

	"github.com/ggload/ggload/bindings"
)

// Op is enum ggml_op of the pinned release (only the ops ggload names).
type Op int32

// Ops that weights are used with, in the pinned release's numbering.
const (
	OpNone     Op = 0
	OpAdd      Op = 2
	OpAddID    Op = 3
	OpMul      Op = 7
	OpDiv      Op = 8
	OpMulMat   Op = 29
	OpMulMatID Op = 30
	OpScale    Op = 32
	OpGetRows  Op = 40
	OpRope     Op = 48
	OpIm2Col   Op = 52
	OpSSMConv  Op = 76
	OpSSMScan  Op = 77
	OpRWKVWKV6 Op = 82
)

// Name is ggml's name for the op (ggml_op_name), read from the library.
func (rt *Runtime) OpName(op Op) string { return rt.lib.OpName(int32(op)) }

func (t *Tensor) isVector() bool { return t.ne[1] == 1 && t.ne[2] == 1 && t.ne[3] == 1 }
func (t *Tensor) isMatrix() bool { return t.ne[2] == 1 && t.ne[3] == 1 }
func (t *Tensor) is3D() bool     { return t.ne[3] == 1 }
func (t *Tensor) isEmpty() bool {
	for _, d := range t.ne {
		if d == 0 {
			return true
		}
	}
	return false
}
func (t *Tensor) isTransposed() bool { return t.nb[0] > t.nb[1] }
func (t *Tensor) isContiguous() bool { return t.rt.lib.IsContiguous(t.c) }

// canRepeat is ggml_can_repeat(a, b): a can be broadcast to b.
func canRepeat(a, b *Tensor) bool {
	if a.isEmpty() {
		return b.isEmpty()
	}
	for i := 0; i < 4; i++ {
		if a.ne[i] <= 0 || b.ne[i]%a.ne[i] != 0 {
			return false
		}
	}
	return true
}

// opError is an op refused for its operands (build wraps it in an *Error
// of the op): the reason, and each operand's name, type and shape.
type opError struct {
	op     string
	reason string
	args   []*Tensor
}

func (e *opError) Error() string {
	s := "ggml: " + e.op + ": " + e.reason + " ("
	for i, a := range e.args {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %s %v", a.Name(), a.Type(), a.Shape())
	}
	return s + ")"
}

func (c *Context) build(op string, check func() string, make func() *bindings.Tensor, args ...*Tensor) (_ *Tensor, err error) {
	defer placed(&err, op, at{t: args[0]})
	for _, a := range args {
		if a == nil {
			return nil, fmt.Errorf("ggml: %s: nil operand", op)
		}
		if a.ctx.dead.Load() {
			return nil, fmt.Errorf("ggml: %s: operand %s: %w: its context was freed", op, a.name, ErrClosed)
		}
	}
	if why := check(); why != "" {
		return nil, &opError{op, why, args}
	}
	// results get their memory from backend buffers (a scheduler or
	// AllocTensors), never from the context, so only metadata must fit
	if !c.noAlloc {
		return nil, fmt.Errorf("ggml: %s: ops are built in NoAlloc contexts", op)
	}
	if err := c.hold(); err != nil {
		return nil, fmt.Errorf("ggml: %s: %w", op, err)
	}
	defer c.release()
	if err := c.room(0); err != nil {
		return nil, err
	}
	p := make()
	if p == nil {
		return nil, fmt.Errorf("ggml: %s failed", op)
	}
	return c.wrap(p), nil
}

// GetRows gathers rows of a selected by the I32 indices b.
func (c *Context) GetRows(a, b *Tensor) (*Tensor, error) {
	return c.build("get_rows", func() string {
		switch {
		case b.Type() != TypeI32:
			return "indices must be i32"
		case a.ne[2] != b.ne[1] || a.ne[3] != b.ne[2] || b.ne[3] != 1:
			return "index shape does not match"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.GetRows(c.h, a.c, b.c) }, a, b)
}

// MulMat is a·bᵀ over the rows of a (ggml_mul_mat).
func (c *Context) MulMat(a, b *Tensor) (*Tensor, error) {
	return c.build("mul_mat", func() string {
		switch {
		case a.isTransposed():
			return "a is transposed or has empty rows"
		case a.ne[0] != b.ne[0]:
			return "row lengths differ"
		case a.ne[2] <= 0 || a.ne[3] <= 0 || b.ne[2]%a.ne[2] != 0 || b.ne[3]%a.ne[3] != 0:
			return "b cannot be broadcast over a"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.MulMat(c.h, a.c, b.c) }, a, b)
}

// MulMatID is a mixture-of-experts matmul: as holds one matrix per expert,
// ids picks them (ggml_mul_mat_id).
func (c *Context) MulMatID(as, b, ids *Tensor) (*Tensor, error) {
	return c.build("mul_mat_id", func() string {
		switch {
		case as.isTransposed():
			return "experts are transposed or have empty rows"
		case ids.Type() != TypeI32:
			return "ids must be i32"
		case as.ne[3] != 1 || b.ne[3] != 1 || ids.ne[2] != 1 || ids.ne[3] != 1:
			return "experts and b must be 3-d, ids 2-d"
		case ids.ne[1] != b.ne[2]:
			return "ids need one expert list per row of b"
		case as.ne[0] != b.ne[0]:
			return "row lengths differ"
		case b.ne[1] <= 0 || ids.ne[0]%b.ne[1] != 0:
			return "ids cannot be broadcast over b"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.MulMatID(c.h, as.c, b.c, ids.c) }, as, b, ids)
}

func (c *Context) binary(name string, a, b *Tensor, fn func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor) (*Tensor, error) {
	return c.build(name, func() string {
		if !canRepeat(b, a) {
			return "b cannot be broadcast to a"
		}
		return ""
	}, func() *bindings.Tensor { return fn(c.h, a.c, b.c) }, a, b)
}

// Add is a+b with b broadcast to a.
func (c *Context) Add(a, b *Tensor) (*Tensor, error) { return c.binary("add", a, b, c.rt.lib.Add) }

// Mul is a·b elementwise with b broadcast to a.
func (c *Context) Mul(a, b *Tensor) (*Tensor, error) { return c.binary("mul", a, b, c.rt.lib.Mul) }

// Div is a/b elementwise with b broadcast to a.
func (c *Context) Div(a, b *Tensor) (*Tensor, error) { return c.binary("div", a, b, c.rt.lib.Div) }

// AddID adds the rows of b selected by ids to a (ggml_add_id, MoE biases).
func (c *Context) AddID(a, b, ids *Tensor) (*Tensor, error) {
	return c.build("add_id", func() string {
		switch {
		case ids.Type() != TypeI32:
			return "ids must be i32"
		case a.ne[0] != b.ne[0] || a.ne[1] != ids.ne[0] || a.ne[2] != ids.ne[1]:
			return "shapes do not match"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.AddID(c.h, a.c, b.c, ids.c) }, a, b, ids)
}

// Scale is a·s (ggml_scale).
func (c *Context) Scale(a *Tensor, s float32) (*Tensor, error) {
	return c.build("scale", func() string {
		nb := a.nb
		if nb[0] != uint64(a.Type().TypeSize()) || nb[2] != nb[1]*uint64(a.ne[1]) || nb[3] != nb[2]*uint64(a.ne[2]) {
			return "tensor is not padded-1d"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.Scale(c.h, a.c, s) }, a)
}

// RopeParams are ggml_rope_ext's scalar parameters.
type RopeParams struct {
	NDims, Mode, NCtxOrig                                          int32
	FreqBase, FreqScale, ExtFactor, AttnFactor, BetaFast, BetaSlow float32
}

// RopeExt rotates a by the I32 positions pos with optional frequency
// factors (ggml_rope_ext).
func (c *Context) RopeExt(a, pos, freq *Tensor, p RopeParams) (*Tensor, error) {
	args := []*Tensor{a, pos}
	if freq != nil {
		args = append(args, freq)
	}
	const mrope = 8 // GGML_ROPE_TYPE_MROPE
	return c.build("rope", func() string {
		switch {
		case p.Mode&1 != 0:
			return "mode & 1 is no longer supported"
		case !pos.isVector() || pos.Type() != TypeI32:
			return "positions must be an i32 vector"
		case p.Mode&mrope != 0 && a.ne[2]*4 != pos.ne[0]:
			return "mrope needs 4 positions per token"
		case p.Mode&mrope == 0 && a.ne[2] != pos.ne[0]:
			return "one position per token"
		case freq != nil && (freq.Type() != TypeF32 || freq.ne[0] < int64(p.NDims/2)):
			return "frequency factors must be f32 with n_dims/2 entries"
		}
		return ""
	}, func() *bindings.Tensor {
		var fc *bindings.Tensor
		if freq != nil {
			fc = freq.c
		}
		return c.rt.lib.RopeExt(c.h, a.c, pos.c, fc, p.NDims, p.Mode, p.NCtxOrig, p.FreqBase, p.FreqScale, p.ExtFactor, p.AttnFactor, p.BetaFast, p.BetaSlow)
	}, args...)
}

// SSMConv is Mamba's depthwise convolution (ggml_ssm_conv).
func (c *Context) SSMConv(sx, w *Tensor) (*Tensor, error) {
	return c.build("ssm_conv", func() string {
		switch {
		case !sx.is3D() || !w.isMatrix():
			return "sx must be 3-d and the kernel 2-d"
		case sx.ne[1] != w.ne[1]:
			return "channel counts differ"
		case sx.ne[0]-w.ne[0]+1 < 0:
			return "fewer inputs than the kernel width"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.SSMConv(c.h, sx.c, w.c) }, sx, w)
}

// SSMScan is Mamba's selective scan (ggml_ssm_scan) with K = 1.
func (c *Context) SSMScan(s, x, dt, A, B, C, ids *Tensor) (*Tensor, error) {
	return c.build("ssm_scan", func() string {
		ts := func(t *Tensor) uint64 { return uint64(t.Type().TypeSize()) }
		switch {
		case !s.isContiguous() || !dt.isContiguous() || !A.isContiguous():
			return "s, dt and A must be contiguous"
		case x.nb[0] != ts(x) || B.nb[0] != ts(B) || C.nb[0] != ts(C):
			return "x, B and C must have unit element stride"
		case x.nb[1] != uint64(x.ne[0])*x.nb[0] || B.nb[1] != uint64(B.ne[0])*B.nb[0] || C.nb[1] != uint64(C.ne[0])*C.nb[0]:
			return "x, B and C rows must be contiguous"
		case B.ne != C.ne:
			return "B and C shapes differ"
		case ids.Type() != TypeI32 || !ids.isVector():
			return "ids must be an i32 vector"
		}
		dState, headDim, nHead, nTok, nSeq := s.ne[0], x.ne[0], x.ne[1], x.ne[2], x.ne[3]
		switch {
		case dt.ne[0] != nHead || dt.ne[1] != nTok || dt.ne[2] != nSeq || !dt.is3D():
			return "dt shape"
		case s.ne[1] != headDim || s.ne[2] != nHead:
			return "state shape"
		case B.ne[0] != dState || B.ne[2] != nTok || B.ne[3] != nSeq:
			return "B shape"
		case ids.ne[0] != nSeq:
			return "one id per sequence"
		case A.ne[1] != nHead || !A.isMatrix():
			return "A must be [d_state or 1, n_head]"
		case A.ne[0] != 1 && A.ne[0] != dState:
			return "A's first dimension must be 1 or d_state"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.SSMScan(c.h, s.c, x.c, dt.c, A.c, B.c, C.c, ids.c, 1) }, s, x, dt, A, B, C, ids)
}

// RWKVWKV6 is RWKV-6's WKV (ggml_rwkv_wkv6).
func (c *Context) RWKVWKV6(k, v, r, tf, td, state *Tensor) (*Tensor, error) {
	return c.build("rwkv_wkv6", func() string {
		for _, t := range []*Tensor{k, v, r, tf, td, state} {
			if !t.isContiguous() {
				return "operands must be contiguous"
			}
		}
		S, H, n := k.ne[0], k.ne[1], k.ne[2]
		same := func(t *Tensor) bool { return t.ne[0] == S && t.ne[1] == H && t.ne[2] == n }
		if !same(v) || !same(r) || !same(td) {
			return "k, v, r and td shapes differ"
		}
		nst, err := state.Shape().Elements()
		if err != nil || nst != S*S*H*state.ne[1] {
			return "state size"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.RWKVWKV6(c.h, k.c, v.c, r.c, tf.c, td.c, state.c) }, k, v, r, tf, td, state)
}

// Im2Col unfolds b for a convolution with kernel a (ggml_im2col).
func (c *Context) Im2Col(a, b *Tensor, s0, s1, p0, p1, d0, d1 int32, is2D bool, dst Type) (*Tensor, error) {
	outSize := func(ins, ks int64, s, p, d int32) int64 {
		if s == 0 {
			return -1
		}
		return (ins+2*int64(p)-int64(d)*(ks-1)-1)/int64(s) + 1
	}
	return c.build("im2col", func() string {
		if !dst.Valid() {
			return "invalid destination type"
		}
		if is2D {
			if a.ne[2] != b.ne[2] {
				return "channel counts differ"
			}
			if outSize(b.ne[1], a.ne[1], s1, p1, d1) <= 0 {
				return "b too small compared to a"
			}
		} else if b.ne[1] != a.ne[1] || b.ne[3] != 1 {
			return "shapes do not match"
		}
		if outSize(b.ne[0], a.ne[0], s0, p0, d0) <= 0 {
			return "b too small compared to a"
		}
		return ""
	}, func() *bindings.Tensor {
		return c.rt.lib.IM2Col(c.h, a.c, b.c, s0, s1, p0, p1, d0, d1, is2D, int32(dst))
	}, a, b)
}

// RMSNorm divides each row of a by its root mean square (plus eps).
func (c *Context) RMSNorm(a *Tensor, eps float32) (*Tensor, error) {
	return c.build("rms_norm", func() string {
		switch {
		case a.Type() != TypeF32:
			return "a must be f32"
		case eps < 0 || eps != eps:
			return "eps must be a non-negative number"
		}
		return ""
	}, func() *bindings.Tensor { return c.rt.lib.RMSNorm(c.h, a.c, eps) }, a)
}
