//go:build unix

package hashindex

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// pattern is n bytes that differ with seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*31+i>>12)
	}
	return b
}

// indexFile writes a file of n bytes, each from seed, and opens it.
func indexFile(t *testing.T, dir, name string, n int, seed byte) *os.File {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pattern(n, seed), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// reopen takes f's index afresh, as the next load would.
func reopen(t *testing.T, dir string, f *os.File) *Index {
	t.Helper()
	fh := Open(dir, f, f)
	if fh == nil {
		t.Fatalf("%s: no identity", f.Name())
	}
	return fh
}

func TestHashIndexKeepsHashes(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	f := indexFile(t, data, "model.gguf", 1<<20, 1)
	fh := reopen(t, dir, f)
	if _, ok := fh.Get(Key{0, 100}); ok {
		t.Fatal("a new index knows a hash")
	}
	fh.Put(Key{4096, 65536}, 0xfeed)
	fh.Put(Key{0, 100}, 7)
	if err := fh.Save(); err != nil {
		t.Fatal(err)
	}
	again := reopen(t, dir, f)
	if h, ok := again.Get(Key{4096, 65536}); !ok || h != 0xfeed {
		t.Fatalf("after a save: %#x, %v", h, ok)
	}
	if _, ok := again.Get(Key{4096, 65535}); ok {
		t.Fatal("a hash for another range")
	}
	// nothing added: nothing written
	st0, _ := os.Stat(filepath.Join(dir, again.name))
	time.Sleep(10 * time.Millisecond)
	if err := again.Save(); err != nil {
		t.Fatal(err)
	}
	if st1, _ := os.Stat(filepath.Join(dir, again.name)); !st1.ModTime().Equal(st0.ModTime()) {
		t.Fatal("an index with nothing new was written again")
	}
}

// Within finds the entries that lie inside a range (a tensor's slices),
// none that only overlap it.
func TestHashIndexWithin(t *testing.T) {
	var none *Index
	if none.Within(Key{0, 1 << 30}) {
		t.Fatal("no index knows a range")
	}
	fh := reopen(t, t.TempDir(), indexFile(t, t.TempDir(), "model.gguf", 1<<20, 1))
	if fh.Within(Key{0, 1 << 20}) {
		t.Fatal("an empty index knows a range")
	}
	fh.Put(Key{4096, 8192}, 1) // [4096, 12288)
	for _, c := range []struct {
		off, size int64
		want      bool
	}{
		{4096, 8192, true}, {0, 12288, true}, {4096, 1 << 20, true},
		{0, 12287, false}, {4097, 8192, false}, {8192, 8192, false}, {12288, 4096, false}, {0, 4096, false},
	} {
		if got := fh.Within(Key{c.off, c.size}); got != c.want {
			t.Errorf("Within(%d, %d) = %v, want %v", c.off, c.size, got, c.want)
		}
	}
}

// saved makes f's index with one entry and returns its path.
func saved(t *testing.T, dir string, f *os.File) string {
	t.Helper()
	fh := reopen(t, dir, f)
	fh.Put(Key{0, 4096}, 42)
	if err := fh.Save(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, fh.name)
}

func TestHashIndexRefusesWhatIsNotItsFile(t *testing.T) {
	trusted := func(t *testing.T, dir string, f *os.File) bool {
		_, ok := reopen(t, dir, f).Get(Key{0, 4096})
		return ok
	}
	t.Run("stale", func(t *testing.T) {
		dir, data := t.TempDir(), t.TempDir()
		f := indexFile(t, data, "m", 1<<20, 1)
		saved(t, dir, f)
		// the file grows
		w, _ := os.OpenFile(f.Name(), os.O_WRONLY|os.O_APPEND, 0)
		w.Write([]byte("more"))
		w.Close()
		if trusted(t, dir, f) {
			t.Fatal("the index of the file before it grew is trusted")
		}
	})
	t.Run("truncated", func(t *testing.T) {
		dir, data := t.TempDir(), t.TempDir()
		f := indexFile(t, data, "m", 1<<20, 1)
		path := saved(t, dir, f)
		b, _ := os.ReadFile(path)
		for _, n := range []int{len(b) - 1, len(b) - 24, 8, 0} {
			os.WriteFile(path, b[:n], 0o644)
			if trusted(t, dir, f) {
				t.Fatalf("an index cut to %d of %d bytes is trusted", n, len(b))
			}
		}
		// a flipped byte
		c := bytes.Clone(b)
		c[len(c)-9] ^= 1
		os.WriteFile(path, c, 0o644)
		if trusted(t, dir, f) {
			t.Fatal("a corrupt index is trusted")
		}
	})
	t.Run("another file", func(t *testing.T) {
		dir, data := t.TempDir(), t.TempDir()
		a := indexFile(t, data, "a", 1<<20, 1)
		b := indexFile(t, data, "b", 1<<20, 1) // the same bytes
		pa := saved(t, dir, a)
		raw, _ := os.ReadFile(pa)
		os.WriteFile(filepath.Join(dir, reopen(t, dir, b).name), raw, 0o644)
		if trusted(t, dir, b) {
			t.Fatal("another file's index is trusted")
		}
	})
	t.Run("crashed writer", func(t *testing.T) {
		dir, data := t.TempDir(), t.TempDir()
		f := indexFile(t, data, "m", 1<<20, 1)
		path := saved(t, dir, f)
		b, _ := os.ReadFile(path)
		// what a writer that crashed leaves: a temporary, never renamed,
		// and (on a system that lost the data of a rename) a file of zeros
		tmp := filepath.Join(dir, ".tmp-1-crashed")
		os.WriteFile(tmp, b[:len(b)/2], 0o644)
		old := time.Now().Add(-2 * time.Hour)
		os.Chtimes(tmp, old, old)
		os.WriteFile(path, make([]byte, len(b)), 0o644)
		if trusted(t, dir, f) {
			t.Fatal("an index of zeros is trusted")
		}
		fh := reopen(t, dir, f)
		fh.Put(Key{0, 4096}, 43)
		if err := fh.Save(); err != nil {
			t.Fatal(err)
		}
		if h, _ := reopen(t, dir, f).Get(Key{0, 4096}); h != 43 {
			t.Fatalf("rewritten over a broken index: %d", h)
		}
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Fatal("a crashed writer's old temporary is left")
		}
	})
	t.Run("rewritten in place", func(t *testing.T) {
		dir, data := t.TempDir(), t.TempDir()
		f := indexFile(t, data, "m", 1<<20, 1)
		before, err := Identify(f, f)
		if err != nil {
			t.Fatal(err)
		}
		saved(t, dir, f)
		st, _ := f.Stat()
		// other bytes, the same size, the modification time put back
		indexFileBytes(t, f.Name(), 1<<20, 2)
		os.Chtimes(f.Name(), st.ModTime(), st.ModTime())
		if trusted(t, dir, f) {
			t.Fatal("the index of a file rewritten in place is trusted")
		}
		after, _ := Identify(f, f)
		if after.Mtime != before.Mtime || after.Size != before.Size {
			t.Fatalf("the rewrite changed the size or time: %+v, %+v", before, after)
		}
		// where the change time tells nothing (a filesystem without
		// one, a restored file), the samples still see it
		after.Ctime = before.Ctime
		if after == before {
			t.Fatal("the sampled check does not see the rewrite")
		}
	})
}

