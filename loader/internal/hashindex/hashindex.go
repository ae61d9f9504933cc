package loader

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

// The RPC hash index. An RPC server with a file cache (ggml-rpc-server -c)
// is asked for each weight above 10 MiB by the FNV-1a hash of its bytes
// before they are sent, and working that hash out means reading and
// hashing the whole tensor, at about 1 GB/s a core. The index keeps the
// hashes of a file's tensors in the user cache, so that the next load of
// the same file asks the server first and reads only what it misses.
//
// An index belongs to one file, known by its identity: device, inode,
// size, modification and change times, and a sampled content check (the
// first 64 KiB, the last 4 KiB, and 32 pages of 4 KiB spread evenly,
// hashed). An entry is trusted only when the identity of the file being
// loaded is the index's. A file rewritten in place changes its change time
// (which no program can set back); where a filesystem keeps no change time
// or a file is restored with its old one, the samples catch a rewrite that
// touches any of them, but not a change confined to bytes between them
// with the size and both times kept. A hash taken from a stale entry asks
// the server for bytes the file no longer has: the read-back confirmation
// of every tensor (a window of its bytes, read from the file as it is now)
// catches most such loads.
//
// Files are written whole to a temporary name and renamed, so a reader
// sees an old index or a new one, never half of one; an index that is
// truncated, corrupt (a checksum covers it) or of another version, or a
// temporary left by a crashed process, is ignored. Two processes that load
// at once each merge what is on disk before writing, so at worst one's new
// entries are lost and taken again next time. The directory holds at most
// hashIndexFiles indexes (the oldest are dropped) of at most
// hashIndexEntries entries each.

const (
	hashIndexMagic   = "GGLHIDX1"
	hashIndexEntries = 1 << 20 // 24 MiB
	hashIndexFiles   = 64
	hashIndexExt     = ".hidx"
	// sampling of the content check
	hashIndexHead    = 64 << 10
	hashIndexPage    = 4 << 10
	hashIndexSamples = 32
)

// fileIdentity is what an index's file must match.
type fileIdentity struct {
	Dev, Ino uint64
	Size     int64
	Mtime    int64 // ns
	Ctime    int64 // ns
	Sample   uint64
}

// hashKey is one tensor's range of the file.
type hashKey struct{ off, size int64 }

// fileHashes is the index of one file: the entries read from disk and
// those added by this load.
type fileHashes struct {
	dir  string
	name string // file name in dir
	id   fileIdentity

	mu    sync.Mutex
	known map[hashKey]uint64
	added int
}

// hashIndexDir is where indexes go: dir, or ggload/rpc-hashes in the user
// cache directory when dir is ""; "" with no user cache, or "off".
func hashIndexDir(dir string) string {
	switch dir {
	case "off":
		return ""
	case "":
		c, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(c, "ggload", "rpc-hashes")
	}
	return dir
}

// openFileHashes takes the identity of f, its samples read through
// samples (a descriptor of f with no readahead: 196 KiB read in all), and
// the index kept for it in dir, if that is f's; nil when f's identity
// cannot be taken.
func openFileHashes(dir string, f *os.File, samples io.ReaderAt) *fileHashes {
	id, err := identify(f, samples)
	if err != nil {
		return nil
	}
	h := fnv.New64a()
	binary.Write(h, binary.LittleEndian, [2]uint64{id.Dev, id.Ino})
	fh := &fileHashes{dir: dir, name: fmt.Sprintf("%016x%s", h.Sum64(), hashIndexExt), id: id, known: map[hashKey]uint64{}}
	if m, err := readHashIndex(filepath.Join(dir, fh.name), id); err == nil {
		fh.known = m
	}
	return fh
}

// identify takes f's identity, its samples read through samples.
func identify(f *os.File, samples io.ReaderAt) (fileIdentity, error) {
	st, err := f.Stat()
	if err != nil {
		return fileIdentity{}, err
	}
	id, ok := statIdentity(st)
	if !ok {
		return fileIdentity{}, errors.ErrUnsupported
	}
	id.Sample, err = sampleFile(samples, id.Size)
	return id, err
}

