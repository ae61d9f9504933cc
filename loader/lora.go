// Port of llama.cpp src/llama-adapter.cpp (v0.5.0):
// llama_adapter_lora_init's reading of the adapter.

package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/place"
)

// LoRA is a LoRA adapter loaded beside a model as llama_adapter_lora_init
// loads it: its tensors in buffers of the types the plan chose (one per
// type), their data read from the file (read, not mapped, as llama.cpp
// reads it). It holds its own buffers: Close frees them.
type LoRA struct {
	Plan *place.LoRA

	mu       sync.RWMutex
	closed   bool
	contexts []*ggml.Context
	buffers  []*ggml.Buffer
	pairs    map[string][2]*ggml.Tensor
}

// LoadLoRA loads the adapter lp (Plan.PlanLoRA of m's plan) beside m.
// Every shape is checked against m's tensors again; on any error what
// was made is freed.
func LoadLoRA(ctx context.Context, m *Model, lp *place.LoRA) (_ *LoRA, err error) {
	if m == nil || lp == nil {
		return nil, errors.New("loader: LoadLoRA: no model or no adapter plan")
	}
	if err := m.hold("LoadLoRA"); err != nil {
		return nil, err
	}
	defer m.release()
	for i := range lp.Pairs {
		pr := &lp.Pairs[i]
		t, ok := m.tensor(pr.Base)
		if !ok {
			return nil, fmt.Errorf("loader: LoRA adapter %s: LoRA tensor '%s' does not exist in base model: %w", lp.Path, pr.Base, place.ErrBadLoRA)
		}
		ne, a, b := t.Shape(), pr.A.Shape, pr.B.Shape
		fits := ne[0] == a[0] && ne[1] == b[1] && a[1] == b[0]
		if strings.HasSuffix(pr.Base, "token_embd.weight") {
			fits = ne[0] == b[1] && ne[1] == a[1]
		}
		if !fits {
			return nil, fmt.Errorf("loader: LoRA adapter %s: tensor '%s' has incorrect shape (the model's is %v, lora_a %v, lora_b %v): %w", lp.Path, pr.Base, ne, a, b, place.ErrBadLoRA)
		}
	}
	a := &LoRA{Plan: lp, pairs: make(map[string][2]*ggml.Tensor, len(lp.Pairs))}
	defer func() {
		if err != nil {
			a.free()
		}
	}()
	rt := m.Plan.Runtime()
	for bi := range lp.Buffers {
		b := &lp.Buffers[bi]
		c, err := rt.NewContext(ggml.ContextParams{Tensors: 2 * len(b.Pairs), NoAlloc: true})
		if err != nil {
			return nil, fmt.Errorf("loader: LoRA adapter %s: %w", lp.Path, err)
		}
		a.contexts = append(a.contexts, c)
		for _, pi := range b.Pairs {
			pr := &lp.Pairs[pi]
			var ts [2]*ggml.Tensor
			for k, lt := range []*place.LoRATensor{&pr.A, &pr.B} {
				t, err := c.NewTensor(lt.Type, lt.Shape[:]...)
				if err != nil {
					return nil, fmt.Errorf("loader: LoRA adapter %s: tensor '%s': %w", lp.Path, lt.Name, err)
				}
				if err := t.SetName(lt.Name); err != nil {
					return nil, fmt.Errorf("loader: LoRA adapter %s: tensor '%s': %w", lp.Path, lt.Name, err)
				}
				ts[k] = t
			}
			a.pairs[pr.Base] = ts
		}
		buf, err := c.AllocTensors(b.BufferType)
		if err != nil {
			// llama.cpp: "failed to allocate buffer for lora adapter"
			return nil, fmt.Errorf("loader: LoRA adapter %s: failed to allocate buffer for lora adapter: %w", lp.Path, err)
		}
		if buf == nil {
			continue
		}
		a.buffers = append(a.buffers, buf)
	}
	if err := a.read(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// read reads every tensor's data from the file into its buffer.
func (a *LoRA) read(ctx context.Context) error {
	lp := a.Plan
	f, err := os.Open(lp.Path)
	if err != nil {
		return fmt.Errorf("loader: LoRA adapter %s: %w", lp.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("loader: LoRA adapter %s: %w", lp.Path, err)
	}
	var data []byte
	for i := range lp.Pairs {
		if err := ctx.Err(); err != nil {
			return err
		}
		pr := &lp.Pairs[i]
		ts := a.pairs[pr.Base]
		for k, lt := range []*place.LoRATensor{&pr.A, &pr.B} {
			end := lt.Offset + lt.Bytes
			if end < lt.Offset || end > st.Size() {
				return fmt.Errorf("loader: LoRA adapter %s: LoRA tensor '%s' data is not within the file bounds, file is corrupted or incomplete", lp.Path, lt.Name)
			}
			data = append(data[:0], make([]byte, lt.Bytes)...)
			if _, err := f.ReadAt(data, lt.Offset); err != nil && !(errors.Is(err, io.EOF) && end == st.Size()) {
				return fmt.Errorf("loader: LoRA adapter %s: tensor '%s': %w", lp.Path, lt.Name, err)
			}
			if err := ts[k].Set(data, 0); err != nil {
				return fmt.Errorf("loader: LoRA adapter %s: tensor '%s': %w", lp.Path, lt.Name, err)
			}
		}
	}
	return nil
}

// Weight is the pair (lora_a, lora_b) that adapts the model tensor base;
// ok is false when the adapter leaves it alone or is closed.
func (a *LoRA) Weight(base string) (A, B *ggml.Tensor, ok bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return nil, nil, false
	}
	ts, ok := a.pairs[base]
	return ts[0], ts[1], ok
}

// Buffers are the adapter's buffers, in llama.cpp's order.
func (a *LoRA) Buffers() []*ggml.Buffer {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return nil
	}
	return append([]*ggml.Buffer(nil), a.buffers...)
}

// Closed reports whether Close was called.
func (a *LoRA) Closed() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.closed
}

// Close frees the adapter's buffers and contexts. A context using the
// adapter must drop it first (infer.Context.SetLoRAs).
func (a *LoRA) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	a.freeLocked()
	return nil
}

func (a *LoRA) free() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.freeLocked()
}

func (a *LoRA) freeLocked() {
	for _, b := range a.buffers {
		b.Free()
	}
	for _, c := range a.contexts {
		c.Free()
	}
	a.buffers, a.contexts, a.pairs = nil, nil, nil
}
