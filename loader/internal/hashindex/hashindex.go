package hashindex

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The sampling of the content check: the first SampleHead bytes, the
// last SamplePage, and Samples pages of SamplePage bytes spread evenly
// between them, each at a multiple of SamplePage.
const (
	SampleHead = 64 << 10
	SamplePage = 4 << 10
	Samples    = 32
)

const (
	magic      = "GGLHIDX1"
	maxEntries = 1 << 20 // 24 MiB
	maxFiles   = 64
	ext        = ".hidx"
)

// Identity is what a file must match for its index to be trusted. It is
// written into the index as it is, so its layout is part of the format.
type Identity struct {
	Dev, Ino uint64
	Size     int64
	Mtime    int64  // ns
	Ctime    int64  // ns
	Sample   uint64 // the hash of the sampled pages
}

// Key is one tensor's range of the file: Size bytes from offset Off.
type Key struct{ Off, Size int64 }

// Index is the index of one file: the entries read from disk and those
// added since. Its methods may be called at once from several goroutines,
// and on a nil *Index, which knows nothing and saves nothing.
type Index struct {
	dir  string
	name string // file name in dir
	id   Identity

	mu    sync.Mutex
	known map[Key]uint64
	added int
}

// Dir is where indexes go, given the option opt: opt itself, or
// ggload/rpc-hashes in the user cache directory when opt is ""; "" (no
// index) with no user cache, or when opt is "off".
func Dir(opt string) string {
	switch opt {
	case "off":
		return ""
	case "":
		c, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(c, "ggload", "rpc-hashes")
	}
	return opt
}

// Open takes the identity of f, its samples read through samples (best a
// descriptor of f with no readahead: 196 KiB are read in all), and the
// index kept for it in dir, if that is f's; an index with no entries
// otherwise. It is nil when f's identity cannot be taken.
func Open(dir string, f *os.File, samples io.ReaderAt) *Index {
	id, err := Identify(f, samples)
	if err != nil {
		return nil
	}
	h := fnv.New64a()
	binary.Write(h, binary.LittleEndian, [2]uint64{id.Dev, id.Ino})
	fh := &Index{dir: dir, name: fmt.Sprintf("%016x%s", h.Sum64(), ext), id: id, known: map[Key]uint64{}}
	if m, err := readIndex(filepath.Join(dir, fh.name), id); err == nil {
		fh.known = m
	}
	return fh
}

// Identify takes f's identity, its samples read through samples (f
// itself, or another descriptor of the same file). The error is
// errors.ErrUnsupported where the system has no inode to know f by.
func Identify(f *os.File, samples io.ReaderAt) (Identity, error) {
	st, err := f.Stat()
	if err != nil {
		return Identity{}, err
	}
	id, ok := statIdentity(st)
	if !ok {
		return Identity{}, errors.ErrUnsupported
	}
	id.Sample, err = sampleFile(samples, id.Size)
	return id, err
}

