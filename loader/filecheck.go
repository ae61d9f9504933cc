package loader

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ggload/ggload/place"
)

// ErrFileChanged is wrapped by the errors of Load and CheckFile when a model
// file changed: it shrank, grew, was written to or was replaced.
var ErrFileChanged = errors.New("model file changed")

// fileStamp is what CheckFile compares: the open file's size and
// modification time, and the file itself (device and inode on unix).
type fileStamp struct {
	info os.FileInfo
}

func (s fileStamp) size() int64      { return s.info.Size() }
func (s fileStamp) mtime() time.Time { return s.info.ModTime() }
func (f *modelFile) stamp() (fileStamp, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi}, nil
}

// change says how the open file differs from s ("" when it does not).
func (s fileStamp) change(now fileStamp) string {
	switch {
	case now.size() < s.size():
		return fmt.Sprintf("it shrank from %d to %d bytes", s.size(), now.size())
	case now.size() > s.size():
		return fmt.Sprintf("it grew from %d to %d bytes", s.size(), now.size())
	case !now.mtime().Equal(s.mtime()):
		return fmt.Sprintf("it was written to: modified %s, %s when opened", now.mtime().Format(time.RFC3339Nano), s.mtime().Format(time.RFC3339Nano))
	}
	return ""
}

// changed is err, which says the file changed from s to now, wrapping
// ErrTruncated too where it shrank.
func (s fileStamp) changed(now fileStamp, err error) error {
	if now.size() < s.size() {
		return tagged{err, ErrTruncated}
	}
	return err
}

// fileWatch paces the checks of the files during a load: one at a time,
// at most every 2 ms unless forced.
type fileWatch struct {
	mu   sync.Mutex // held by a check
	last time.Time  // when the files were last checked
}

// due reports, with mu held, whether the files are checked now.
func (w *fileWatch) due(force bool) bool {
	now := time.Now()
	if !force && now.Sub(w.last) < 2*time.Millisecond {
		return false
	}
	w.last = now
	return true
}

// watchFiles fails the load when a file changed since it was opened. It
// runs between tensors of every lane (one at a time, at most every 2 ms,
// or always when force is set)
// and once after the last: the bytes already moved may then mix old and
// new contents, and zero-copy tensors may lie past a shrunken end (a
// SIGBUS when computing), so the load does not succeed.
func (l *load) watchFiles(tensor string, force bool) error {
	l.watch.mu.Lock()
	defer l.watch.mu.Unlock()
	if !l.watch.due(force) {
		return nil
	}
	for i, f := range l.model.files {
		if i >= len(l.model.stamps) {
			break
		}
		if !f.local() {
			continue
		}
		now, err := f.stamp()
		if err != nil {
			return fileError("load", f.path, -1, fmt.Errorf("loader: %s: %w", f.path, err))
		}
		what := l.model.stamps[i].change(now)
		if what == "" {
			continue
		}
		if now.size() < l.model.stamps[i].size() {
			// name the first tensor the shrunken file no longer holds
			var first *place.TensorPlan
			var at, end int64 = -1, -1
			for k := range l.model.placements {
				pl := &l.model.placements[k] // (its Path is the lanes')
				w := pl.Plan.Weight
				if pl.Tensor != nil && w.File == i && w.Offset+w.Size > now.size() && (at < 0 || w.Offset < at) {
					first, at, end = pl.Plan, w.Offset, w.Offset+w.Size
				}
			}
			if first != nil {
				return l.tensorError("load", first, tagged{fmt.Errorf("loader: %w during the load: %s: %s; tensor '%s' (bytes [%d, %d)) lies past its end", ErrFileChanged, f.path, what, first.Name, at, end), ErrTruncated})
			}
		}
		where := ""
		if tensor != "" {
			where = fmt.Sprintf(" (noticed at tensor '%s')", tensor)
		}
		return fileError("load", f.path, -1, l.model.stamps[i].changed(now, fmt.Errorf("loader: %w during the load: %s: %s%s; the weights read may mix old and new bytes: load it again", ErrFileChanged, f.path, what, where)))
	}
	return nil
}

// CheckFile reports whether the model's files are still as they were when
// they were loaded: the same file at each path (not replaced), of the same
// size and modification time. A long-running program calls it (and Verify,
// which compares the weights themselves) to learn that a file changed under
// a loaded model. It matters most for zero-copy and lazy tensors, which
// stay in the file's mapping: if that file is truncated, computing with
// them faults (SIGBUS) and ends the process, as in llama.cpp. The error
// names the file and what changed and wraps ErrFileChanged; it is an
// *Error of op "check file".
//
// What it cannot see: a write that keeps the size and sets the
// modification time back (cp -p, rsync, touch -d into an existing file),
// and, on filesystems with coarse timestamps, a write within the same tick
// as the previous one. Verify reads the weights back and sees those.
func (m *Model) CheckFile() error {
	if err := m.hold("check file"); err != nil {
		return err
	}
	defer m.release()
	for i, f := range m.files {
		if i >= len(m.stamps) {
			break
		}
		if !f.local() {
			continue // a reader's bytes are its own business
		}
		if err := f.check(m.stamps[i]); err != nil {
			return fileError("check file", f.path, -1, err)
		}
	}
	return nil
}

// check is CheckFile for one file, opened as s says.
func (f *modelFile) check(s fileStamp) error {
	now, err := f.stamp()
	if err != nil {
		return fmt.Errorf("loader: check %s: %w", f.path, err)
	}
	if what := s.change(now); what != "" {
		return s.changed(now, fmt.Errorf("loader: %w since it was loaded: %s: %s", ErrFileChanged, f.path, what))
	}
	if !f.byPath {
		return nil // an open file has no path to be replaced at
	}
	at, err := os.Stat(f.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("loader: %w since it was loaded: %s was removed (the loaded file lives on until Close)", ErrFileChanged, f.path)
	case err != nil:
		return fmt.Errorf("loader: check %s: %w", f.path, err)
	case !os.SameFile(at, now.info):
		return fmt.Errorf("loader: %w since it was loaded: %s was replaced by another file (the loaded one lives on until Close)", ErrFileChanged, f.path)
	}
	return nil
}
