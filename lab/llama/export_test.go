package llama

import "unsafe"

// KVOverrideLayout is the mirror's size and its value's offset.
func KVOverrideLayout() (uintptr, uintptr) {
	var o kvOverride
	return unsafe.Sizeof(o), unsafe.Offsetof(o.val)
}

// ContextParamsSize is the llama_context_params mirror's size.
func ContextParamsSize() uintptr { return unsafe.Sizeof(ContextParams{}) }
