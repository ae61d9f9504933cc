package loader_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// wantPlace checks that err is itself a *loader.Error with want's Op,
// Path, Tensor and Off (and Device and BufferType where want gives them)
// and that it wraps every one of sentinels.
func wantPlace(t *testing.T, what string, err error, want loader.Error, sentinels ...error) *loader.Error {
	t.Helper()
	e, ok := err.(*loader.Error)
	if !ok {
		t.Fatalf("%s: %v (%T) is no *loader.Error", what, err, err)
	}
	if e.Op != want.Op || e.Path != want.Path || e.Tensor != want.Tensor || e.Off != want.Off ||
		(want.Device != "" && e.Device != want.Device) || (want.BufferType != "" && e.BufferType != want.BufferType) {
		t.Fatalf("%s: the place is {Op:%q Path:%q Tensor:%q Device:%q BufferType:%q Off:%d}, want {Op:%q Path:%q Tensor:%q Device:%q BufferType:%q Off:%d}: %v", what,
			e.Op, e.Path, e.Tensor, e.Device, e.BufferType, e.Off, want.Op, want.Path, want.Tensor, want.Device, want.BufferType, want.Off, err)
	}
	for _, s := range sentinels {
		if !errors.Is(err, s) {
			t.Fatalf("%s: %v does not wrap %q", what, err, s)
		}
	}
	return e
}

// biggest is the model's largest tensor.
func biggest(gm *gguf.Model) *gguf.Weight {
	var big *gguf.Weight
	for i := range gm.Weights {
		if w := &gm.Weights[i]; big == nil || w.Size > big.Size {
			big = w
		}
	}
	return big
}

