package httpsrc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/lab/testenv"
)

// paths counts the requests of each path a server gets.
type paths struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *paths) add(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[path]++
}

func (p *paths) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.n {
		out = append(out, k)
	}
	return out
}

// A split model's name is checked against its first part's split.count
// before any other part is asked for: a first part that says it is not
// split is opened alone (as llama.cpp loads it, with a warning), and a
// count that differs is refused, naming both.
func TestSplitNameAgainstSplitCount(t *testing.T) {
	rt := testenv.Runtime(t)
	single := testenv.ModelFile(t, rt, spec)
	split := spec
	split.Splits = 3
	first := testenv.ModelFile(t, rt, split)
	for _, c := range []struct {
		name, file string
		path       string // what the model is served as
		want       string // the error, or "" for a model of one file
	}{
		{"not split", single, "/m-00001-of-00040.gguf", ""},
		{"split 3 ways, named 5", first, "/m-00001-of-00005.gguf", "its name says the model is split 5 ways (-of-00005), but its split.count says 3"},
		{"split 3 ways, not named so", first, "/m.gguf", "its split.count says the model is split 3 ways, but its name is not <prefix>-00001-of-00003.gguf"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			data, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			var asked paths
			fs := &fileServer{data: data, etag: `"v1"`, fault: func(_ int64, w http.ResponseWriter, r *http.Request) bool {
				asked.add(r.URL.Path)
				if r.URL.Path != c.path {
					w.WriteHeader(http.StatusNotFound)
					return true
				}
				return false
			}}
			srv, open := served(t, fs, false)
			var log bytes.Buffer
			o := httpsrc.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}
			gm, err := httpsrc.OpenModel(context.Background(), srv.URL+c.path, o)
			if got := asked.asked(); len(got) != 1 {
				t.Errorf("the server was asked for %v", got)
			}
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(gm.Files) != 1 || !strings.Contains(log.String(), "is named part 1 of 40, but its split.count says it is not split") {
					t.Fatalf("%d files; the log: %s", len(gm.Files), log.String())
				}
				gm.Close()
			} else if !errors.Is(err, gguf.ErrSplit) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), srv.URL) {
				t.Fatalf("want an error naming the URL and saying %q: %v", c.want, err)
			} else {
				t.Log(err)
			}
			if n := settle(open.Load, 0); n != 0 {
				t.Fatalf("%d connections left open", n)
			}
		})
	}
}

// The other parts are opened a few at a time, and the first failure
// cancels those under way and starts no more: a model split 40 ways whose
// second part is missing costs four requests for its parts, not 39, and
// leaves no connection or goroutine behind.
func TestSplitPartsOpenBounded(t *testing.T) {
	w := gguf.NewWriter()
	for i := range 40 {
		if err := w.AddTensorBytes(fmt.Sprintf("t%02d", i), ggml.TypeF32, []int64{4}, make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
	}
	files, err := w.WriteSplits(filepath.Join(t.TempDir(), "m"), 40)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	goroutines := runtime.NumGoroutine()
	var now, most, parts atomic.Int64
	crowd := make(chan struct{}) // closed once four parts are asked for at once
	var once sync.Once
	fs := &fileServer{data: data, etag: `"v1"`, fault: func(_ int64, w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "-00001-of-00040.gguf") {
			return false
		}
		parts.Add(1)
		k := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); k > m && !most.CompareAndSwap(m, k); m = most.Load() {
		}
		if k >= 4 {
			once.Do(func() { close(crowd) })
		}
		if strings.HasSuffix(r.URL.Path, "-00002-of-00040.gguf") {
			select { // missing, once the others are under way
			case <-crowd:
			case <-time.After(5 * time.Second):
			}
			w.WriteHeader(http.StatusNotFound)
			return true
		}
		select { // the others hang until their request is cancelled
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return true
	}}
	srv, open := served(t, fs, false)
	_, err = httpsrc.OpenModel(context.Background(), srv.URL+"/m-00001-of-00040.gguf", httpsrc.Options{})
	if err == nil || !strings.Contains(err.Error(), "/m-00002-of-00040.gguf") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("want an error naming split 2 and its 404: %v", err)
	}
	t.Log(err)
	if n := settle(open.Load, 0); n != 0 {
		t.Fatalf("%d connections left open", n)
	}
	if m, n := most.Load(), parts.Load(); m != 4 || n != 4 {
		t.Fatalf("%d parts asked for, at most %d at once; want 4 and 4", n, m)
	}
	srv.Close()
	if n := settle(func() int64 { return int64(runtime.NumGoroutine()) }, int64(goroutines)); n > int64(goroutines) {
		t.Fatalf("%d goroutines, %d before", n, goroutines)
	}
}
