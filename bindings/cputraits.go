package bindings

import "sync"

// TypeTraitsCPU mirrors struct ggml_type_traits_cpu of the pinned
// ggml-cpu.h: the CPU backend's kernels for one type.
type TypeTraitsCPU struct {
	FromFloat  uintptr // ggml_from_float_t: quantizes a row of floats
	VecDot     uintptr // ggml_vec_dot_t: the dot product of a matrix product
	VecDotType int32   // enum ggml_type the other operand is converted to
	_          [4]byte
	NRows      int64
}

// cpuTraits is ggml_get_type_traits_cpu of a CPU backend module.
type cpuTraits struct {
	once sync.Once
	fn   func(typ int32) *TypeTraitsCPU
}

// CPUTypeTraits returns the CPU backend's kernels for type typ
// (ggml_get_type_traits_cpu of the module that registered reg, the CPU
// backend's registry), and false where they cannot be read: ggml loads a
// backend module with its symbols local, so the function is found in the
// module that holds one of the entry points it publishes (dladdr).
// ggml's supports_op of the CPU does not look at them: a matrix product of
// a type without a vec_dot (an integer type, f64) is "supported", and the
// CPU then calls a null function.
func (l *Lib) CPUTypeTraits(reg Reg, typ int32) (TypeTraitsCPU, bool) {
	l.cpuTraits.once.Do(func() {
		addr := l.RegGetProcAddress(reg, "ggml_backend_get_features")
		if addr == 0 {
			return
		}
		if sym := moduleSymbol(addr, "ggml_get_type_traits_cpu"); sym != 0 {
			registerFunc(&l.cpuTraits.fn, sym)
		}
	})
	if l.cpuTraits.fn == nil || typ < 0 || typ >= typeCount {
		return TypeTraitsCPU{}, false
	}
	p := l.cpuTraits.fn(typ)
	if p == nil {
		return TypeTraitsCPU{}, false
	}
	return *p, true
}

// typeCount is GGML_TYPE_COUNT of the pin: ggml_get_type_traits_cpu
// indexes a table of that size.
const typeCount = 43
