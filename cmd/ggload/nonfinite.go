package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/place"
)

// nonFinite watches run's logits for NaN and infinities, which llama.cpp
// samples from without a word (every logit NaN: the argmax is token 0,
// again and again). A LoRA adapter or a control vector holding such
// values, or scaled past a float's range, is the usual cause: the warning
// names those applied, and among them those whose own values are not
// finite.
type nonFinite struct {
	pf       *placeFlags
	rows     int    // rows of logits with a value that is not finite
	first    string // where the first was
	nan, inf int    // in that row
	width    int
}

// check looks at one row of logits, where names it.
func (n *nonFinite) check(row []float32, where string) {
	nan, inf := 0, 0
	for _, v := range row {
		switch {
		case v != v:
			nan++
		case v > math.MaxFloat32 || v < -math.MaxFloat32:
			inf++
		}
	}
	if nan+inf == 0 {
		return
	}
	if n.rows == 0 {
		n.first, n.nan, n.inf, n.width = where, nan, inf, len(row)
	}
	n.rows++
}

// warn says what check found, once, with the adapters and vectors applied.
func (n *nonFinite) warn(w io.Writer) {
	if n.rows == 0 {
		return
	}
	fmt.Fprintf(w, "ggload: warning: %d rows of logits hold values that are not finite, the first at %s (%d NaN, %d infinite of %d): what is sampled or chosen from them means nothing\n",
		n.rows, n.first, n.nan, n.inf, n.width)
	for _, s := range n.pf.suspects() {
		fmt.Fprintf(w, "ggload: warning:   %s\n", s)
	}
}

// suspects are the LoRA adapters and control vectors run applies, each
// with its own values' finiteness.
func (f *placeFlags) suspects() []string {
	var out []string
	if !f.lora.noApply {
		for i, l := range f.lora.planned {
			scale := f.lora.files[i].scale
			if scale == 0 {
				continue
			}
			what := fmt.Sprintf("the LoRA adapter %s (scale %g)", l.Path, scale)
			if t := loraNonFinite(l); t != "" {
				what += ": its tensor " + t + " holds values that are not finite"
			} else {
				what += ": its values are finite, but its products may not be"
			}
			out = append(out, what)
		}
	}
	for _, cf := range f.cvec.files {
		what := fmt.Sprintf("the control vector %s (scale %g)", cf.Path, cf.Scale)
		cv, err := infer.LoadControlVectors([]infer.ControlVectorFile{cf})
		switch {
		case err != nil:
		case !allFinite(cv.Data):
			what += ": its scaled directions hold values that are not finite"
		default:
			what += ": its scaled directions are finite, but their sum with the others' or with a layer's output may not be"
		}
		out = append(out, what)
	}
	if len(out) == 0 {
		out = append(out, "no LoRA adapter or control vector is applied: the model's own weights give them")
	}
	return out
}

func allFinite(v []float32) bool {
	for _, x := range v {
		if x != x || x > math.MaxFloat32 || x < -math.MaxFloat32 {
			return false
		}
	}
	return true
}

// loraNonFinite is the first tensor of the adapter whose values (f32,
// f16 or bf16, read from its file) are not all finite, "" where none is.
func loraNonFinite(l *place.LoRA) string {
	f, err := os.Open(l.Path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var names []string
	for _, pr := range l.Pairs {
		for _, t := range []place.LoRATensor{pr.A, pr.B} {
			if !floatsFinite(f, t) {
				names = append(names, t.Name)
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	if len(names) > 1 {
		return fmt.Sprintf("%s (and %d more: %s)", names[0], len(names)-1, strings.Join(names[1:], ", "))
	}
	return names[0]
}

// floatsFinite reports whether a float tensor's values in the file are
// finite (an exponent of all ones is an infinity or a NaN); true for the
// other types, which it does not read.
func floatsFinite(r io.ReaderAt, t place.LoRATensor) bool {
	var size int
	var mask, exp uint32
	switch t.Type {
	case ggml.TypeF32:
		size, mask = 4, 0x7f800000
	case ggml.TypeF16:
		size, mask = 2, 0x7c00
	case ggml.TypeBF16:
		size, mask = 2, 0x7f80
	default:
		return true
	}
	exp = mask
	buf := make([]byte, 1<<16)
	for off := int64(0); off < t.Bytes; off += int64(len(buf)) {
		n := min(int64(len(buf)), t.Bytes-off)
		b := buf[:n-n%int64(size)]
		if _, err := r.ReadAt(b, t.Offset+off); err != nil {
			return true // (the load said why)
		}
		for i := 0; i+size <= len(b); i += size {
			var v uint32
			if size == 4 {
				v = binary.LittleEndian.Uint32(b[i:])
			} else {
				v = uint32(binary.LittleEndian.Uint16(b[i:]))
			}
			if v&mask == exp {
				return false
			}
		}
	}
	return true
}
