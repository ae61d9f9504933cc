package ggml_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
)

// ownRuntime opens a Runtime of the test's own, closed when it ends.
func ownRuntime(t *testing.T, o ggml.Options) *ggml.Runtime {
	t.Helper()
	testenv.Runtime(t) // the shared one sets the environment up
	rt, err := ggml.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// Every handle answers ErrClosed once freed, and a runtime's Close frees
// every handle made through it; nothing reads freed memory.
func TestHandlesAfterFree(t *testing.T) {
	rt := ownRuntime(t, ggml.Options{})
	cpu := rt.CPUDevice()

	t.Run("buffer", func(t *testing.T) {
		m := newMatmul(t, rt, rt.CPUBufferType())
		m.buf.Free()
		if _, err := m.w.Floats(); !errors.Is(err, ggml.ErrClosed) || !errors.Is(err, os.ErrClosed) {
			t.Errorf("read of a tensor whose buffer was freed: %v", err)
		}
		if err := m.w.SetFloats(m.wData); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("write: %v", err)
		}
		if m.buf.Size() != 0 || m.buf.Base() != nil || m.buf.Name() != "" || !m.buf.Freed() {
			t.Error("a freed buffer still answers with native values")
		}
		if err := m.buf.Clear(0); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("clear: %v", err)
		}
		// computing over the freed weight is refused, not run
		be, err := cpu.NewBackend()
		if err != nil {
			t.Fatal(err)
		}
		defer be.Free()
		s, err := rt.NewScheduler([]*ggml.Backend{be}, ggml.SchedulerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Free()
		if err := s.Compute(m.g); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("compute over a freed weight: %v", err)
		}
	})

	t.Run("context", func(t *testing.T) {
		m := newMatmul(t, rt, rt.CPUBufferType())
		m.ctx.Free()
		if _, err := m.w.Bytes(); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("read of a tensor whose context was freed: %v", err)
		}
		if m.w.Name() == "" && m.w.NBytes() != uint64(4*m.rows*m.cols) {
			t.Error("Go's copy of the metadata was lost")
		}
		if _, err := m.cx.MulMat(m.w, m.x); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("an op over a freed tensor: %v", err)
		}
		if _, err := m.ctx.NewTensor(ggml.TypeF32, 4); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("new tensor in a freed context: %v", err)
		}
		if m.ctx.Tensors() != nil {
			t.Error("a freed context lists tensors")
		}
	})

	t.Run("scheduler", func(t *testing.T) {
		m := newMatmul(t, rt, rt.CPUBufferType())
		be, err := cpu.NewBackend()
		if err != nil {
			t.Fatal(err)
		}
		defer be.Free()
		s, err := rt.NewScheduler([]*ggml.Backend{be}, ggml.SchedulerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Alloc(m.g); err != nil {
			t.Fatal(err)
		}
		if err := m.x.SetFloats(m.xData); err != nil {
			t.Fatal(err)
		}
		if err := s.Compute(m.g); err != nil {
			t.Fatal(err)
		}
		if _, err := m.y.Floats(); err != nil {
			t.Fatal(err)
		}
		s.Free()
		// the result lived in the scheduler's memory
		if _, err := m.y.Floats(); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("a result read after its scheduler was freed: %v", err)
		}
		if err := s.Compute(m.g); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("compute on a freed scheduler: %v", err)
		}
		be.Free()
		if err := be.Synchronize(); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("synchronize a freed backend: %v", err)
		}
		if be.Name() != "" {
			t.Error("a freed backend has a name")
		}
	})

	t.Run("runtime", func(t *testing.T) {
		rt := ownRuntime(t, ggml.Options{})
		before := testenv.LiveBuffers()
		m := newMatmul(t, rt, rt.CPUBufferType())
		be, err := rt.CPUDevice().NewBackend()
		if err != nil {
			t.Fatal(err)
		}
		rt.Close()
		if n := testenv.LiveBuffers(); n != before {
			t.Errorf("%d buffers live after Close, %d before", n, before)
		}
		if _, err := m.w.Floats(); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("read after the runtime's Close: %v", err)
		}
		if err := be.Synchronize(); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("backend after the runtime's Close: %v", err)
		}
		if _, err := rt.CPUDevice().NewBackend(); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("new backend: %v", err)
		}
		if _, err := rt.NewContext(ggml.ContextParams{Tensors: 1}); !errors.Is(err, ggml.ErrClosed) {
			t.Errorf("new context: %v", err)
		}
		if err := rt.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		// the process's native set stays: another runtime works
		other := ownRuntime(t, ggml.Options{})
		if _, err := other.NewContext(ggml.ContextParams{Tensors: 1}); err != nil {
			t.Errorf("a runtime opened after another's Close: %v", err)
		}
	})
}

