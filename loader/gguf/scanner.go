package gguf

import (
	"encoding/binary"
	"errors"
	"io"
)

// scanner reads a file sequentially through a window buffer over an
// io.ReaderAt, so that parsing costs a few large reads, not one per field.
// Every read is bounded by the file size; running past it is ErrTruncated.
type scanner struct {
	r    io.ReaderAt
	size int64 // file size
	off  int64 // offset of the next byte to read

	buf    []byte
	bufOff int64 // file offset of buf[0]
	err    error // sticky read error other than EOF
	narrow bool  // a window read failed: read field by field
}

const scanWindow = 256 << 10

func newScanner(r io.ReaderAt, size, off int64) *scanner {
	return &scanner{r: r, size: size, off: off}
}

// remain is the number of bytes between the cursor and the end of the file.
func (s *scanner) remain() uint64 {
	if s.off >= s.size {
		return 0
	}
	return uint64(s.size - s.off)
}

// next returns the next n bytes (n ≤ scanWindow) and advances past them.
// The slice is valid until the next call.
func (s *scanner) next(n int) ([]byte, error) {
	if uint64(n) > s.remain() {
		return nil, ErrTruncated
	}
	start := s.off - s.bufOff
	if start < 0 || start+int64(n) > int64(len(s.buf)) {
		if err := s.fill(n); err != nil {
			return nil, err
		}
		start = 0
	}
	s.off += int64(n)
	return s.buf[start : start+int64(n)], nil
}

// fill loads the window at the cursor with at least n bytes.
func (s *scanner) fill(n int) error {
	if s.err != nil {
		return s.err
	}
	want := scanWindow
	if s.narrow {
		want = n
	}
	if rem := s.remain(); uint64(want) > rem {
		want = int(rem)
	}
	if cap(s.buf) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	got, err := s.r.ReadAt(s.buf, s.off)
	if got < n && err != nil && !errors.Is(err, io.EOF) && want > n {
		// the window ahead failed (a remote reader's range past what it
		// had at hand): the bytes needed alone may not, and from here on
		// only what each field needs is read, so that an error names the
		// field being read when it happened, and the failing range is
		// asked for once, not again for every field before it
		s.narrow = true
		got, err = s.r.ReadAt(s.buf[:n], s.off)
	}
	s.buf = s.buf[:got]
	s.bufOff = s.off
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			return ErrTruncated
		}
		s.err = err
		return err
	}
	return nil
}

// skip advances n bytes without reading them.
func (s *scanner) skip(n uint64) error {
	if n > s.remain() {
		return ErrTruncated
	}
	s.off += int64(n)
	return nil
}

func (s *scanner) u8() (uint8, error) {
	b, err := s.next(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (s *scanner) u16() (uint16, error) {
	b, err := s.next(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (s *scanner) u32() (uint32, error) {
	b, err := s.next(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (s *scanner) u64() (uint64, error) {
	b, err := s.next(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// bytes reads n bytes into a new slice; n is checked against the remaining
// file before anything is allocated.
func (s *scanner) bytes(n uint64) ([]byte, error) {
	if n > s.remain() {
		return nil, ErrTruncated
	}
	out := make([]byte, n)
	for done := 0; done < len(out); {
		chunk := len(out) - done
		if chunk > scanWindow {
			chunk = scanWindow
		}
		b, err := s.next(chunk)
		if err != nil {
			return nil, err
		}
		done += copy(out[done:], b)
	}
	return out, nil
}
