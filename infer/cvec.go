// Port of llama.cpp common/common.cpp (v0.5.0):
// common_control_vector_load.

package infer

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// Control vectors, as llama.cpp's common library loads them
// (common_control_vector_load) and its context applies them
// (llama_set_adapter_cvec): per layer, a direction of n_embd floats added
// to the layer's output.

// ControlVectorFile is one control vector file and the scale its
// directions are multiplied by (--control-vector-scaled FNAME:SCALE; 1
// for --control-vector FNAME).
type ControlVectorFile struct {
	Path  string
	Scale float32
}

// ControlVector is the sum of the scaled directions of one or more
// control vector files: NEmbd floats per layer, from layer 1 on (layer 0
// has none), Data[(il-1)*NEmbd:il*NEmbd] being layer il's. A layer past
// the files' last has no direction.
type ControlVector struct {
	NEmbd int
	Data  []float32
}

// Layers is the number of layers the vector holds, from layer 1.
func (cv *ControlVector) Layers() int {
	if cv == nil || cv.NEmbd <= 0 {
		return 0
	}
	return len(cv.Data) / cv.NEmbd
}

// maxControlLayers is llama.cpp's LLAMA_MAX_LAYERS: no model has more
// layers, and a direction past them is never applied, so it is checked
// but not kept.
const maxControlLayers = 512

// LoadControlVectors reads the files and sums their scaled directions,
// as common_control_vector_load does: each file's direction.N tensors
// (f32, one dimension, the same width in every file), each multiplied by
// the file's scale and added to layer N's. Where llama.cpp gives up
// (a file it cannot read, a tensor name without a layer, layer 0, a
// tensor that is not f32 or not one-dimensional, a width unlike the
// others, a file without tensors), the error names the file, the tensor
// and the reason.
func LoadControlVectors(files []ControlVectorFile) (*ControlVector, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("infer: control vectors: no valid control vector files passed")
	}
	var sum *ControlVector
	for _, f := range files {
		cur, err := loadControlVector(f)
		if err != nil {
			return nil, err
		}
		if sum == nil {
			sum = cur
			continue
		}
		if cur.NEmbd != sum.NEmbd {
			return nil, fmt.Errorf("infer: control vector %s: its directions have %d values, those before it %d: "+
				"the control vectors do not match each other's dimensions", f.Path, cur.NEmbd, sum.NEmbd)
		}
		if len(cur.Data) > len(sum.Data) {
			sum.Data = append(sum.Data, make([]float32, len(cur.Data)-len(sum.Data))...)
		}
		for i, v := range cur.Data {
			sum.Data[i] += v
		}
	}
	return sum, nil
}

// loadControlVector is common_control_vector_load_one: one file's
// directions, scaled and summed per layer.
func loadControlVector(lf ControlVectorFile) (*ControlVector, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("infer: control vector %s: "+format, append([]any{lf.Path}, a...)...)
	}
	f, err := gguf.Open(lf.Path)
	if err != nil {
		return nil, fail("failed to load the control vector file: %w", err)
	}
	defer f.Close()
	if len(f.Tensors) == 0 {
		return nil, fail("no direction tensors found")
	}
	cv := &ControlVector{NEmbd: -1}
	for _, t := range f.Tensors {
		il := directionLayer(t.Name)
		switch {
		case il < 0:
			return nil, fail("tensor %q: invalid/unparsable direction tensor layer index (the names are direction.N, N the layer)", t.Name)
		case il == 0:
			return nil, fail("tensor %q: invalid (zero) direction tensor layer index: layer 0 has no direction", t.Name)
		case t.Type != ggml.TypeF32:
			return nil, fail("tensor %q: invalid (non-F32) direction tensor type %s", t.Name, t.Type)
		case nDims(t.Shape) != 1:
			return nil, fail("tensor %q: invalid (non-1D) direction tensor shape %v", t.Name, t.Shape)
		}
		n := int(t.Shape[0])
		if cv.NEmbd == -1 {
			cv.NEmbd = n
		} else if n != cv.NEmbd {
			return nil, fail("tensor %q: %d values, the tensors before it %d: the direction tensor does not match previous dimensions", t.Name, n, cv.NEmbd)
		}
		src, err := readFloats(f, t)
		if err != nil {
			return nil, fail("tensor %q: %w", t.Name, err)
		}
		if il > maxControlLayers {
			continue
		}
		if want := n * il; len(cv.Data) < want {
			cv.Data = append(cv.Data, make([]float32, want-len(cv.Data))...)
		}
		dst := cv.Data[n*(il-1) : n*il]
		for j, v := range src {
			// (the product rounded to f32 before the sum, as the C++ does)
			dst[j] += float32(v * lf.Scale)
		}
	}
	return cv, nil
}

// directionLayer is the layer of a tensor named direction.N, N read as
// std::stoi reads it (leading blanks, a sign, the digits up to the first
// other character); -1 where the name has no such number.
func directionLayer(name string) int {
	head, rest, ok := strings.Cut(name, ".")
	if !ok || head != "direction" {
		return -1
	}
	rest = strings.TrimLeft(rest, " \t\n\v\f\r")
	neg := false
	if rest != "" && (rest[0] == '+' || rest[0] == '-') {
		neg = rest[0] == '-'
		rest = rest[1:]
	}
	var v int64
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		v = v*10 + int64(rest[digits]-'0')
		if v > math.MaxInt32+1 {
			return -1 // out of int's range: stoi throws
		}
		digits++
	}
	if digits == 0 {
		return -1
	}
	if neg {
		v = -v
	}
	if v < math.MinInt32 || v > math.MaxInt32 || v < 0 {
		return -1
	}
	return int(v)
}

// nDims is ggml_n_dims: the dimensions up to the last one above 1.
func nDims(ne ggml.Shape) int {
	for i := len(ne) - 1; i >= 1; i-- {
		if ne[i] > 1 {
			return i + 1
		}
	}
	return 1
}

// readFloats reads an f32 tensor's values.
func readFloats(f *gguf.File, t gguf.TensorInfo) ([]float32, error) {
	buf := make([]byte, t.Size)
	if _, err := io.ReadFull(f.Data(t), buf); err != nil {
		return nil, err
	}
	out := make([]float32, len(buf)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	return out, nil
}
