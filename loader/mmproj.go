// Port of llama.cpp tools/mtmd/clip.cpp (v0.5.0):
// clip_model_loader::load_tensors.

package loader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place"
)

// MmprojOptions say how LoadMmproj reads a projector's file.
type MmprojOptions struct {
	// LoadMode is the model's load mode. clip reads a projector's
	// weights from the file into its buffers whatever the mode (it never
	// maps the file): ggload does the same, through the page cache,
	// except with LoadDirectIO, where it reads them with direct I/O as
	// it reads the model's (falling back to the page cache where the
	// file system refuses).
	LoadMode place.LoadMode
	// Log receives the reads' warnings (a refused direct read); nil:
	// slog's default.
	Log *slog.Logger
}

// Mmproj is a multimodal projector loaded as the pin's clip_init loads
// it: one weight buffer per encoder, of the buffer type the plan chose,
// its tensors allocated in clip's order and filled from the file. It
// holds its own buffers: Close frees them.
type Mmproj struct {
	Plan *place.Mmproj
	// Direct says that the weights were read with direct I/O.
	Direct bool

	mu       sync.RWMutex
	closed   bool
	contexts []*ggml.Context
	buffers  []*ggml.Buffer               // per encoder (nil: nothing to allocate)
	tensors  []map[string]*ggml.Tensor    // per encoder, by name
	order    [][]*ggml.Tensor             // per encoder, in the plan's order
	planned  [][]place.MmprojPlacedTensor // per encoder, the plan's
}

// LoadMmproj loads the projector mp (place.PlanMmproj on rt) onto its
// device: it allocates each encoder's weight buffer and reads every
// tensor's bytes from the file. A file that no longer holds a tensor's
// bytes is an error naming the file and the tensor (wrapping
// ErrTruncated); on any error what was made is freed.
func LoadMmproj(ctx context.Context, rt *ggml.Runtime, mp *place.Mmproj, opts MmprojOptions) (_ *Mmproj, err error) {
	if rt == nil || mp == nil {
		return nil, errors.New("loader: LoadMmproj: no runtime or no projector plan")
	}
	if mp.BufferType.IsZero() || mp.Device == nil {
		return nil, fmt.Errorf("loader: mmproj %s: the plan has no device or buffer type", mp.Path)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := &Mmproj{Plan: mp}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	for ei := range mp.Encoders {
		e := &mp.Encoders[ei]
		if e.Buffer.BufferType != mp.BufferType {
			return nil, fmt.Errorf("loader: mmproj %s: %s encoder: its buffer is of type %s, the projector's is %s", mp.Path, e.Modality, e.Buffer.BufferType.Name(), mp.BufferType.Name())
		}
		c, err := rt.NewContext(ggml.ContextParams{Tensors: len(e.Tensors) + 1, NoAlloc: true})
		if err != nil {
			return nil, fmt.Errorf("loader: mmproj %s: %s encoder: %w", mp.Path, e.Modality, err)
		}
		m.contexts = append(m.contexts, c)
		byName := make(map[string]*ggml.Tensor, len(e.Tensors))
		order := make([]*ggml.Tensor, 0, len(e.Tensors))
		for _, pt := range e.Tensors {
			if _, dup := byName[pt.Name]; dup {
				// clip refuses a tensor loaded twice
				return nil, fmt.Errorf("loader: mmproj %s: %s encoder: tensor already loaded: %s", mp.Path, e.Modality, pt.Name)
			}
			t, err := c.NewTensor(pt.Type, pt.Shape[:]...)
			if err == nil {
				err = t.SetName(pt.Name)
			}
			if err != nil {
				return nil, fmt.Errorf("loader: mmproj %s: %s encoder: tensor %s: %w", mp.Path, e.Modality, pt.Name, err)
			}
			if t.NBytes() != uint64(pt.Bytes) {
				return nil, fmt.Errorf("loader: mmproj %s: tensor %s: %d bytes in the plan, %d for its shape", mp.Path, pt.Name, pt.Bytes, t.NBytes())
			}
			byName[pt.Name] = t
			order = append(order, t)
		}
		buf, err := c.AllocTensors(mp.BufferType)
		if err != nil {
			return nil, fmt.Errorf("loader: mmproj %s: %s encoder: failed to allocate its weight buffer: %w", mp.Path, e.Modality, err)
		}
		if buf != nil {
			if err := buf.SetUsage(ggml.UsageWeights); err != nil {
				buf.Free()
				return nil, fmt.Errorf("loader: mmproj %s: %s encoder: %w", mp.Path, e.Modality, err)
			}
		}
		m.buffers = append(m.buffers, buf)
		m.tensors = append(m.tensors, byName)
		m.order = append(m.order, order)
		m.planned = append(m.planned, e.Tensors)
	}
	if err := m.read(ctx, opts); err != nil {
		return nil, err
	}
	return m, nil
}

// read fills every tensor from the file, in the plan's order.
func (m *Mmproj) read(ctx context.Context, opts MmprojOptions) error {
	path := m.Plan.Path
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("loader: mmproj %s: %w", path, err)
	}
	src := gguf.PathSource(path)
	src.Size = st.Size()
	f, err := openModelFile(src, opts.LoadMode == place.LoadDirectIO, log)
	if err != nil {
		return fmt.Errorf("loader: mmproj %s: %w", path, err)
	}
	defer f.Close()
	m.Direct = f.alignment() > 1
	var data []byte
	for ei, ts := range m.planned {
		for ti, pt := range ts {
			if err := ctx.Err(); err != nil {
				return err
			}
			if pt.Bytes == 0 {
				continue
			}
			now, err := f.currentSize()
			if err != nil {
				return fmt.Errorf("loader: mmproj %s: %w", path, err)
			}
			end := pt.Offset + pt.Bytes
			if pt.Offset < 0 || end < pt.Offset || end > now {
				return fmt.Errorf("loader: mmproj %s: tensor %s: its data is bytes [%d, %d) and the file is %d bytes: %w", path, pt.Name, pt.Offset, end, now, ErrTruncated)
			}
			if int64(cap(data)) < pt.Bytes {
				data = make([]byte, pt.Bytes)
			}
			data = data[:pt.Bytes]
			if err := f.readAt(data, pt.Offset); err != nil {
				return fmt.Errorf("loader: mmproj %s: tensor %s: %w", path, pt.Name, err)
			}
			if err := m.order[ei][ti].Set(data, 0); err != nil {
				return fmt.Errorf("loader: mmproj %s: tensor %s: %w", path, pt.Name, err)
			}
		}
	}
	return nil
}