// indexFileBytes rewrites path in place with n bytes from seed.
func indexFileBytes(t *testing.T, path string, n int, seed byte) {
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt(pattern(n, seed), 0); err != nil {
		t.Fatal(err)
	}
}

// The directory keeps at most maxFiles indexes: the least recently
// written go.
func TestHashIndexBounded(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	old := time.Now().Add(-time.Hour)
	for i := range maxFiles + 10 {
		p := filepath.Join(dir, filepath.Base(data)+string(rune('a'+i%26))+strconv.Itoa(i)+ext)
		os.WriteFile(p, []byte("x"), 0o644)
		at := old.Add(time.Duration(i) * time.Second)
		os.Chtimes(p, at, at)
	}
	saved(t, dir, indexFile(t, data, "m", 1<<16, 1))
	ents, _ := os.ReadDir(dir)
	if len(ents) > maxFiles {
		t.Fatalf("%d indexes kept, at most %d", len(ents), maxFiles)
	}
}

// Loads of one file at once (each its own index, as two processes) save
// their entries: the index stays whole, and the last to save keeps what
// the others saved before it.
func TestHashIndexConcurrentSaves(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	f := indexFile(t, data, "m", 1<<20, 1)
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fh := Open(dir, f, f)
			for k := range 100 {
				fh.Put(Key{int64(i*1000 + k), 4096}, uint64(i*1000+k))
			}
			if err := fh.Save(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	fh := reopen(t, dir, f)
	if len(fh.known) < 100 || len(fh.known)%100 != 0 {
		t.Fatalf("%d entries after %d saves of 100", len(fh.known), n)
	}
	for k, v := range fh.known {
		if uint64(k.Off) != v {
			t.Fatalf("entry %v holds %d", k, v)
		}
	}
	// one more load, after all of them, keeps every entry it saw
	last := reopen(t, dir, f)
	last.Put(Key{1 << 30, 1}, 1<<30)
	if err := last.Save(); err != nil {
		t.Fatal(err)
	}
	if got := len(reopen(t, dir, f).known); got != len(fh.known)+1 {
		t.Fatalf("%d entries, want %d", got, len(fh.known)+1)
	}
}