// sampleFile hashes the sampled pages of a file of size bytes.
func sampleFile(r io.ReaderAt, size int64) (uint64, error) {
	h := fnv.New64a()
	buf := make([]byte, SampleHead)
	read := func(off, n int64) error {
		off, n = max(off, 0), min(n, size-max(off, 0))
		if n <= 0 {
			return nil
		}
		if _, err := r.ReadAt(buf[:n], off); err != nil && !(errors.Is(err, io.EOF)) {
			return err
		}
		var at [8]byte
		binary.LittleEndian.PutUint64(at[:], uint64(off))
		h.Write(at[:])
		h.Write(buf[:n])
		return nil
	}
	if err := read(0, SampleHead); err != nil {
		return 0, err
	}
	for i := int64(1); i <= Samples; i++ {
		if err := read(size*i/(Samples+1)&^(SamplePage-1), SamplePage); err != nil {
			return 0, err
		}
	}
	if err := read(size-SamplePage, SamplePage); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

// Dir is the directory the index is kept in.
func (fh *Index) Dir() string {
	if fh == nil {
		return ""
	}
	return fh.dir
}

// Get is the hash of the range k, if known.
func (fh *Index) Get(k Key) (uint64, bool) {
	if fh == nil {
		return 0, false
	}
	fh.mu.Lock()
	defer fh.mu.Unlock()
	v, ok := fh.known[k]
	return v, ok
}

// Within reports whether the index knows the hash of a range that lies
// inside k (a slice of a tensor split over servers).
func (fh *Index) Within(k Key) bool {
	if fh == nil {
		return false
	}
	fh.mu.Lock()
	defer fh.mu.Unlock()
	for e := range fh.known {
		if e.Off >= k.Off && e.Size <= k.Off+k.Size-e.Off {
			return true
		}
	}
	return false
}

// Put records v as the hash of the range k; an index that holds
// maxEntries already takes no more.
func (fh *Index) Put(k Key, v uint64) {
	if fh == nil {
		return
	}
	fh.mu.Lock()
	defer fh.mu.Unlock()
	if old, ok := fh.known[k]; ok && old == v {
		return
	}
	if len(fh.known) >= maxEntries {
		return
	}
	fh.known[k] = v
	fh.added++
}

// Save writes the index when Put added to it since it was opened or last
// saved: what is on disk for the same file is merged in, the whole written
// to a temporary file and renamed over the index, and the directory pruned
// to maxFiles indexes.
func (fh *Index) Save() error {
	if fh == nil {
		return nil
	}
	fh.mu.Lock()
	defer fh.mu.Unlock()
	if fh.added == 0 {
		return nil
	}
	if err := os.MkdirAll(fh.dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(fh.dir, fh.name)
	if disk, err := readIndex(path, fh.id); err == nil {
		for k, v := range disk {
			if _, ok := fh.known[k]; !ok && len(fh.known) < maxEntries {
				fh.known[k] = v
			}
		}
	}
	keys := make([]Key, 0, len(fh.known))
	for k := range fh.known {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Off, b.Off), cmp.Compare(a.Size, b.Size))
	})
	var b bytes.Buffer
	b.WriteString(magic)
	binary.Write(&b, binary.LittleEndian, fh.id)
	binary.Write(&b, binary.LittleEndian, uint64(len(keys)))
	for _, k := range keys {
		binary.Write(&b, binary.LittleEndian, [3]uint64{uint64(k.Off), uint64(k.Size), fh.known[k]})
	}
	sum := fnv.New64a()
	sum.Write(b.Bytes())
	binary.Write(&b, binary.LittleEndian, sum.Sum64())
	tmp, err := os.CreateTemp(fh.dir, ".tmp-"+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	fh.added = 0
	prune(fh.dir, fh.name)
	return nil
}

// readIndex reads an index file, refusing one that is not whole, not this
// version's, or of a file other than id.
func readIndex(path string, id Identity) (map[Key]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const head = len(magic) + 6*8 + 8
	n := st.Size()
	if n < int64(head)+8 || n > int64(head)+8+24*maxEntries || (n-int64(head)-8)%24 != 0 {
		return nil, fmt.Errorf("%s: %d bytes is no index", path, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	sum := fnv.New64a()
	sum.Write(b[:n-8])
	if string(b[:len(magic)]) != magic || sum.Sum64() != binary.LittleEndian.Uint64(b[n-8:]) {
		return nil, fmt.Errorf("%s: not a whole index of this version", path)
	}
	var got Identity
	if err := binary.Read(bytes.NewReader(b[len(magic):]), binary.LittleEndian, &got); err != nil {
		return nil, err
	}
	if got != id {
		return nil, fmt.Errorf("%s: the index of another file, or of this one before it changed", path)
	}
	count := binary.LittleEndian.Uint64(b[head-8:])
	if count != uint64(n-int64(head)-8)/24 {
		return nil, fmt.Errorf("%s: %d entries in %d bytes", path, count, n)
	}
	m := make(map[Key]uint64, count)
	for p := head; p < int(n)-8; p += 24 {
		m[Key{int64(binary.LittleEndian.Uint64(b[p:])), int64(binary.LittleEndian.Uint64(b[p+8:]))}] = binary.LittleEndian.Uint64(b[p+16:])
	}
	return m, nil
}

// prune keeps the directory to maxFiles indexes (the least recently
// written go; keep stays) and removes temporaries older than an hour (left
// by a process that crashed while writing).
func prune(dir, keep string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type idx struct {
		name string
		mod  time.Time
	}
	var idxs []idx
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		name := e.Name()
		switch {
		case len(name) > 5 && name[:5] == ".tmp-":
			if time.Since(info.ModTime()) > time.Hour {
				os.Remove(filepath.Join(dir, name))
			}
		case filepath.Ext(name) == ext && name != keep:
			idxs = append(idxs, idx{name, info.ModTime()})
		}
	}
	if len(idxs) < maxFiles {
		return
	}
	slices.SortFunc(idxs, func(a, b idx) int { return a.mod.Compare(b.mod) })
	for _, x := range idxs[:len(idxs)-(maxFiles-1)] {
		os.Remove(filepath.Join(dir, x.name))
	}
}
