package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ggload/ggload/ggml/gtype"
)

// Writer builds a GGUF v3 file: metadata pairs in the order they were set,
// then tensor infos and data in the order they were added. Tensor data is
// streamed from each tensor's source when the file is written.
type Writer struct {
	Alignment uint64 // 0 means DefaultAlignment; also written as general.alignment when not the default

	kv      []KV
	keys    map[string]int
	tensors []wtensor
	names   map[string]bool
}

type wtensor struct {
	info TensorInfo
	src  func(w io.Writer) error
}

// NewWriter returns an empty writer. The zero Writer is one too.
func NewWriter() *Writer { return &Writer{} }

// Set sets a metadata pair (replacing an earlier value of the same key,
// keeping its position).
func (w *Writer) Set(key string, v Value) error {
	if key == "" {
		return fmt.Errorf("gguf: empty key")
	}
	if !v.valid {
		return fmt.Errorf("gguf: key %s: the zero Value holds nothing (make values with String, Uint32, Array, ...)", key)
	}
	if v.array && v.arr == nil || !v.array && v.typ >= typeCount || v.typ == TypeArray {
		return fmt.Errorf("gguf: key %s: invalid value", key)
	}
	if v.array && v.arr.src != nil {
		// materialise file-backed arrays so the writer does not depend on
		// the file staying open
		var err error
		if v, err = materialize(v); err != nil {
			return fmt.Errorf("gguf: key %s: %w", key, err)
		}
	}
	if i, ok := w.keys[key]; ok {
		w.kv[i].Value = v
		return nil
	}
	if w.keys == nil {
		w.keys = map[string]int{}
	}
	w.keys[key] = len(w.kv)
	w.kv = append(w.kv, KV{Key: key, Value: v})
	return nil
}

func materialize(v Value) (Value, error) {
	if v.typ == TypeString {
		s, err := v.Strings()
		if err != nil {
			return Value{}, err
		}
		return Array(s)
	}
	raw, err := v.raw()
	if err != nil {
		return Value{}, err
	}
	return Value{valid: true, typ: v.typ, array: true, arr: &arrayData{n: v.arr.n, raw: raw, size: uint64(len(raw))}}, nil
}

// Delete removes a key.
func (w *Writer) Delete(key string) {
	i, ok := w.keys[key]
	if !ok {
		return
	}
	w.kv = append(w.kv[:i], w.kv[i+1:]...)
	delete(w.keys, key)
	for j := i; j < len(w.kv); j++ {
		w.keys[w.kv[j].Key] = j
	}
}

// KV returns the pairs set so far.
func (w *Writer) KV() []KV { return w.kv }

// AddTensor adds a tensor whose size bytes are written by src when the file
// is written. The size must match the type and shape.
func (w *Writer) AddTensor(name string, typ gtype.Type, shape []int64, src func(io.Writer) error) error {
	if name == "" || len(name) > MaxTensorName || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("gguf: tensor name %q: empty, longer than %d bytes or holds a NUL", name, MaxTensorName)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if len(shape) < 1 || len(shape) > MaxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions", name, len(shape))
	}
	s := gtype.Shape{1, 1, 1, 1}
	copy(s[:], shape)
	size, err := typ.Bytes(s)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if w.names == nil {
		w.names = map[string]bool{}
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{info: TensorInfo{Name: name, NDims: len(shape), Shape: s, Type: typ, Size: size}, src: src})
	return nil
}

// AddTensorBytes adds a tensor with its data in memory.
func (w *Writer) AddTensorBytes(name string, typ gtype.Type, shape []int64, data []byte) error {
	return w.AddTensor(name, typ, shape, func(out io.Writer) error {
		_, err := out.Write(data)
		return err
	})
}

// AddTensorReader adds a tensor whose data is read from r.
func (w *Writer) AddTensorReader(name string, typ gtype.Type, shape []int64, r io.Reader) error {
	return w.AddTensor(name, typ, shape, func(out io.Writer) error {
		_, err := io.Copy(out, r)
		return err
	})
}

// Tensors returns the infos of the tensors added so far.
func (w *Writer) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(w.tensors))
	for i, t := range w.tensors {
		out[i] = t.info
	}
	return out
}

func (w *Writer) alignment() uint64 {
	if w.Alignment == 0 {
		return DefaultAlignment
	}
	return w.Alignment
}

// WriteMetadata writes the header, the metadata and the tensor infos,
// padded to where the data section starts, and returns the file size the
// whole file would have. Extending the file to that size (os.Truncate)
// gives a valid GGUF whose tensors are zeros, without writing them.
func (w *Writer) WriteMetadata(out io.Writer) (int64, error) {
	noData := make([]wtensor, len(w.tensors))
	var dataSize int64
	for i, t := range w.tensors {
		noData[i] = wtensor{info: t.info}
		dataSize += int64(padTo(uint64(t.info.Size), w.alignment()))
	}
	n, err := w.write(out, w.kv, noData, true)
	return n + dataSize, err
}

// WriteTo writes the whole file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	return w.write(out, w.kv, w.tensors, false)
}

