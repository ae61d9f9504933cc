package loader_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// openOwn opens a Runtime of the test's own, closed when it ends.
func openOwn(t *testing.T) *ggml.Runtime {
	t.Helper()
	testenv.Runtime(t) // the shared one sets the environment up
	rt, err := ggml.Open(context.Background(), ggml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func loadTiny(t *testing.T, rt *ggml.Runtime, mode place.LoadMode) (*gguf.Model, *loader.Model) {
	t.Helper()
	gm := testenv.OpenModel(t, "testdata/tiny-llama.gguf")
	p, err := place.New(context.Background(), rt, gm, place.Params{LoadMode: mode, DeviceNames: []string{"none"}, NoExtraBufts: true})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	return gm, lm
}

// After Close, of the model or of the runtime, every handle answers
// ErrClosed and nothing reads freed memory: in host buffers (none), in
// the mapping (mmap), and on the device of every other buffer type.
func TestUseAfterClose(t *testing.T) {
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		for _, by := range []string{"model", "runtime"} {
			t.Run(mode.String()+"/"+by, func(t *testing.T) {
				rt := openOwn(t)
				buffers := testenv.LiveBuffers()
				_, lm := loadTiny(t, rt, mode)
				emb, _ := lm.Tensor("token_embd.weight")
				q, _ := lm.Tensor("blk.0.attn_q.weight")
				if _, err := q.Bytes(); err != nil {
					t.Fatal(err)
				}
				if by == "model" {
					lm.Close()
				} else {
					rt.Close()
					if n := testenv.LiveBuffers(); n != buffers {
						t.Errorf("%d buffers live after the runtime's Close, %d before the load", n, buffers)
					}
				}
				for _, tn := range []*ggml.Tensor{emb, q} {
					if b, err := tn.Bytes(); !errors.Is(err, ggml.ErrClosed) || b != nil {
						t.Errorf("%s.Bytes after Close: %d bytes, %v", tn.Name(), len(b), err)
					}
					if err := tn.Set([]byte{1}, 0); !errors.Is(err, ggml.ErrClosed) {
						t.Errorf("%s.Set after Close: %v", tn.Name(), err)
					}
					if tn.WithData(func(unsafe.Pointer) error { return nil }) == nil || tn.Allocated() || tn.Buffer() != nil {
						t.Errorf("%s still shows memory after Close", tn.Name())
					}
					// what Go keeps stays readable
					if tn.NBytes() == 0 || tn.Name() == "" {
						t.Errorf("%s lost its shape or name", tn.Name())
					}
				}
				if _, ok := lm.Tensor("token_embd.weight"); ok && by == "model" {
					t.Error("a closed model still hands out tensors")
				}
				if _, err := lm.Verify(); by == "model" && (!errors.Is(err, loader.ErrClosed) || err.(*loader.Error).Op != "verify") {
					t.Errorf("Verify after Close: %v", err)
				}
				if err := lm.CheckFile(); by == "model" && (!errors.Is(err, loader.ErrClosed) || err.(*loader.Error).Op != "check file") {
					t.Errorf("CheckFile after Close: %v", err)
				}
				if err := lm.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
				if by == "runtime" {
					if _, err := rt.NewContext(ggml.ContextParams{Tensors: 1}); !errors.Is(err, ggml.ErrClosed) {
						t.Errorf("NewContext on a closed runtime: %v", err)
					}
					if _, err := rt.CPUBufferType().Alloc(64); !errors.Is(err, ggml.ErrClosed) {
						t.Errorf("Alloc on a closed runtime: %v", err)
					}
					gm := testenv.OpenModel(t, "testdata/tiny-llama.gguf")
					// planning asks devices (supports_op) through the runtime
					if _, err := place.New(context.Background(), rt, gm, place.Params{}); !errors.Is(err, ggml.ErrClosed) {
						t.Errorf("place.New on a closed runtime: %v", err)
					}
				}
			})
		}
	}
}

// A load on a closed runtime is refused, and a runtime closed while
// loads run ends them with ErrClosed or lets them finish; either way
// nothing is left allocated.
func TestLoadAndRuntimeClose(t *testing.T) {
	rt := openOwn(t)
	gm := testenv.OpenModel(t, "testdata/tiny-llama.gguf")
	p, err := place.New(context.Background(), rt, gm, place.Params{DeviceNames: []string{"none"}, LoadMode: place.LoadNone})
	if err != nil {
		t.Fatal(err)
	}
	buffers := testenv.LiveBuffers()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			lm, err := loader.Load(context.Background(), p, loader.Options{})
			if err == nil {
				lm.Close()
			}
			errs <- err
		})
	}
	rt.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("load under Close: %v", err)
		}
	}
	if n := testenv.LiveBuffers(); n != buffers {
		t.Errorf("%d buffers live, %d before", n, buffers)
	}
	if _, err := loader.Load(context.Background(), p, loader.Options{}); !errors.Is(err, ggml.ErrClosed) {
		t.Errorf("load on a closed runtime: %v", err)
	} else {
		wantPlace(t, "load on a closed runtime", err, loader.Error{Op: "load", Path: "testdata/tiny-llama.gguf", Off: -1}, ggml.ErrClosed)
	}
}

