package loader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// panickingReader reads a model from memory and panics at its read number
// at (counted from 1) once armed.
type panickingReader struct {
	r     *bytes.Reader
	armed atomic.Bool
	reads atomic.Int64
	at    int64
}

func (p *panickingReader) ReadAt(b []byte, off int64) (int, error) {
	if p.armed.Load() && p.reads.Add(1) == p.at {
		panic(fmt.Sprintf("boom at byte %d", off))
	}
	return p.r.ReadAt(b, off)
}

// A source whose ReadAt panics, and a progress callback that panics, end
// the load with an error that names the source or the callback and gives
// the panic's value, on whichever goroutine of the load the panic
// happened (a reader of the pool, a device's lane, the load's own): every
// buffer is freed and no goroutine is left behind. Verify says the same
// of a reader that panics after the load.
func TestPanicsOfTheCallersCodeAreErrors(t *testing.T) {
	rt := testenv.Runtime(t)
	data, err := os.ReadFile(testenv.ModelFile(t, rt, smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	type tcase struct {
		name     string
		at       int64 // the read that panics, 0: none
		progress int   // the progress report that panics, 0: none
		opts     loader.Options
		want     string
	}
	cases := []tcase{
		{name: "first read, 4 readers", at: 1, opts: loader.Options{Readers: 4, ChunkSize: 4096}, want: "the reader of panicky.gguf panicked: boom at byte"},
		{name: "later read, 4 readers", at: 20, opts: loader.Options{Readers: 4, ChunkSize: 4096}, want: "the reader of panicky.gguf panicked: boom at byte"},
		{name: "later read, 1 reader", at: 20, opts: loader.Options{Readers: 1, ChunkSize: 4096}, want: "the reader of panicky.gguf panicked: boom at byte"},
		{name: "later read, sequential", at: 20, opts: loader.Options{Readers: 1, Sequential: true, CheckTensors: true}, want: "the reader of panicky.gguf panicked: boom at byte"},
		{name: "progress, 4 readers", progress: 5, opts: loader.Options{Readers: 4, ChunkSize: 4096}, want: "the progress callback panicked: report 5"},
		{name: "progress, 1 reader", progress: 5, opts: loader.Options{Readers: 1, ChunkSize: 4096}, want: "the progress callback panicked: report 5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := &panickingReader{r: bytes.NewReader(data), at: c.at}
			gm, err := gguf.OpenModelSources(gguf.ReaderSource("panicky.gguf", src, int64(len(data))))
			if err != nil {
				t.Fatal(err)
			}
			defer gm.Close()
			p, err := place.New(context.Background(), rt, gm, place.Params{DeviceNames: []string{"none"}, NoExtraBufts: true})
			if err != nil {
				t.Fatal(err)
			}
			o := c.opts
			if c.progress > 0 {
				var calls atomic.Int64
				o.Progress = func(done, total uint64) bool {
					if n := calls.Add(1); n == int64(c.progress) {
						panic(fmt.Sprintf("report %d", n))
					}
					return true
				}
			}
			buffers, goroutines := testenv.LiveBuffers(), runtime.NumGoroutine()
			src.armed.Store(c.at > 0)
			lm, err := loader.Load(context.Background(), p, o)
			if err == nil {
				lm.Close()
				t.Fatalf("the load succeeded (%d reads)", src.reads.Load())
			}
			if !errors.Is(err, loader.ErrPanicked) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error wrapping ErrPanicked saying %q, got %v", c.want, err)
			}
			var le *loader.Error
			if !errors.As(err, &le) || le.Path != "panicky.gguf" {
				t.Fatalf("the error's place %+v does not name the source: %v", le, err)
			}
			if b := testenv.LiveBuffers(); b != buffers {
				t.Fatalf("%d buffers left after the failed load", b-buffers)
			}
			if g := settleGoroutines(goroutines); g > goroutines {
				t.Fatalf("%d goroutines left after the failed load", g-goroutines)
			}
			t.Log(err)
		})
	}
	t.Run("verify", func(t *testing.T) {
		src := &panickingReader{r: bytes.NewReader(data), at: 1}
		gm, err := gguf.OpenModelSources(gguf.ReaderSource("panicky.gguf", src, int64(len(data))))
		if err != nil {
			t.Fatal(err)
		}
		defer gm.Close()
		p, err := place.New(context.Background(), rt, gm, place.Params{DeviceNames: []string{"none"}, NoExtraBufts: true})
		if err != nil {
			t.Fatal(err)
		}
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer lm.Close()
		src.armed.Store(true)
		_, err = lm.Verify()
		if !errors.Is(err, loader.ErrPanicked) || !strings.Contains(err.Error(), "the reader of panicky.gguf panicked: boom at byte") {
			t.Fatalf("want an error wrapping ErrPanicked naming the source, got %v", err)
		}
	})
}