// Real failures of a load onto the CPU and of a loaded model's methods,
// in the modes that take different paths: each error is a *loader.Error
// whose place is the file, the tensor and the offset of its data (the
// device and buffer type where a tensor has them), wrapping its sentinel.
func TestErrorsNameTheirPlace(t *testing.T) {
	rt := testenv.Runtime(t)
	pristine, err := os.ReadFile(testenv.ModelFile(t, rt, smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	// fresh opens a pristine copy dated an hour back (a write then always
	// changes its modification time) and plans it onto the CPU in mode.
	fresh := func(t *testing.T, mode place.LoadMode) (*gguf.Model, *place.Plan) {
		t.Helper()
		if err := os.WriteFile(path, pristine, 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
		gm := testenv.OpenModel(t, path)
		return gm, planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"none"} })
	}
	// strike loads p with f run before tensor k.
	strike := func(ctx context.Context, p *place.Plan, o loader.Options, k int, f func(name string)) (string, error) {
		var struck string
		defer loader.SetBeforeTensor(func(seq int, name string) {
			if seq == k {
				struck = name
				f(name)
			}
		})()
		lm, err := loader.Load(ctx, p, o)
		if err == nil {
			lm.Close()
			t.Fatal("the load succeeded")
		}
		return struck, err
	}
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Run("truncated before the load", func(t *testing.T) {
				gm, p := fresh(t, mode)
				big := biggest(gm)
				if err := os.Truncate(path, big.Offset+big.Size/2); err != nil {
					t.Fatal(err)
				}
				_, err := loader.Load(context.Background(), p, loader.Options{})
				// the first tensor of the file's list that lies past its end
				var first *gguf.Weight
				for i := range gm.Weights {
					if w := &gm.Weights[i]; first == nil && w.Offset+w.Size > big.Offset+big.Size/2 {
						first = w
					}
				}
				wantPlace(t, "truncated", err, loader.Error{Op: "open", Path: path, Tensor: first.Name, Off: first.Offset}, loader.ErrTruncated, loader.ErrFileChanged)
			})
			t.Run("truncated during the load", func(t *testing.T) {
				gm, p := fresh(t, mode)
				big := biggest(gm)
				// cut in the middle of the biggest tensor: the read that
				// meets the cut, or the check of the file that sees it first,
				// names that tensor
				_, err := strike(context.Background(), p, loader.Options{Readers: 1}, 0, func(string) {
					if err := os.Truncate(path, big.Offset+big.Size/2); err != nil {
						t.Error(err)
					}
				})
				wantPlace(t, "truncated", err, loader.Error{Op: "load", Path: path, Tensor: big.Name, Off: big.Offset, Device: "CPU"}, loader.ErrTruncated, loader.ErrFileChanged)
			})
			t.Run("rewritten during the load", func(t *testing.T) {
				gm, p := fresh(t, mode)
				big := biggest(gm)
				_, err := strike(context.Background(), p, loader.Options{}, 1, func(string) {
					f, err := os.OpenFile(path, os.O_WRONLY, 0)
					if err == nil {
						_, err = f.WriteAt(pristine[big.Offset:big.Offset+64], big.Offset)
						f.Close()
					}
					if err != nil {
						t.Error(err)
					}
				})
				wantPlace(t, "rewritten", err, loader.Error{Op: "load", Path: path, Off: -1}, loader.ErrFileChanged)
				if errors.Is(err, loader.ErrTruncated) {
					t.Fatalf("a file of the same size is reported truncated: %v", err)
				}
			})
			t.Run("canceled", func(t *testing.T) {
				gm, p := fresh(t, mode)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				struck, err := strike(ctx, p, loader.Options{Readers: 1}, 2, func(string) { cancel() })
				w, _ := gm.Weight(struck)
				wantPlace(t, "canceled", err, loader.Error{Op: "load", Path: path, Tensor: struck, Off: w.Offset, Device: "CPU"}, loader.ErrCanceled, context.Canceled)
			})
			t.Run("invalid data", func(t *testing.T) {
				const bad = "blk.2.ffn_down.weight"
				nan := plantNaN(t, testenv.ModelFile(t, rt, smallSpec), bad)
				gm := testenv.OpenModel(t, nan)
				p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"none"} })
				_, err := loader.Load(context.Background(), p, loader.Options{CheckTensors: true})
				w, _ := gm.Weight(bad)
				wantPlace(t, "invalid", err, loader.Error{Op: "validate", Path: nan, Tensor: bad, Off: w.Offset, Device: "CPU"}, loader.ErrInvalidData)
			})
			t.Run("model methods", func(t *testing.T) {
				gm, p := fresh(t, mode)
				lm, err := loader.Load(context.Background(), p, loader.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer lm.Close()
				// a tensor copied into its buffer, changed there
				const name = "blk.3.ffn_down.weight"
				w, _ := gm.Weight(name)
				if mode == place.LoadNone {
					x, _ := lm.Tensor(name)
					if err := x.Set(bytes.Repeat([]byte{0xff}, 2), 100); err != nil {
						t.Fatal(err)
					}
					_, err := lm.Verify()
					wantPlace(t, "verify", err, loader.Error{Op: "verify", Path: path, Tensor: name, Off: w.Offset, Device: "CPU", BufferType: "CPU"}, loader.ErrMismatch)
				}
				now := time.Now()
				if err := os.Chtimes(path, now, now); err != nil {
					t.Fatal(err)
				}
				wantPlace(t, "check file", lm.CheckFile(), loader.Error{Op: "check file", Path: path, Off: -1}, loader.ErrFileChanged)
				lm.Close()
				_, err = lm.Verify()
				wantPlace(t, "verify after close", err, loader.Error{Op: "verify", Off: -1}, loader.ErrClosed, ggml.ErrClosed)
				wantPlace(t, "check file after close", lm.CheckFile(), loader.Error{Op: "check file", Off: -1}, loader.ErrClosed)
			})
		})
	}
	_, err = loader.Load(context.Background(), nil, loader.Options{})
	wantPlace(t, "no plan", err, loader.Error{Op: "load", Off: -1})
}