// WriteFile writes the whole file to path.
func (w *Writer) WriteFile(path string) error {
	return writeFile(path, func(out io.Writer) error {
		_, err := w.WriteTo(out)
		return err
	})
}

func writeFile(path string, fn func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	return fn(f)
}

// WriteSplits writes the model as n files named prefix-00001-of-0000n.gguf
// with the split keys, the way gguf-split does: the first file holds every
// metadata pair, the others only the split keys; the tensors are divided
// into n runs of about equal count. It returns the paths.
func (w *Writer) WriteSplits(prefix string, n int) ([]string, error) {
	if n < 1 || n > 65535 || n > len(w.tensors) && len(w.tensors) > 0 {
		return nil, fmt.Errorf("gguf: cannot split %d tensors into %d files", len(w.tensors), n)
	}
	var paths []string
	per := (len(w.tensors) + n - 1) / n
	for i := 0; i < n; i++ {
		lo, hi := i*per, (i+1)*per
		if hi > len(w.tensors) {
			hi = len(w.tensors)
		}
		if lo > hi {
			lo = hi
		}
		var kv []KV
		split := []KV{
			{Key: KeySplitNo, Value: Uint16(uint16(i))},
			{Key: KeySplitCount, Value: Uint16(uint16(n))},
			{Key: KeySplitTensorsCount, Value: Int32(int32(len(w.tensors)))},
		}
		if i == 0 {
			for _, p := range w.kv {
				if p.Key != KeySplitNo && p.Key != KeySplitCount && p.Key != KeySplitTensorsCount {
					kv = append(kv, p)
				}
			}
		} else if a, ok := w.keys[KeyAlignment]; ok {
			kv = append(kv, w.kv[a])
		}
		kv = append(kv, split...)
		path := SplitPath(prefix, i, n)
		ts := w.tensors[lo:hi]
		if err := writeFile(path, func(out io.Writer) error {
			_, err := w.write(out, kv, ts, false)
			return err
		}); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (w *Writer) write(out io.Writer, kv []KV, tensors []wtensor, metaOnly bool) (int64, error) {
	align := w.alignment()
	if align == 0 || align&(align-1) != 0 {
		return 0, fmt.Errorf("gguf: alignment %d is not a power of 2", align)
	}
	if align != DefaultAlignment {
		if i, ok := w.keys[KeyAlignment]; !ok || w.kv[i].Value.Kind() != TypeUint32 || w.kv[i].Value.bits != align {
			return 0, fmt.Errorf("gguf: set %s to u32 %d to write with that alignment", KeyAlignment, align)
		}
	}
	cw := &countingWriter{w: bufio.NewWriterSize(out, 1<<20)}
	le := binary.LittleEndian
	var scratch [8]byte
	u32 := func(x uint32) { le.PutUint32(scratch[:], x); cw.Write(scratch[:4]) }
	u64 := func(x uint64) { le.PutUint64(scratch[:], x); cw.Write(scratch[:8]) }
	str := func(s string) { u64(uint64(len(s))); io.WriteString(cw, s) }

	cw.Write([]byte(Magic))
	u32(Version)
	u64(uint64(len(tensors)))
	u64(uint64(len(kv)))
	for _, p := range kv {
		str(p.Key)
		v := p.Value
		if v.array {
			u32(uint32(TypeArray))
			u32(uint32(v.typ))
			u64(v.arr.n)
			if v.typ == TypeString {
				for _, s := range v.arr.strs {
					str(s)
				}
			} else {
				cw.Write(v.arr.raw)
			}
			continue
		}
		u32(uint32(v.typ))
		switch v.typ.Size() {
		case 1:
			cw.Write([]byte{byte(v.bits)})
		case 2:
			le.PutUint16(scratch[:], uint16(v.bits))
			cw.Write(scratch[:2])
		case 4:
			u32(uint32(v.bits))
		case 8:
			u64(v.bits)
		default:
			str(v.str)
		}
	}
	var off uint64
	for _, t := range tensors {
		str(t.info.Name)
		u32(uint32(t.info.NDims))
		for d := 0; d < t.info.NDims; d++ {
			u64(uint64(t.info.Shape[d]))
		}
		u32(uint32(t.info.Type))
		u64(off)
		off += padTo(uint64(t.info.Size), align)
	}
	zeros := make([]byte, align)
	pad := func() {
		if r := uint64(cw.n) % align; r != 0 {
			cw.Write(zeros[:align-r])
		}
	}
	if len(tensors) > 0 {
		pad()
	}
	if metaOnly {
		tensors = nil
	}
	for _, t := range tensors {
		start := cw.n
		lw := &limitWriter{w: cw, left: t.info.Size}
		if err := t.src(lw); err != nil {
			return cw.n, fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
		}
		if got := cw.n - start; got != t.info.Size {
			return cw.n, fmt.Errorf("gguf: tensor %q: source wrote %d bytes, the tensor has %d", t.info.Name, got, t.info.Size)
		}
		pad()
	}
	if err := cw.w.Flush(); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

var errTooMuch = errors.New("source wrote more bytes than the tensor has")

type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, errTooMuch
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}
