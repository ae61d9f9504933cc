package place

import (
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/clip"
)

// mmprojTensors lists the tensors clip loads for one encoder, in the
// order it loads them, and the encoder as clip's loader (replayed on the
// file) leaves it.
func mmprojTensors(path string, f *gguf.File, modality string, o clip.Options) ([]MmprojTensor, *clip.Encoder, error) {
	e, err := clip.LoadWith(path, f, modality, o)
	if err != nil {
		return nil, nil, err
	}
	out := make([]MmprojTensor, 0, len(e.Tensors))
	for _, t := range e.Tensors {
		out = append(out, MmprojTensor{Name: t.Name, Type: t.Type, Shape: t.Shape, Bytes: t.Size, Offset: f.DataOffset + int64(t.Offset)})
	}
	return out, e, nil
}
