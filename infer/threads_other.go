//go:build !linux

package infer

// newLoadMeter is nil where ggload reads no load: the thread count is
// the physical cores.
func newLoadMeter() loadMeter { return nil }
