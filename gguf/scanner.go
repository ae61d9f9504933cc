package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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

// text reads a string of n bytes. n is checked against the file's size,
// but memory is taken as the bytes arrive (gather): a length that a source
// claims and does not hold (a reader past its real bytes) costs no more
// than what is there.
func (s *scanner) text(n uint64) (string, error) {
	if n > s.remain() {
		return "", ErrTruncated
	}
	ps, err := gather(n, scanWindow, func(dst []byte) error {
		for len(dst) > 0 {
			b, err := s.next(min(len(dst), scanWindow))
			if err != nil {
				return err
			}
			dst = dst[copy(dst, b):]
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return joinString(ps, n), nil
}

// readClaimed reads n bytes at off of r, a length that a file claims, as
// they arrive (gather). Fewer bytes than n is ErrTruncated.
func readClaimed(r io.ReaderAt, off int64, n uint64) ([][]byte, error) {
	var done int64
	return gather(n, firstPiece, func(dst []byte) error {
		got, err := r.ReadAt(dst, off+done)
		done += int64(got)
		if got < len(dst) {
			if err == nil || errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: %d of %d bytes there", ErrTruncated, done, n)
			}
			return err
		}
		return nil
	})
}

// firstPiece is the first read of readClaimed.
const firstPiece = 1 << 20

// gather reads n bytes that a file claims through read, which fills each
// piece it is given with the next bytes. The pieces double in size from
// first, each made once the one before is full: what is held is at most
// twice the bytes that arrived, whatever n claims, and joining them is the
// one copy made.
func gather(n uint64, first int, read func(dst []byte) error) ([][]byte, error) {
	var ps [][]byte
	for done := uint64(0); done < n; {
		p := make([]byte, min(n-done, max(done, uint64(first))))
		if err := read(p); err != nil {
			return nil, err
		}
		ps = append(ps, p)
		done += uint64(len(p))
	}
	return ps, nil
}

// joinBytes is the n bytes of pieces ps as one slice.
func joinBytes(ps [][]byte, n uint64) []byte {
	if len(ps) == 1 {
		return ps[0]
	}
	out := make([]byte, 0, n)
	for _, p := range ps {
		out = append(out, p...)
	}
	return out
}

// joinString is the n bytes of pieces ps as a string.
func joinString(ps [][]byte, n uint64) string {
	var b strings.Builder
	b.Grow(int(n))
	for _, p := range ps {
		b.Write(p)
	}
	return b.String()
}

// firstReserve is the most entries (pairs, tensor infos, string offsets)
// that a count read from a file reserves before they are read: a header
// may claim far more than its source holds (a sparse file reads as
// terabytes of zeros, a reader may claim any size), so a slice or map
// starts at most this big and grows with the entries that arrive.
const firstReserve = 4096

// reserve is the room to make for n entries counted by a file.
func reserve(n uint64) int { return int(min(n, firstReserve)) }

// appendCounted appends e to s, made by reserve for n entries: when s is
// full its room doubles, up to n, so that growing costs one copy of what
// was read (append alone grows large slices by a quarter at a time).
func appendCounted[T any](s []T, e T, n uint64) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, int(max(min(n, 2*uint64(cap(s))), uint64(len(s))+1))-len(s))
	}
	return append(s, e)
}
