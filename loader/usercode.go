package loader

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
)

// ErrPanicked is wrapped by the error of Load and of Verify when code of
// the caller's panicked: the ReadAt of a source that is no local file, or
// Options.Progress. The loader calls them on goroutines of its own (the
// readers, a device's lane, the reads ahead), where the caller could not
// recover the panic and it would end the process: it is the load's error
// instead, which names the source or the callback and gives the panic's
// value, and the load frees what it made, as on any other error. The
// panic's stack goes to Options.Logger at debug level.
var ErrPanicked = errors.New("panicked")

// panicError is a panic of the caller's code, recovered.
type panicError struct {
	what  string // the code: "the reader of model.gguf", "the progress callback"
	value any
}

func (e *panicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.what, e.value) }

// Unwrap gives ErrPanicked, and the panic's value when it is an error.
func (e *panicError) Unwrap() []error {
	if err, ok := e.value.(error); ok {
		return []error{ErrPanicked, err}
	}
	return []error{ErrPanicked}
}

// callUser calls f, code of the caller's that what names, and turns a
// panic in it into an error wrapping ErrPanicked; log (when not nil) gets
// its stack. Every call of the loader into the caller's code goes through
// it.
func callUser[T any](log *slog.Logger, what string, f func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{what: what, value: p}
			if log != nil {
				log.Debug(err.Error(), "stack", string(debug.Stack()))
			}
		}
	}()
	return f()
}

// userReader is the io.ReaderAt of a source that is no local file, its
// panics errors that name the source.
type userReader struct {
	r    io.ReaderAt
	what string // "the reader of " and the source's name
	log  *slog.Logger
}

func guardReader(r io.ReaderAt, name string, log *slog.Logger) userReader {
	return userReader{r: r, what: "the reader of " + name, log: log}
}

func (u userReader) ReadAt(p []byte, off int64) (int, error) {
	return callUser(u.log, u.what, func() (int, error) { return u.r.ReadAt(p, off) })
}

// callProgress hands the bytes done to the progress callback f.
func callProgress(log *slog.Logger, f func(done, total uint64) bool, done, total uint64) (bool, error) {
	return callUser(log, "the progress callback", func() (bool, error) { return f(done, total), nil })
}
