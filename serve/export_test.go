package serve

import "github.com/ggload/ggload/infer"

// SetDecodeHook makes every batch pass through fn before it is decoded:
// fn's error fails the decode (tests of a failed decode). Set it before
// the first request.
func (e *Engine) SetDecodeHook(fn func(infer.Batch) error) { e.decodeHook = fn }
