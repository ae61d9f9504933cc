package place

// WithoutProbeCache returns p set to ask every supports_op question anew.
func WithoutProbeCache(p Params) Params {
	p.noProbeCache = true
	return p
}
