package loader

import "github.com/ggload/ggload/loader/internal/mmap"

// SetBeforeTensor installs f to be called in the loading goroutine before
// each tensor's bytes are moved (seq counts the tensors of the load from
// 0); the returned function removes it. Tests strike at a chosen point of
// a load with it (truncate, replace or rewrite the file).
func SetBeforeTensor(f func(seq int, name string)) (restore func()) {
	old := beforeTensor
	beforeTensor = f
	return func() { beforeTensor = old }
}

// Mappings lists the file mappings the model keeps (nil entries for files
// that are not mapped).
func (m *Model) Mappings() []*Mapping { return m.mappings }

// Mapping is the mapping type, named for the tests.
type Mapping = mmap.Mapping

// SetAddressHeadroom sets the address space a load leaves beyond its
// bound under an address-space limit; the returned function restores it.
func SetAddressHeadroom(n uint64) (restore func()) {
	old := addressHeadroom
	addressHeadroom = n
	return func() { addressHeadroom = old }
}