// Reads racing the Free of their buffer or context (run with -race).
func TestReadsRaceFree(t *testing.T) {
	rt := ownRuntime(t, ggml.Options{})
	for _, what := range []string{"buffer", "context", "runtime"} {
		t.Run(what, func(t *testing.T) {
			for range 50 {
				r := rt
				if what == "runtime" {
					r = ownRuntime(t, ggml.Options{})
				}
				m := newMatmul(t, r, r.CPUBufferType())
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range 4 {
					wg.Go(func() {
						<-start
						for {
							v, err := m.w.Floats()
							if errors.Is(err, ggml.ErrClosed) {
								return
							}
							if err != nil || maxDiff(v, m.wData) != 0 {
								t.Errorf("read racing Free: %v", err)
								return
							}
						}
					})
				}
				close(start)
				switch what {
				case "buffer":
					m.buf.Free()
				case "context":
					m.ctx.Free()
				default:
					r.Close()
				}
				wg.Wait()
			}
		})
	}
}

// Repacked weights are refused with ErrWriteOnly.
func TestWriteOnlySentinel(t *testing.T) {
	rt := testenv.Runtime(t)
	extras := rt.CPUDevice().ExtraBufferTypes()
	if len(extras) == 0 {
		t.Skip("the CPU backend publishes no extra buffer type here (CPU_REPACK needs AVX2 or NEON)")
	}
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	w, err := ctx.NewTensor(ggml.TypeQ4_0, 256, 16)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := ctx.AllocTensors(extras[0])
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if err := w.Set(make([]byte, w.NBytes()), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Bytes(); !errors.Is(err, ggml.ErrWriteOnly) || !strings.Contains(err.Error(), w.Name()) {
		t.Errorf("read of a repacked tensor: %v", err)
	}
}

// The native log reaches the Logger of every open runtime, and only while
// it is open; a runtime without one is quiet below warnings.
func TestLoggerPerRuntime(t *testing.T) {
	var mine bytes.Buffer
	var mu sync.Mutex
	h := slog.NewTextHandler(&lockedWriter{&mu, &mine}, &slog.HandlerOptions{Level: slog.LevelDebug})
	rt := ownRuntime(t, ggml.Options{Logger: slog.New(h)})
	// a buffer no machine has: the CPU backend logs its failure
	if _, err := rt.CPUBufferType().Alloc(1 << 60); !errors.Is(err, ggml.ErrOutOfMemory) {
		t.Fatalf("a 1 EiB buffer: %v", err)
	}
	mu.Lock()
	got := mine.String()
	mine.Reset()
	mu.Unlock()
	if !strings.Contains(got, "src=ggml") || !strings.Contains(got, "level=ERROR") {
		t.Fatalf("the runtime's logger got %q", got)
	}
	rt.Close()
	other := ownRuntime(t, ggml.Options{})
	if _, err := other.CPUBufferType().Alloc(1 << 60); err == nil {
		t.Fatal("a 1 EiB buffer")
	}
	mu.Lock()
	defer mu.Unlock()
	if mine.Len() != 0 {
		t.Errorf("a closed runtime's logger still gets lines: %q", mine.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// BeforeFree's functions run once, just before the native free, whether
// the buffer's Free or its runtime's Close frees it, while its memory is
// still readable; once freed, BeforeFree is refused.
func TestBeforeFree(t *testing.T) {
	for _, by := range []string{"buffer", "runtime"} {
		t.Run(by, func(t *testing.T) {
			rt := ownRuntime(t, ggml.Options{})
			b, err := rt.CPUBufferType().Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Clear(7); err != nil {
				t.Fatal(err)
			}
			base := (*[4096]byte)(b.Base())
			var seen []byte
			for range 2 {
				if err := b.BeforeFree(func() { seen = append(seen, base[4095]) }); err != nil {
					t.Fatal(err)
				}
			}
			if by == "buffer" {
				b.Free()
			} else {
				rt.Close()
			}
			b.Free()
			if !bytes.Equal(seen, []byte{7, 7}) {
				t.Errorf("BeforeFree's functions saw %v, want [7 7]: each once, before the free", seen)
			}
			if err := b.BeforeFree(func() {}); !errors.Is(err, ggml.ErrClosed) {
				t.Errorf("BeforeFree on a freed buffer: %v", err)
			}
		})
	}
}