// sampleFile hashes the sampled pages of a file of size bytes.
func sampleFile(r io.ReaderAt, size int64) (uint64, error) {
	h := fnv.New64a()
	buf := make([]byte, hashIndexHead)
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
	if err := read(0, hashIndexHead); err != nil {
		return 0, err
	}
	for i := int64(1); i <= hashIndexSamples; i++ {
		if err := read(size*i/(hashIndexSamples+1)&^(hashIndexPage-1), hashIndexPage); err != nil {
			return 0, err
		}
	}
	if err := read(size-hashIndexPage, hashIndexPage); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

// get is the hash of the range, if known.
func (fh *fileHashes) get(off, size int64) (uint64, bool) {
	if fh == nil {
		return 0, false
	}
	fh.mu.Lock()
	defer fh.mu.Unlock()
	v, ok := fh.known[hashKey{off, size}]
	return v, ok
}

// within reports whether the index knows the hash of a range inside
// [off, off+size): a slice of a tensor split over servers.
func (fh *fileHashes) within(off, size int64) bool {
	if fh == nil {
		return false
	}
	fh.mu.Lock()
	defer fh.mu.Unlock()
	for k := range fh.known {
		if k.off >= off && k.size <= off+size-k.off {
			return true
		}
	}
	return false
}

// put records the hash of a range.
func (fh *fileHashes) put(off, size int64, v uint64) {
	if fh == nil {
		return
	}
	fh.mu.Lock()
	defer fh.mu.Unlock()
	k := hashKey{off, size}
	if old, ok := fh.known[k]; ok && old == v {
		return
	}
	if len(fh.known) >= hashIndexEntries {
		return
	}
	fh.known[k] = v
	fh.added++
}

// save writes the index when this load added to it: what is on disk for
// the same file is merged in, the whole written to a temporary file and
// renamed over the index.
func (fh *fileHashes) save() error {
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
	if disk, err := readHashIndex(path, fh.id); err == nil {
		for k, v := range disk {
			if _, ok := fh.known[k]; !ok && len(fh.known) < hashIndexEntries {
				fh.known[k] = v
			}
		}
	}
	keys := make([]hashKey, 0, len(fh.known))
	for k := range fh.known {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b hashKey) int {
		return cmp.Or(cmp.Compare(a.off, b.off), cmp.Compare(a.size, b.size))
	})
	var b bytes.Buffer
	b.WriteString(hashIndexMagic)
	binary.Write(&b, binary.LittleEndian, fh.id)
	binary.Write(&b, binary.LittleEndian, uint64(len(keys)))
	for _, k := range keys {
		binary.Write(&b, binary.LittleEndian, [3]uint64{uint64(k.off), uint64(k.size), fh.known[k]})
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
	pruneHashIndexes(fh.dir, fh.name)
	return nil
}

// readHashIndex reads an index file, refusing one that is not whole, not
// this version's, or of a file other than id.
func readHashIndex(path string, id fileIdentity) (map[hashKey]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const head = len(hashIndexMagic) + 6*8 + 8
	n := st.Size()
	if n < int64(head)+8 || n > int64(head)+8+24*hashIndexEntries || (n-int64(head)-8)%24 != 0 {
		return nil, fmt.Errorf("%s: %d bytes is no index", path, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	sum := fnv.New64a()
	sum.Write(b[:n-8])
	if string(b[:len(hashIndexMagic)]) != hashIndexMagic || sum.Sum64() != binary.LittleEndian.Uint64(b[n-8:]) {
		return nil, fmt.Errorf("%s: not a whole index of this version", path)
	}
	var got fileIdentity
	if err := binary.Read(bytes.NewReader(b[len(hashIndexMagic):]), binary.LittleEndian, &got); err != nil {
		return nil, err
	}
	if got != id {
		return nil, fmt.Errorf("%s: the index of another file, or of this one before it changed", path)
	}
	count := binary.LittleEndian.Uint64(b[head-8:])
	if count != uint64(n-int64(head)-8)/24 {
		return nil, fmt.Errorf("%s: %d entries in %d bytes", path, count, n)
	}
	m := make(map[hashKey]uint64, count)
	for p := head; p < int(n)-8; p += 24 {
		m[hashKey{int64(binary.LittleEndian.Uint64(b[p:])), int64(binary.LittleEndian.Uint64(b[p+8:]))}] = binary.LittleEndian.Uint64(b[p+16:])
	}
	return m, nil
}

// pruneHashIndexes keeps the directory to hashIndexFiles indexes (the
// least recently written go; keep stays) and removes temporaries older
// than an hour (left by a process that crashed while writing).
func pruneHashIndexes(dir, keep string) {
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
		case filepath.Ext(name) == hashIndexExt && name != keep:
			idxs = append(idxs, idx{name, info.ModTime()})
		}
	}
	if len(idxs) < hashIndexFiles {
		return
	}
	slices.SortFunc(idxs, func(a, b idx) int { return a.mod.Compare(b.mod) })
	for _, x := range idxs[:len(idxs)-(hashIndexFiles-1)] {
		os.Remove(filepath.Join(dir, x.name))
	}
}
