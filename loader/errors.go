package loader

import (
	"errors"
	"fmt"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place"
)

// ErrTruncated is wrapped when a model file shrank after it was opened
// (it may no longer hold a tensor's bytes). It wraps ErrFileChanged and
// gguf.ErrTruncated: errors.Is(err, gguf.ErrTruncated) holds for every
// file cut short, whether gguf found it short when it parsed the header
// or the loader found it shrunk since.
var ErrTruncated = fmt.Errorf("%w: %w", ErrFileChanged, gguf.ErrTruncated)

// ErrMismatch is wrapped by Verify's error when a loaded tensor's bytes
// differ from the file's.
var ErrMismatch = errors.New("loaded weights differ from the file")

// Error is the error of Load and of a loaded Model's methods: what was
// being done, and where. Its text is its cause's, which names the place
// too; the fields give the place to programs, and Unwrap the cause,
// through which errors.Is finds the sentinels (ErrCanceled,
// ErrFileChanged, ErrTruncated, ErrInvalidData, ErrClosed,
// ggml.ErrOutOfMemory, ggml.ErrRPCFailed, ...) and errors.As the errors
// of the layers below (*ggml.Error, *httpsrc.Error).
type Error struct {
	// Op is what failed: Load's "open" (the files), "map", "alloc"
	// (contexts, tensors, buffers, the address-space check), "load"
	// (moving the bytes, and the checks of the files meanwhile),
	// "confirm" (reading back what RPC servers hold), "validate"
	// (Options.CheckTensors); a Model's "check file", "verify", "close".
	Op string
	// Path is the model file concerned: Tensor's, or the one opened,
	// mapped or checked; for a failure of the whole load (a buffer a
	// device refused, a cancellation between tensors) the model's first.
	Path       string
	Tensor     string // the tensor, "" when none
	Device     string // the device, "" when none
	BufferType string // the buffer type, "" when none
	// Off is the byte offset in Path of Tensor's data, or of the range of
	// the file concerned (a buffer made over its mapping); -1 when the
	// error concerns no place in a file.
	Off int64
	Err error // the cause
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "loader: " + e.Op + " failed"
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// fileError is err of op on file path at off (-1: no place in it).
func fileError(op, path string, off int64, err error) *Error {
	return &Error{Op: op, Path: path, Off: off, Err: err}
}

// deviceError is err of op on a device, and a buffer type when there is
// one.
func deviceError(op, dev, buft string, err error) *Error {
	return &Error{Op: op, Device: dev, BufferType: buft, Off: -1, Err: err}
}

// tagged is an error that keeps its text and wraps a sentinel besides: a
// message that was written without it.
type tagged struct{ err, sentinel error }

func (t tagged) Error() string   { return t.err.Error() }
func (t tagged) Unwrap() []error { return []error{t.err, t.sentinel} }

// path is the name of file fi of the model, as errors give it.
func (l *load) path(fi int) string { return l.gm.Files[fi].Source().Name }

// tensorError is err of op on tensor tp as an *Error: its file and the
// offset of its data, its device and buffer type. An err that is an
// *Error already keeps its own place, which is nearer.
func (l *load) tensorError(op string, tp *place.TensorPlan, err error) error {
	if err == nil || errors.Is(err, errStopped) {
		return err
	}
	if _, ok := err.(*Error); ok {
		return err
	}
	e := &Error{Op: op, Tensor: tp.Name, BufferType: tp.BufferType.Name(), Off: -1, Err: err}
	if w := tp.Weight; w != nil {
		e.Path, e.Off = l.path(w.File), w.Offset
	}
	if tp.Device != nil {
		e.Device = tp.Device.Name()
	}
	return e
}

// asError is err as an *Error of op: err itself, or one that takes the
// place from an *Error err wraps.
func asError(op string, err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	e := &Error{Op: op, Off: -1}
	var in *Error
	if errors.As(err, &in) {
		*e = *in
	}
	e.Err = err
	return e
}

// loadError is the error Load returns for err: an *Error (of op "load"
// when err has no place) that says a cancellation when the context was
// cancelled meanwhile, where the load had come when it was cancelled
// between tensors, and names the model's first file when err names none.
func (l *load) loadError(err error) *Error {
	c := *asError("load", err) // a copy: the reader pool hands its error out more than once
	e := &c
	if l.ctx.Err() != nil && !errors.Is(e.Err, ErrCanceled) {
		e.Err = fmt.Errorf("%w: %w", ErrCanceled, e.Err)
	}
	var at *canceledError
	if errors.Is(e.Err, ErrCanceled) && !errors.As(e.Err, &at) {
		// not in a device's lane: say how far the load had come
		where := "before any tensor was moved"
		if last := l.prog.lastTensor(); last != "" {
			where = fmt.Sprintf("after tensor %s, %s moved", last, l.prog.moved())
		}
		e.Err = &canceledError{err: e.Err, at: where}
	}
	if e.Path == "" && len(l.gm.Files) > 0 {
		e.Path = l.path(0)
	}
	return e
}
