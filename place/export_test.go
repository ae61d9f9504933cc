package place

// WithoutProbeCache returns p set to ask every supports_op question anew.
func WithoutProbeCache(p Params) Params {
	p.noProbeCache = true
	return p
}

// MemoryReplays is how many contexts' memories and compute buffers were
// planned anew so far.
func MemoryReplays() int64 { return memoryReplays.Load() }