// Reads racing Close (run with -race): every read returns the weights or
// ErrClosed, and none touches freed memory.
func TestReadsRaceClose(t *testing.T) {
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		for _, by := range []string{"model", "runtime"} {
			t.Run(mode.String()+"/"+by, func(t *testing.T) {
				for range 50 {
					rt := openOwn(t)
					_, lm := loadTiny(t, rt, mode)
					names := []string{"token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight", "output_norm.weight"}
					want := map[string][]byte{}
					var ts []*ggml.Tensor
					for _, n := range names {
						tn, ok := lm.Tensor(n)
						if !ok {
							t.Fatalf("no %s", n)
						}
						b, err := tn.Bytes()
						if err != nil {
							t.Fatal(err)
						}
						want[n], ts = b, append(ts, tn)
					}
					var wg sync.WaitGroup
					start := make(chan struct{})
					for _, tn := range ts {
						for range 2 {
							wg.Go(func() {
								<-start
								for i := 0; ; i++ {
									b, err := tn.Bytes()
									if errors.Is(err, ggml.ErrClosed) {
										return
									}
									if err != nil || !bytes.Equal(b, want[tn.Name()]) {
										t.Errorf("%s read %d: %v", tn.Name(), i, err)
										return
									}
								}
							})
						}
					}
					for range 2 {
						wg.Go(func() {
							<-start
							for {
								_, err := lm.Verify()
								if errors.Is(err, loader.ErrClosed) {
									return
								}
								if err != nil {
									t.Errorf("Verify racing Close: %v", err)
									return
								}
							}
						})
					}
					close(start)
					if by == "model" {
						lm.Close()
					} else {
						rt.Close()
					}
					wg.Wait()
				}
			})
		}
	}
}

// A Runtime.Close that begins during a load (it waits for the load, then
// frees every buffer) ends the load with ErrClosed: never a Model whose
// tensors are already freed.
func TestLoadDuringRuntimeClose(t *testing.T) {
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		t.Run(mode.String(), func(t *testing.T) {
			for round := range 10 {
				rt := openOwn(t)
				gm := testenv.OpenModel(t, "testdata/tiny-llama.gguf")
				p, err := place.New(context.Background(), rt, gm, place.Params{LoadMode: mode, DeviceNames: []string{"none"}})
				if err != nil {
					t.Fatal(err)
				}
				buffers := testenv.LiveBuffers()
				closing := make(chan struct{})
				var once sync.Once
				restore := loader.SetBeforeTensor(func(seq int, name string) {
					if seq != round {
						return
					}
					once.Do(func() {
						go func() { rt.Close(); close(closing) }()
						for !rt.Closed() {
							runtime.Gosched()
						}
					})
				})
				lm, err := loader.Load(context.Background(), p, loader.Options{})
				restore()
				if err == nil {
					lm.Close()
					t.Fatalf("round %d: the load succeeded though the runtime was closed during it", round)
				}
				if !errors.Is(err, ggml.ErrClosed) {
					t.Fatalf("round %d: %v, want ErrClosed", round, err)
				}
				if e, ok := err.(*loader.Error); !ok || e.Path != "testdata/tiny-llama.gguf" {
					t.Fatalf("round %d: the place %+v: %v", round, e, err)
				}
				<-closing
				if n := testenv.LiveBuffers(); n != buffers {
					t.Fatalf("round %d: %d buffers live, %d before", round, n, buffers)
				}
			}
		})
	}
}

// A plan whose model was closed is refused before the load makes
// anything, with an error that wraps gguf.ErrClosed (and so
// os.ErrClosed) and names the file.
func TestLoadRefusesClosedModel(t *testing.T) {
	rt := openOwn(t)
	path := "testdata/tiny-llama.gguf"
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		gm := testenv.OpenModel(t, path)
		p, err := place.New(context.Background(), rt, gm, place.Params{LoadMode: mode, DeviceNames: []string{"none"}, NoExtraBufts: true})
		if err != nil {
			t.Fatal(err)
		}
		gm.Close()
		buffers := testenv.LiveBuffers()
		called := false
		lm, err := loader.Load(context.Background(), p, loader.Options{Progress: func(done, total uint64) bool { called = true; return true }})
		if err == nil {
			lm.Close()
			t.Fatalf("%s: a closed model loaded", mode)
		}
		if !errors.Is(err, gguf.ErrClosed) || !errors.Is(err, os.ErrClosed) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: want gguf.ErrClosed naming %s: %v", mode, path, err)
		}
		wantPlace(t, mode.String(), err, loader.Error{Op: "open", Path: path, Off: -1})
		if called || testenv.LiveBuffers() != buffers {
			t.Fatalf("%s: the refused load reported progress (%v) or left buffers (%d, %d before)", mode, called, testenv.LiveBuffers(), buffers)
		}
	}
}

// Close of a nil loaded model or runtime does nothing, as a second Close
// does: a deferred Close before its error is checked cannot panic.
func TestNilClose(t *testing.T) {
	var lm *loader.Model
	if err := lm.Close(); err != nil {
		t.Errorf("nil Model: %v", err)
	}
	var rt *ggml.Runtime
	if err := rt.Close(); err != nil {
		t.Errorf("nil Runtime: %v", err)
	}
}
