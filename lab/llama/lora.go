package llama

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// loraLib is libllama's LoRA adapter API (and the two ggml buffer calls
// that read an adapter's buffers).
type loraLib struct {
	Init        func(m uintptr, path string) unsafe.Pointer                                   `c:"llama_adapter_lora_init"`
	Free        func(a unsafe.Pointer)                                                        `c:"llama_adapter_lora_free"`
	Set         func(ctx uintptr, adapters *unsafe.Pointer, n uintptr, scales *float32) int32 `c:"llama_set_adapters_lora"`
	NInvocation func(a unsafe.Pointer) uint64                                                 `c:"llama_adapter_get_alora_n_invocation_tokens"`
	Invocation  func(a unsafe.Pointer) *int32                                                 `c:"llama_adapter_get_alora_invocation_tokens"`
	MetaValStr  func(a unsafe.Pointer, key string, buf *byte, size uintptr) int32             `c:"llama_adapter_meta_val_str"`
	BufferName  func(b uintptr) string                                                        `c:"ggml_backend_buffer_name"`
	BufferSize  func(b uintptr) uintptr                                                       `c:"ggml_backend_buffer_get_size"`
}

var (
	loraOnce sync.Once
	loraL    *loraLib
	loraErr  error
)

func (l *Lib) lora() (*loraLib, error) {
	loraOnce.Do(func() {
		d := &loraLib{}
		if err := bindings.Bind(d, l.handle); err != nil {
			loraErr = err
			return
		}
		loraL = d
	})
	return loraL, loraErr
}

// LoRA is an adapter llama_adapter_lora_init loaded on a model.
type LoRA struct {
	l *loraLib
	h unsafe.Pointer
}

// LoRABuffer is one of an adapter's buffers, as ggml reports it.
type LoRABuffer struct {
	Name string
	Size uint64
}

// LoadLoRA is llama_adapter_lora_init of the adapter at path on m, with
// llama.cpp's log lines (its DEBUG lines say where each tensor went); the
// error carries llama.cpp's reason.
func (m *Model) LoadLoRA(path string) (*LoRA, []LogLine, error) {
	d, err := m.l.lora()
	if err != nil {
		return nil, nil, err
	}
	var lines []LogLine
	old := bindings.SetLogTap(func(level int, line string) { lines = append(lines, LogLine{level, line}) })
	h := d.Init(m.h, path)
	bindings.SetLogTap(old)
	if h == nil {
		msg := "llama_adapter_lora_init failed"
		for _, ln := range lines {
			if ln.Level == 4 && strings.Contains(ln.Text, "failed to apply lora adapter") {
				msg = strings.TrimSpace(ln.Text)
			}
		}
		return nil, lines, errors.New("llama: " + msg)
	}
	return &LoRA{d, h}, lines, nil
}

// Free is llama_adapter_lora_free.
func (a *LoRA) Free() {
	if a.h != nil {
		a.l.Free(a.h)
		a.h = nil
	}
}

// Buffers reads llama_adapter_lora::bufs (a std::vector of buffer
// pointers after the model pointer, the 56-byte std::unordered_map and
// the vector of contexts: at 88), in allocation order.
func (a *LoRA) Buffers() []LoRABuffer {
	v := unsafe.Add(a.h, 88)
	begin := *(*unsafe.Pointer)(v)
	end := *(*unsafe.Pointer)(unsafe.Add(v, 8))
	n := (uintptr(end) - uintptr(begin)) / 8
	out := make([]LoRABuffer, 0, n)
	for i := uintptr(0); i < n; i++ {
		b := *(*uintptr)(unsafe.Add(begin, i*8))
		out = append(out, LoRABuffer{a.l.BufferName(b), uint64(a.l.BufferSize(b))})
	}
	return out
}

// InvocationTokens are the aLoRA invocation tokens.
func (a *LoRA) InvocationTokens() []int32 {
	n := a.l.NInvocation(a.h)
	if n == 0 {
		return nil
	}
	return append([]int32(nil), unsafe.Slice(a.l.Invocation(a.h), n)...)
}

// Meta is llama_adapter_meta_val_str of key ("", false when absent).
func (a *LoRA) Meta(key string) (string, bool) {
	buf := make([]byte, 1024)
	n := a.l.MetaValStr(a.h, key, &buf[0], uintptr(len(buf)))
	if n < 0 {
		return "", false
	}
	return string(buf[:min(int(n), len(buf)-1)]), true
}

// SetLoRAs is llama_set_adapters_lora: the adapters with their scales
// (none: no adapter).
func (c *Context) SetLoRAs(adapters []*LoRA, scales []float32) error {
	if len(adapters) != len(scales) {
		return errors.New("llama: adapters and scales differ in number")
	}
	d, err := c.l.lora()
	if err != nil {
		return err
	}
	if len(adapters) == 0 {
		d.Set(c.h, nil, 0, nil)
		return nil
	}
	hs := make([]unsafe.Pointer, len(adapters))
	for i, a := range adapters {
		hs[i] = a.h
	}
	sc := append([]float32(nil), scales...)
	d.Set(c.h, &hs[0], uintptr(len(hs)), &sc[0])
	runtime.KeepAlive(hs)
	runtime.KeepAlive(sc)
	return nil
}
