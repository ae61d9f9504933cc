package loader

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/ggload/ggload/loader/internal/mmap"
)

// Verified is what Verify checked.
type Verified struct {
	Tensors  int            `json:"tensors"`   // tensors read back equal to the file
	Repacked int            `json:"repacked"`  // tensors in write-only buffers (CPU_REPACK), not readable
	ByDevice map[string]int `json:"by_device"` // Tensors per device
}

// Verify reads every loaded tensor back from its buffer, wherever it lives,
// and compares it with the file's bytes. The first difference is an error
// naming the tensor and its buffer type. Tensors in host memory, the
// file's mapping included, are read in Go with faults as errors: a file
// truncated under a zero-copy tensor is reported, not a SIGBUS. Tensors in
// write-only buffers (CPU_REPACK) cannot be read back and are only
// counted. The error is an *Error of op "verify".
func (m *Model) Verify() (Verified, error) {
	v := Verified{ByDevice: map[string]int{}}
	if err := m.hold("verify"); err != nil {
		return v, err
	}
	defer m.release()
	gm := m.Plan.Model
	var want []byte
	for _, pl := range m.placements {
		if pl.Tensor == nil {
			continue
		}
		bt := pl.Plan.BufferType
		if bt.WriteOnly() {
			v.Repacked++
			continue
		}
		w := pl.Plan.Weight
		fail := func(err error) error {
			return &Error{Op: "verify", Path: gm.Files[w.File].Source().Name, Tensor: pl.Plan.Name, Device: devName(pl), BufferType: bt.Name(), Off: w.Offset, Err: err}
		}
		got, err := m.readBack(pl)
		if err != nil {
			return v, fail(fmt.Errorf("loader: verify %s: %w", pl.Plan.Name, err))
		}
		if int64(cap(want)) < w.Size {
			want = make([]byte, w.Size)
		}
		want = want[:w.Size]
		r := guardReader(gm.Files[w.File].ReaderAt(), gm.Files[w.File].Source().Name, nil)
		if _, err := r.ReadAt(want, w.Offset); err != nil {
			return v, fail(fmt.Errorf("loader: verify %s: %s: %w", pl.Plan.Name, gm.Paths[w.File], err))
		}
		if !bytes.Equal(got, want) {
			return v, fail(tagged{fmt.Errorf("loader: verify: tensor '%s' in %s on %s differs from %s", pl.Plan.Name, bt.Name(), devName(pl), gm.Paths[w.File]), ErrMismatch})
		}
		v.Tensors++
		v.ByDevice[devName(pl)]++
	}
	return v, nil
}

// readBack copies a loaded tensor's bytes out of its buffer. Host memory
// is read in Go while the tensor's buffer is held (a Close of the model
// or the Runtime meanwhile waits), with a fault reported as the mapped
// file's.
func (m *Model) readBack(pl Placement) ([]byte, error) {
	b, n := pl.Buffer, pl.Tensor.NBytes()
	if b == nil || !b.Buffer.IsHost() || n == 0 {
		return pl.Tensor.Bytes()
	}
	var got []byte
	noData := false
	err := pl.Tensor.WithData(func(data unsafe.Pointer) error {
		if data == nil {
			noData = true // (Bytes holds the tensor itself: not under this hold)
			return nil
		}
		got = make([]byte, n)
		if at, err := mmap.Copy(got, data); err != nil {
			if w := pl.Plan.Weight; b.Mapped && b.File < len(m.files) {
				e := m.files[b.File].truncated(w.Offset, true)
				e.from, e.to, e.after = w.Offset, w.Offset+w.Size, true
				return e
			}
			return fmt.Errorf("reading byte %d of its host memory faulted: %w", at, err)
		}
		return nil
	})
	if err == nil && noData {
		return pl.Tensor.Bytes()
	}
	return got, err
}
