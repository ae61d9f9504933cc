package ggml

// CPUMatMulKernel reports whether the CPU backend computes a matrix
// product (MUL_MAT, MUL_MAT_ID) whose first operand is of type t: the
// CPU's own table of kernels (ggml_get_type_traits_cpu) has a dot product
// for it. ggml's supports_op of the CPU answers yes for every type, and
// the CPU calls a null function for a type without one (the integer
// types, f64): the process dies. known is false where the table cannot
// be read (no CPU backend, or a platform where its module's symbols are
// out of reach).
func (rt *Runtime) CPUMatMulKernel(t Type) (has, known bool) {
	cpu := rt.CPUDevice()
	if cpu == nil {
		return false, false
	}
	tr, ok := rt.lib.CPUTypeTraits(rt.lib.DevBackendReg(cpu.h), int32(t))
	if !ok {
		return false, false
	}
	return tr.VecDot != 0, true
}
