package gguf

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ggload/ggload/gguf/internal/osfile"
)

// ErrSource is wrapped by the errors of a Source that cannot be read: an
// offset or a length past the end of its file, a descriptor not open for
// reading, a reader without a size.
var ErrSource = errors.New("bad source")

// Source says where the bytes of a GGUF file are: a local file by its path
// (as Open takes it), an open *os.File, or any io.ReaderAt. A GGUF inside a
// bigger file (a llamafile executable, an uncompressed archive, an APK's
// asset) is a window of it: it starts at Offset and is Size bytes long,
// and opens as if it stood alone (its offsets, and its alignment, count
// from its own start, as the format defines them).
//
// The loader maps and reads local files (a path or an *os.File) in every
// load mode; it reads other sources through their ReaderAt, without mmap.
type Source struct {
	// Name is what errors and reports call the file: its path, a URL.
	// Zero: the path, or the *os.File's name.
	Name string
	// Path is a local file to open.
	Path string
	// File is an open local file, which the caller keeps open and closes
	// (the model reads it until it is closed).
	File *os.File
	// Offset and Size are the window of the local file the GGUF lies in;
	// a negative Size runs to the end of the file. For a Reader, Size is
	// its size and Offset must be 0.
	Offset, Size int64
	// Reader is any other source of Size bytes.
	Reader io.ReaderAt
	// Closer, when set, is closed with the File (a reader the source owns,
	// such as an HTTP reader's connections).
	Closer io.Closer
	// Sequential says that the Reader's bytes come as one stream (a server
	// that ignores range requests): read them once, in file order, with
	// one reader. A read behind the stream may be refused.
	Sequential bool
}

// PathSource is the local file at path.
func PathSource(path string) Source { return Source{Path: path, Size: -1} }

// FileSource is size bytes of f from offset off (size < 0: to its end).
func FileSource(f *os.File, off, size int64) Source {
	return Source{File: f, Offset: off, Size: size}
}

// ReaderSource is size bytes read through r, called name.
func ReaderSource(name string, r io.ReaderAt, size int64) Source {
	return Source{Name: name, Reader: r, Size: size}
}

// OpenFile opens the local file of a path source again, as OpenSource
// opens it: read-only, and only if it is a regular file (an error wrapping
// ErrNotRegular otherwise), for a reader that needs a descriptor of its
// own. The caller closes it.
func (s Source) OpenFile() (*os.File, error) {
	if s.Path == "" {
		return nil, fmt.Errorf("gguf: %s: %w: not a path", s.name(), ErrSource)
	}
	f, _, err := osfile.Open(s.Path)
	return f, err
}

// Local reports whether the source is a local file, which can be mapped
// and read with direct I/O.
func (s Source) Local() bool { return s.Reader == nil }

// name is what errors call the source.
func (s Source) name() string {
	switch {
	case s.Name != "":
		return s.Name
	case s.Path != "":
		return s.Path
	case s.File != nil:
		return s.File.Name()
	}
	return "the reader"
}

// window checks the source's window against a file of size bytes and
// returns its length.
func (s Source) window(size int64) (int64, error) {
	if s.Offset < 0 {
		return 0, fmt.Errorf("gguf: %s: %w: negative offset %d", s.name(), ErrSource, s.Offset)
	}
	if s.Offset > size {
		return 0, fmt.Errorf("gguf: %s: %w: offset %d lies past the end of the file (%d bytes)", s.name(), ErrSource, s.Offset, size)
	}
	n := s.Size
	if n < 0 {
		n = size - s.Offset
	}
	if s.Offset+n > size || s.Offset+n < s.Offset {
		return 0, fmt.Errorf("gguf: %s: %w: the window [%d, %d) lies past the end of the file (%d bytes)", s.name(), ErrSource, s.Offset, s.Offset+n, size)
	}
	return n, nil
}

// OpenSource opens and parses the GGUF file of s. Close releases what it
// opened (never the caller's *os.File or reader).
func OpenSource(s Source) (*File, error) {
	kinds := 0
	for _, set := range []bool{s.Path != "", s.File != nil, s.Reader != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return nil, fmt.Errorf("gguf: %w: a source is one of a path, an *os.File or a reader (%d given)", ErrSource, kinds)
	}
	var (
		base   io.ReaderAt
		osf    *os.File
		closer io.Closer
		total  int64
	)
	switch {
	case s.Path != "":
		f, fi, err := osfile.Open(s.Path)
		if err != nil {
			return nil, err
		}
		base, osf, closer, total = f, f, f, fi.Size()
	case s.File != nil:
		fi, err := osfile.Check(s.File)
		if err != nil {
			return nil, fmt.Errorf("gguf: %s: %w: %w", s.name(), ErrSource, err)
		}
		base, osf, total = s.File, s.File, fi.Size()
	default:
		if s.Offset != 0 || s.Size < 0 {
			return nil, fmt.Errorf("gguf: %s: %w: a reader needs its size (%d) and no offset (%d)", s.name(), ErrSource, s.Size, s.Offset)
		}
		base, total, closer = s.Reader, s.Size, s.Closer
	}
	n, err := s.window(total)
	if err != nil {
		if closer != nil {
			closer.Close()
		}
		return nil, err
	}
	r := base
	if s.Local() && (s.Offset != 0 || n != total) {
		r = io.NewSectionReader(base, s.Offset, n)
	}
	g, err := NewReader(r, n)
	if err != nil {
		if closer != nil {
			closer.Close()
		}
		var fe *FormatError
		if errors.As(err, &fe) {
			fe.Path = s.name()
		}
		return nil, err
	}
	s.Size = n
	if s.Name == "" {
		s.Name = s.name()
	}
	g.Path, g.src, g.osf, g.closer = s.Name, s, osf, closer
	return g, nil
}

// Source is where the file's bytes are (with its Size resolved). A File
// from NewReader has a reader source.
func (f *File) Source() Source { return f.src }

// OSFile is the open local file the GGUF is read from, nil for other
// sources.
func (f *File) OSFile() *os.File { return f.osf }
