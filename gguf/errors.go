package gguf

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/ggload/ggload/gguf/internal/osfile"
)

// Sentinels wrapped by the errors of this package.
var (
	ErrMagic   = errors.New("not a GGUF file")
	ErrVersion = errors.New("unsupported GGUF version")
	// ErrTruncated: the file ends before what its header says it holds
	// (a field, a string, an array, the data section, a tensor's data).
	// Every error of a file cut short wraps it, beside the more specific
	// ErrTooLarge or ErrOutOfBounds where a size or a tensor runs past
	// the end; the loader's errors of a file that shrank after it was
	// opened wrap it too.
	ErrTruncated      = errors.New("file is truncated")
	ErrTooLarge       = errors.New("size exceeds what the file can hold")
	ErrKey            = errors.New("bad key")
	ErrDuplicateKey   = errors.New("duplicate key")
	ErrValueType      = errors.New("bad value type")
	ErrAlignment      = errors.New("bad alignment")
	ErrTensorName     = errors.New("bad tensor name")
	ErrDuplicateName  = errors.New("duplicate tensor name")
	ErrShape          = errors.New("bad tensor shape")
	ErrTensorType     = errors.New("bad tensor type")
	ErrTensorOffset   = errors.New("bad tensor offset")
	ErrOutOfBounds    = errors.New("tensor data is not within the file bounds")
	ErrSplit          = errors.New("bad split")
	ErrMissingSplit   = errors.New("missing split")
	ErrNotFirstSplit  = errors.New("not the first split")
	ErrTypeMismatch   = errors.New("value has another type")
	ErrNotFound       = errors.New("not found")
	ErrTensorMismatch = errors.New("tensor count mismatch")
	// ErrNotRegular: the path names a FIFO, a socket, a device or a
	// directory. Open refuses it before anything can block on it (a FIFO's
	// open waits for a writer).
	ErrNotRegular = osfile.ErrNotRegular
)

// ErrClosed is wrapped by the errors of a use of a File or Model that
// needs its files after Close: a load (loader.Load refuses a closed
// model). What was parsed stays readable. It matches os.ErrClosed too, as
// the reads of a closed file's data do.
var ErrClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string        { return "GGUF file closed" }
func (closedError) Is(target error) bool { return target == os.ErrClosed }

// FormatError reports a fault in a GGUF file at a byte offset.
type FormatError struct {
	Path string // file name, when known
	Off  int64  // byte offset of the faulty field
	Msg  string
	Err  error // the sentinel
	// short: the fault is a size, a count or a tensor that runs past the
	// end of the file, which a longer file could hold: the error wraps
	// ErrTruncated besides Err.
	short bool
}

func (e *FormatError) Error() string {
	s := "gguf: "
	if e.Path != "" {
		s += e.Path + ": "
	}
	return s + fmt.Sprintf("%s at byte %#x", e.Msg, e.Off)
}

// Unwrap returns the sentinel, and ErrTruncated beside it where the fault
// runs past the end of the file.
func (e *FormatError) Unwrap() []error {
	if e.short && e.Err != ErrTruncated {
		return []error{e.Err, ErrTruncated}
	}
	return []error{e.Err}
}

func formatErr(off int64, sentinel error, format string, args ...any) *FormatError {
	return &FormatError{Off: off, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// shortErr is formatErr for a fault that runs past the end of the file:
// it wraps ErrTruncated besides sentinel.
func shortErr(off int64, sentinel error, format string, args ...any) *FormatError {
	e := formatErr(off, sentinel, format, args...)
	e.short = true
	return e
}

// pow2 formats n as 2^k when it is a power of two above 2^20, else decimal.
func pow2(n uint64) string {
	if n > 1<<20 && n&(n-1) == 0 {
		k := 0
		for m := n; m > 1; m >>= 1 {
			k++
		}
		return fmt.Sprintf("2^%d", k)
	}
	return fmt.Sprint(n)
}

// quoteMax is the most bytes of a key, a name or a string of a file that
// an error quotes.
const quoteMax = 96

// quote is text of a file as an error quotes it: Go-quoted (control
// characters and invalid UTF-8 escaped, so that it cannot act on a
// terminal) and cut after quoteMax bytes, its length then said: a key of
// 1 GiB makes an error of a few hundred bytes.
func quote(s string) string {
	head := clip(s, quoteMax)
	if len(head) == len(s) {
		return strconv.Quote(s)
	}
	return strconv.Quote(head) + cutMark(len(s))
}

// clip is the longest prefix of s of at most n bytes that does not end
// inside a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && i > n-utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	if !utf8.RuneStart(s[i]) {
		i = n // not UTF-8 there: cut at n
	}
	return s[:i]
}

// cutMark follows text cut short: its whole length.
func cutMark(n int) string { return fmt.Sprintf("…(%d bytes)", n) }
