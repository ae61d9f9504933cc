package llama

import "unsafe"

// KVOverrideLayout is the mirror's size and its value's offset.
func KVOverrideLayout() (uintptr, uintptr) {
	var o kvOverride
	return unsafe.Sizeof(o), unsafe.Offsetof(o.val)
}
