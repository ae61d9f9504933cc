package loader

import (
	"bytes"
	"fmt"
)

// Verified is what Verify checked.
type Verified struct {
	Tensors  int            `json:"tensors"`   // tensors read back equal to the file
	Repacked int            `json:"repacked"`  // tensors in write-only buffers (CPU_REPACK), not readable
	ByDevice map[string]int `json:"by_device"` // Tensors per device
}

// Verify reads every loaded tensor back from its buffer, wherever it lives,
// and compares it with the file's bytes. The first difference is an error
// naming the tensor and its buffer type.
func (m *Model) Verify() (Verified, error) {
	v := Verified{ByDevice: map[string]int{}}
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
		got, err := pl.Tensor.Bytes()
		if err != nil {
			return v, fmt.Errorf("loader: verify %s: %w", pl.Plan.Name, err)
		}
		w := pl.Plan.Weight
		if int64(cap(want)) < w.Size {
			want = make([]byte, w.Size)
		}
		want = want[:w.Size]
		if _, err := gm.Files[w.File].ReaderAt().ReadAt(want, w.Offset); err != nil {
			return v, fmt.Errorf("loader: verify %s: %s: %w", pl.Plan.Name, gm.Paths[w.File], err)
		}
		if !bytes.Equal(got, want) {
			return v, fmt.Errorf("loader: verify: tensor '%s' in %s on %s differs from %s", pl.Plan.Name, bt.Name(), devName(pl), gm.Paths[w.File])
		}
		v.Tensors++
		v.ByDevice[devName(pl)]++
	}
	return v, nil
}
