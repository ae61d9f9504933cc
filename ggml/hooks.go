package ggml

import (
	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/internal/hooks"
)

func init() {
	hooks.Lib = func(rt any) *bindings.Lib { return rt.(*Runtime).lib }
	hooks.TensorC = func(t any) *bindings.Tensor {
		tn := t.(*Tensor)
		if tn.ctx.Freed() {
			return nil
		}
		return tn.c
	}
	hooks.LiveBuffers = liveBuffers.Load
}