// Tensor returns the loaded tensor of that name (the first encoder's
// that has one); ok is false when none has or the projector is closed.
func (m *Mmproj) Tensor(name string) (t *ggml.Tensor, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, false
	}
	for _, byName := range m.tensors {
		if t, ok := byName[name]; ok {
			return t, true
		}
	}
	return nil, false
}

// EncoderTensor returns the tensor of that name of one encoder
// ("vision", "audio", "gen_audio").
func (m *Mmproj) EncoderTensor(modality, name string) (t *ggml.Tensor, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, false
	}
	for ei, e := range m.Plan.Encoders {
		if e.Modality == modality && ei < len(m.tensors) {
			t, ok = m.tensors[ei][name]
			return t, ok
		}
	}
	return nil, false
}

// Buffers are the encoders' weight buffers, in the plan's order (nil
// for an encoder with nothing to allocate); nil once closed.
func (m *Mmproj) Buffers() []*ggml.Buffer {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil
	}
	return append([]*ggml.Buffer(nil), m.buffers...)
}

// Verify reads every tensor back from its buffer and compares it with
// the file's bytes; the first difference is an error naming the tensor
// (wrapping ErrMismatch). After Close it returns ErrClosed.
func (m *Mmproj) Verify() (Verified, error) {
	v := Verified{ByDevice: map[string]int{}}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return v, fmt.Errorf("loader: mmproj %s: verify: %w", m.Plan.Path, ErrClosed)
	}
	path := m.Plan.Path
	f, err := os.Open(path)
	if err != nil {
		return v, fmt.Errorf("loader: mmproj %s: verify: %w", path, err)
	}
	defer f.Close()
	dev := m.Plan.Device.Name()
	var want []byte
	for ei, ts := range m.planned {
		for ti, pt := range ts {
			got, err := m.order[ei][ti].Bytes()
			if err != nil {
				return v, fmt.Errorf("loader: mmproj %s: verify: tensor %s: %w", path, pt.Name, err)
			}
			if int64(cap(want)) < pt.Bytes {
				want = make([]byte, pt.Bytes)
			}
			want = want[:pt.Bytes]
			if n, err := f.ReadAt(want, pt.Offset); n != len(want) {
				return v, fmt.Errorf("loader: mmproj %s: verify: tensor %s: the file ends before its data (%v): %w", path, pt.Name, err, ErrTruncated)
			}
			if !bytes.Equal(got, want) {
				return v, tagged{fmt.Errorf("loader: mmproj %s: verify: tensor '%s' in %s on %s differs from the file", path, pt.Name, m.Plan.BufferType.Name(), dev), ErrMismatch}
			}
			v.Tensors++
			v.ByDevice[dev]++
		}
	}
	return v, nil
}

// Closed reports whether Close was called.
func (m *Mmproj) Closed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.closed
}

// Close frees the projector's buffers and contexts; later calls do
// nothing.
func (m *Mmproj) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	for _, b := range m.buffers {
		if b != nil {
			b.Free()
		}
	}
	for _, c := range m.contexts {
		c.Free()
	}
	m.buffers, m.contexts, m.tensors, m.order = nil, nil, nil, nil
	return nil
}
