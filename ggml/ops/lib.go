package ops

import (
	"fmt"

	"github.com/ggload/ggload/bindings"
)

// Lib is the native set's graph API.
type Lib struct {
	b        *bindings.Lib
	overhead uintptr // ggml_tensor_overhead
	pool     bufPool // the memory of freed contexts
}

// New is the graph API of an opened native set. Package ggml makes the
// one of a Runtime (ggml.Runtime.Ops).
func New(b *bindings.Lib) *Lib { return &Lib{b: b, overhead: b.TensorOverhead()} }

// Handles of native objects the caller owns (or, for devices, buffer
// types and registries, the process's).
type (
	Dev     bindings.Dev     // ggml_backend_dev_t
	Buft    bindings.Buft    // ggml_backend_buffer_type_t
	Buffer  bindings.Buffer  // ggml_backend_buffer_t
	Backend bindings.Backend // ggml_backend_t
	Sched   bindings.Sched   // ggml_backend_sched_t
	Reg     bindings.Reg     // ggml_backend_reg_t
)

// Tensor is a ggml_tensor in native memory: its fields are the C struct's.
type Tensor bindings.Tensor

func (t *Tensor) c() *bindings.Tensor { return (*bindings.Tensor)(t) }

func wrap(t *bindings.Tensor) *Tensor { return (*Tensor)(t) }

// NameOf is the tensor's name.
func NameOf(t *Tensor) string { return bindings.GoString(&t.Name[0]) }

// AssertError is a GGML_ASSERT of ggml.c that the arguments of an op would
// fail: the op was not made.
type AssertError struct {
	Op   string // the ggml function ("ggml_mul_mat")
	Cond string // ggml's condition, as ggml.c writes it
}

func (e *AssertError) Error() string { return fmt.Sprintf("GGML_ASSERT(%s) failed", e.Cond) }

// check is one GGML_ASSERT: its condition and its text.
type check struct {
	ok   bool
	cond string
}

// asserts makes ggml's checks of op in their order: the first that fails
// is the error.
func asserts(op string, cs ...check) error {
	for _, x := range cs {
		if !x.ok {
			return &AssertError{Op: op, Cond: x.cond}
		}
	}
	return nil
}

// assert is one GGML_ASSERT of op.
func assert(op string, ok bool, cond string) error {
	if ok {
		return nil
	}
	return &AssertError{Op: op, Cond: cond}
}

// ggml's types the checks name.
const (
	TypeF32   = 0
	TypeF16   = 1
	TypeI32   = 26
	TypeI64   = 27
	TypeCount = 43 // GGML_TYPE_COUNT
)

// MaxSrc is GGML_MAX_SRC.
const MaxSrc = bindings.MaxSrc

// OpName is ggml_op_name.
func (l *Lib) OpName(op int32) string { return l.b.OpName(op) }

// TypeName is ggml_type_name.
func (l *Lib) TypeName(typ int32) string { return l.b.TypeName(typ) }

// TypeSize is ggml_type_size.
func (l *Lib) TypeSize(typ int32) uintptr { return l.b.TypeSize(typ) }

// BlckSize is ggml_blck_size.
func (l *Lib) BlckSize(typ int32) int64 { return l.b.BlckSize(typ) }

// TensorOverhead is ggml_tensor_overhead.
func (l *Lib) TensorOverhead() uintptr { return l.overhead }

// GraphOverheadCustom is ggml_graph_overhead_custom.
func (l *Lib) GraphOverheadCustom(size uintptr, grads bool) uintptr {
	return l.b.GraphOverheadCustom(size, grads)
}
