package ggml

import "errors"

// Errors callers branch on, all usable with errors.Is. Alongside them:
// ErrClosed (runtime.go), ErrRPCUnreachable and ErrRPCFailed (rpc.go; the
// guard, internal/rpcrelay, wraps the latter), ErrUnknownDevice, ErrUnknownBufferType, and the standard
// library's errors.ErrUnsupported for what a device or the native set
// cannot do (events, buffers from host memory, split buffers, RPC).
var (
	// ErrOutOfMemory is wrapped when a device refuses an allocation.
	ErrOutOfMemory = errors.New("out of device memory")
	// ErrWriteOnly is wrapped when a tensor lives in a buffer whose type
	// stores data rearranged (the CPU's extra buffer types, CPU_REPACK)
	// and cannot be read back. Plan with place.Params.NoExtraBufts (the
	// CLI's --no-repack) to keep weights readable.
	ErrWriteOnly = errors.New("buffer type stores data repacked and cannot be read back")
)

// Error is the error of every function and method of this package: the
// ggml call that failed, where, and why. Its text is its cause's, which
// names the place too; the fields give the place to programs, and Unwrap
// the cause, through which errors.Is finds the sentinels.
type Error struct {
	// Op is the ggml call, named without its ggml_ or ggml_backend_
	// prefix ("buft_alloc_buffer", "tensor_set", "mul_mat"), or, for a
	// check made in Go alone, what was asked ("dev_by_name", "rpc_probe").
	Op         string
	Device     string // the device's name, "" when none
	BufferType string // the buffer type's name, "" when none
	Tensor     string // the tensor (an op's first operand), "" when none
	Endpoint   string // an RPC server's host:port, "" when none
	// Off and Size are the bytes of Tensor a copy concerned (tensor_set,
	// tensor_get and their async forms); an allocation gives Size alone,
	// the bytes asked for. Both are zero otherwise.
	Off, Size uint64
	Err       error // the cause
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "ggml: " + e.Op + " failed"
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// wrap is err as an *Error at place p: a copy of err when it is one
// already (an inner call's, whose place is nearer) with the fields it
// lacks taken from p, else p with err as its cause.
func (p Error) wrap(err error) *Error {
	e, ok := err.(*Error)
	if !ok {
		p.Err = err
		return &p
	}
	c := *e
	fill := func(dst *string, src string) {
		if *dst == "" {
			*dst = src
		}
	}
	fill(&c.Op, p.Op)
	fill(&c.Device, p.Device)
	fill(&c.BufferType, p.BufferType)
	fill(&c.Tensor, p.Tensor)
	fill(&c.Endpoint, p.Endpoint)
	if c.Off == 0 && c.Size == 0 {
		c.Off, c.Size = p.Off, p.Size
	}
	return &c
}

// at is where a call ran, as placed names it: any of a device, a buffer
// type, a buffer, a tensor and its bytes, an endpoint.
type at struct {
	dev       *Device
	buft      BufferType
	buf       *Buffer
	t         *Tensor
	off, size uint64
	endpoint  string
}

// placed sets *err, when it is not nil, to an *Error of op at w: every
// exported function that can fail defers it. The names are read only
// then, the tensor's and the buffer's under their holds (a deferred
// placed runs after the function's own releases).
func placed(err *error, op string, w at) {
	if *err == nil {
		return
	}
	p := Error{Op: op, Off: w.off, Size: w.size, Endpoint: w.endpoint}
	if w.dev != nil {
		p.Device = w.dev.name
		if p.Endpoint == "" {
			p.Endpoint = w.dev.Endpoint()
		}
	}
	if w.buf != nil && w.buft.h == 0 {
		w.buft = w.buf.Type() // the zero BufferType once freed
	}
	w.buft.where(&p)
	w.t.where(&p)
	*err = p.wrap(*err)
}

// where fills in p the buffer type's name and its device's.
func (b BufferType) where(p *Error) {
	if b.h == 0 {
		return
	}
	if p.BufferType == "" {
		p.BufferType = b.Name()
	}
	if d, ok := b.Device(); ok && p.Device == "" {
		p.Device = d.name
		if p.Endpoint == "" {
			p.Endpoint = d.Endpoint()
		}
	}
}

// where fills in p the tensor's name and the type and device of the
// buffer it lives in, while it lives in one.
func (t *Tensor) where(p *Error) {
	if t == nil {
		return
	}
	if p.Tensor == "" {
		p.Tensor = t.name
	}
	b, err := t.hold("place")
	if err != nil {
		return
	}
	defer t.unhold(b)
	h := t.c.Buffer
	if t.c.ViewSrc != nil {
		h = t.c.ViewSrc.Buffer
	}
	if h != 0 && handles.live(h) {
		BufferType{t.rt, t.rt.lib.BufferGetType(h)}.where(p)
	}
}
