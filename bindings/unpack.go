package bindings

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// licenseName is the name the package's LICENSE takes in a set.
const licenseName = "LICENSE.node-llama-cpp"

// place unpacks the set from the tarball into a new directory beside
// dir/set, stamps it, and renames it to dir/set. It returns the names of
// the files unpacked.
func (in installer) place(tgz io.Reader, set, dir, stamp string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dir, "."+set+".new-*")
	if err != nil {
		return nil, err
	}
	placed := false
	defer func() {
		if !placed {
			os.RemoveAll(tmp)
		}
	}()
	files, err := in.unpack(tgz, set, tmp)
	if err != nil {
		return nil, err
	}
	if err := writeSynced(filepath.Join(tmp, stampFile), strings.NewReader(stamp+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	dst := filepath.Join(dir, set)
	if err := replaceDir(tmp, dst); err != nil {
		if readStamp(dst) == stamp {
			// another process installed the same set meanwhile
			return files, nil
		}
		return nil, err
	}
	placed = true
	return files, nil
}

// replaceDir renames the directory src to dst. Whatever dst was is moved
// aside first, into a new directory beside it, and removed once src is in
// its place (renamed back if src cannot be).
func replaceDir(src, dst string) error {
	err := os.Rename(src, dst)
	if err == nil {
		return nil
	}
	if _, serr := os.Lstat(dst); serr != nil {
		return err
	}
	aside, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".old-*")
	if err != nil {
		return err
	}
	old := filepath.Join(aside, filepath.Base(dst))
	if err := os.Rename(dst, old); err != nil {
		os.Remove(aside)
		return fmt.Errorf("moving the installed set aside: %w", err)
	}
	if err := os.Rename(src, dst); err != nil {
		if rerr := os.Rename(old, dst); rerr == nil {
			os.Remove(aside)
		}
		return err
	}
	return os.RemoveAll(aside)
}

// unpack writes the set's files from the gzipped tarball into dir: the
// regular files of package/bins/<set>/ that are libraries, and
// package/LICENSE as LICENSE.node-llama-cpp. Every entry's path is
// checked, not only those taken; links and other entries that are not
// regular files are skipped. The tar stream is read up to
// in.maxArchive bytes.
func (in installer) unpack(tgz io.Reader, set, dir string) ([]string, error) {
	zr, err := gzip.NewReader(tgz)
	if err != nil {
		return nil, fmt.Errorf("not a gzipped tarball: %v", err)
	}
	stream := &boundedReader{r: zr, left: in.maxArchive, limit: in.maxArchive}
	tr := tar.NewReader(stream)
	bins := "package/bins/" + set + "/"
	var files []string
	taken := map[string]bool{}
	libs := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if stream.over {
				return nil, stream.explain(err)
			}
			return nil, fmt.Errorf("bad tarball: %w", err)
		}
		if leavesDir(hdr.Name) {
			return nil, fmt.Errorf("%w: %q", ErrUnsafeArchive, hdr.Name)
		}
		name := path.Clean(hdr.Name)
		var out string
		switch rest, inBins := strings.CutPrefix(name, bins); {
		case name == "package/LICENSE":
			out = licenseName
		case inBins && !strings.Contains(rest, "/") && isLibrary(rest):
			out = rest
		default:
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			if out == licenseName {
				return nil, fmt.Errorf("package/LICENSE is not a regular file (tar type %q)", hdr.Typeflag)
			}
			continue
		}
		if taken[out] {
			return nil, fmt.Errorf("%s appears twice in the archive", hdr.Name)
		}
		taken[out] = true
		perm := fs.FileMode(hdr.Mode).Perm()&0o755 | 0o644
		if err := writeSynced(filepath.Join(dir, out), tr, perm); err != nil {
			return nil, fmt.Errorf("%s: %w", hdr.Name, stream.explain(err))
		}
		files = append(files, out)
		if out != licenseName {
			libs++
		}
	}
	if !taken[licenseName] {
		return nil, errors.New("no package/LICENSE in the archive")
	}
	if libs == 0 {
		return nil, fmt.Errorf("no libraries in the archive's %s", bins)
	}
	sort.Strings(files)
	return files, nil
}

// leavesDir reports whether an archive path would leave the directory it
// is unpacked into on some system: empty, absolute, with a drive letter,
// or with a ".." element between slashes or backslashes (Windows'
// separator).
func leavesDir(name string) bool {
	if name == "" || name[0] == '/' || name[0] == '\\' || len(name) >= 2 && name[1] == ':' {
		return true
	}
	for _, el := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return true
		}
	}
	return false
}

// isLibrary reports whether a file name is one scripts/fetch-native.sh
// takes from a package: *.so*, *.dylib, *.dll.
func isLibrary(name string) bool {
	return strings.Contains(name, ".so") || strings.HasSuffix(name, ".dylib") || strings.HasSuffix(name, ".dll")
}

// writeSynced creates the file, which must not exist, with r's content,
// and syncs it.
func writeSynced(name string, r io.Reader, perm fs.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// boundedReader reads at most limit bytes from r, and fails past them.
type boundedReader struct {
	r           io.Reader
	left, limit int64
	over        bool
}

var errArchiveTooBig = errors.New("archive too big")

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.r.Read(one[:]); n == 0 {
			return 0, err
		}
		b.over = true
		return 0, errArchiveTooBig
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// explain says why reading the archive failed: past the bound, or
// truncated or corrupt, or err itself (the file system's).
func (b *boundedReader) explain(err error) error {
	switch {
	case b.over || errors.Is(err, errArchiveTooBig):
		return fmt.Errorf("the archive unpacks to more than %d bytes", b.limit)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, tar.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader):
		return fmt.Errorf("bad tarball: %w", err)
	}
	return err
}
