package llama

import (
	"fmt"
	"sync"

	"github.com/ggload/ggload/bindings"
)

// cvecLib is libllama's control vector call (include/llama.h of v0.5.0).
type cvecLib struct {
	SetAdapterCvec func(ctx uintptr, data *float32, n uintptr, nEmbd, ilStart, ilEnd int32) int32 `c:"llama_set_adapter_cvec"`
}

// cvecLibs are the bound calls, per library.
var cvecLibs sync.Map // *Lib → *cvecLib

func (l *Lib) cvec() (*cvecLib, error) {
	if v, ok := cvecLibs.Load(l); ok {
		return v.(*cvecLib), nil
	}
	c := &cvecLib{}
	if err := bindings.Bind(c, l.handle); err != nil {
		return nil, err
	}
	v, _ := cvecLibs.LoadOrStore(l, c)
	return v.(*cvecLib), nil
}

// SetControlVector is llama_set_adapter_cvec: data holds nEmbd floats per
// layer from layer 1 on, applied to layers ilStart to ilEnd (both
// included); nil data clears the control vector. A non-zero return is an
// error.
func (c *Context) SetControlVector(data []float32, nEmbd, ilStart, ilEnd int32) error {
	l, err := c.l.cvec()
	if err != nil {
		return err
	}
	var p *float32
	if len(data) > 0 {
		p = &data[0]
	}
	if r := l.SetAdapterCvec(c.h, p, uintptr(len(data)), nEmbd, ilStart, ilEnd); r != 0 {
		return fmt.Errorf("llama_set_adapter_cvec returned %d", r)
	}
	return nil
}
