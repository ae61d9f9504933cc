//go:build !windows

package loader_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// A file cut in the middle of a tensor's data just before the load reads
// it: the error wraps ErrFileChanged and gives the file's real size and the
// tensor's byte range, in every mode (buffered reads, direct I/O, copies
// out of the mapping, zero-copy tensors). After a good load, a cut under a
// zero-copy tensor makes Verify report a fault of the mapped file.
func TestTruncationMessages(t *testing.T) {
	rt := testenv.Runtime(t)
	pristine, err := os.ReadFile(testenv.ModelFile(t, rt, smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	type target struct {
		mode    place.LoadMode
		devices []string
	}
	targets := []target{{place.LoadNone, []string{"none"}}, {place.LoadDirectIO, []string{"none"}}, {place.LoadMmap, []string{"none"}}}
	if _, err := rt.DeviceByName("Vulkan0"); err == nil {
		targets = append(targets, target{place.LoadMmap, []string{"Vulkan0"}}, target{place.LoadNone, []string{"Vulkan0"}}, target{place.LoadDirectIO, []string{"Vulkan0"}})
	}
	named := regexp.MustCompile(`tensor '([^']+)'`)
	for _, tg := range targets {
		what := fmt.Sprintf("%s on %v", tg.mode, tg.devices)
		if err := os.WriteFile(path, pristine, 0o644); err != nil {
			t.Fatal(err)
		}
		gm := testenv.OpenModel(t, path)
		p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = tg.mode; p.DeviceNames = tg.devices })
		// the largest tensor, cut in its middle
		var big *gguf.Weight
		for i := range gm.Weights {
			if w := &gm.Weights[i]; big == nil || w.Size > big.Size {
				big = w
			}
		}
		cut := big.Offset + big.Size/2
		restore := loader.SetBeforeTensor(func(seq int, name string) {
			if name == big.Name {
				if err := os.Truncate(path, cut); err != nil {
					t.Error(err)
				}
			}
		})
		lm, err := loader.Load(context.Background(), p, loader.Options{Readers: 1})
		restore()
		if err == nil {
			lm.Close()
			t.Fatalf("%s: the load succeeded", what)
		}
		msg := err.Error()
		if !errors.Is(err, loader.ErrFileChanged) || !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprintf("%d bytes", cut)) {
			t.Fatalf("%s: want the file changed, its name and its size now (%d bytes): %v", what, cut, err)
		}
		m := named.FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("%s: no tensor named: %v", what, err)
		}
		w, ok := gm.Weight(m[1])
		if !ok || !strings.Contains(msg, fmt.Sprintf("[%d, %d)", w.Offset, w.Offset+w.Size)) || w.Offset+w.Size <= cut {
			t.Fatalf("%s: want tensor '%s' with its byte range [%d, %d) past the cut: %v", what, m[1], w.Offset, w.Offset+w.Size, err)
		}
		wantPlace(t, what, err, loader.Error{Op: "load", Path: path, Tensor: m[1], Off: w.Offset}, loader.ErrTruncated)
		t.Logf("%s: %v", what, err)
		gm.Close()
	}

	// Verify of zero-copy tensors whose file shrank after the load
	if err := os.WriteFile(path, pristine, 0o644); err != nil {
		t.Fatal(err)
	}
	gm := testenv.OpenModel(t, path)
	defer gm.Close()
	p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = place.LoadMmap; p.DeviceNames = []string{"none"} })
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	_, err = lm.Verify()
	if err == nil || !errors.Is(err, loader.ErrFileChanged) || !strings.Contains(err.Error(), "mapping faulted") ||
		!strings.Contains(err.Error(), "is 4096 bytes now") || !strings.Contains(err.Error(), "after the load") || strings.Contains(err.Error(), "nil pointer") {
		t.Fatalf("verify after a truncation: %v", err)
	}
	var ve *loader.Error
	if !errors.As(err, &ve) || ve.Op != "verify" || ve.Path != path || !errors.Is(err, loader.ErrTruncated) {
		t.Fatalf("verify after a truncation: %+v: %v", ve, err)
	}
	if w, ok := gm.Weight(ve.Tensor); !ok || ve.Off != w.Offset || !strings.Contains(err.Error(), ve.Tensor) {
		t.Fatalf("verify after a truncation names tensor %q at %d: %v", ve.Tensor, ve.Off, err)
	}
	t.Logf("verify: %v", err)
}

// Every file cut short answers gguf.ErrTruncated: one cut before the model
// is opened (gguf's), after it is planned (the load's open), during the
// load (the load's reads and checks), and after it (CheckFile), at each
// part of the file, in every load mode.
func TestTruncationIsGGUFTruncated(t *testing.T) {
	rt := testenv.Runtime(t)
	pristine, err := os.ReadFile(testenv.ModelFile(t, rt, smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(path, pristine, 0o644); err != nil {
		t.Fatal(err)
	}
	gm := testenv.OpenModel(t, path)
	first, last := gm.Weights[0], gm.Weights[0]
	for _, w := range gm.Weights {
		if w.Offset < first.Offset {
			first = w
		}
		if w.Offset > last.Offset {
			last = w
		}
	}
	gm.Close()
	dataStart := gm.Files[0].DataOffset
	cuts := []struct {
		name string
		at   int64
	}{
		{"empty", 0},
		{"in the header", 40},
		{"before the data", dataStart - 1},
		{"in the first tensor", first.Offset + first.Size/2},
		{"in the last tensor", last.Offset + last.Size/2},
		{"the last byte", last.Offset + last.Size - 1},
	}
	modes := []place.LoadMode{place.LoadNone, place.LoadMmap, place.LoadDirectIO}
	for _, c := range cuts {
		// before the model is opened
		if err := os.WriteFile(path, pristine[:c.at], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := gguf.OpenModel(path); !errors.Is(err, gguf.ErrTruncated) {
			t.Errorf("%s: OpenModel: %v", c.name, err)
		}
		// after it is planned
		for _, mode := range modes {
			if err := os.WriteFile(path, pristine, 0o644); err != nil {
				t.Fatal(err)
			}
			gm := testenv.OpenModel(t, path)
			p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"none"} })
			if err := os.Truncate(path, c.at); err != nil {
				t.Fatal(err)
			}
			lm, err := loader.Load(context.Background(), p, loader.Options{})
			if err == nil {
				lm.Close()
				t.Fatalf("%s, %s: the load succeeded", c.name, mode)
			}
			if !errors.Is(err, gguf.ErrTruncated) || !errors.Is(err, loader.ErrFileChanged) {
				t.Errorf("%s, %s: Load: %v", c.name, mode, err)
			}
			gm.Close()
		}
	}
	// during the load, at its last tensor, and after it
	for _, mode := range modes {
		if err := os.WriteFile(path, pristine, 0o644); err != nil {
			t.Fatal(err)
		}
		gm := testenv.OpenModel(t, path)
		p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"none"} })
		restore := loader.SetBeforeTensor(func(seq int, name string) {
			if name == last.Name {
				if err := os.Truncate(path, last.Offset+1); err != nil {
					t.Error(err)
				}
			}
		})
		_, err := loader.Load(context.Background(), p, loader.Options{Readers: 1})
		restore()
		if !errors.Is(err, gguf.ErrTruncated) {
			t.Errorf("cut during the load, %s: %v", mode, err)
		}
		if err := os.WriteFile(path, pristine, 0o644); err != nil {
			t.Fatal(err)
		}
		gm = testenv.OpenModel(t, path)
		p = planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"none"} })
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, int64(len(pristine))-1); err != nil {
			t.Fatal(err)
		}
		if err := lm.CheckFile(); !errors.Is(err, gguf.ErrTruncated) || !errors.Is(err, loader.ErrFileChanged) {
			t.Errorf("cut after the load, %s: CheckFile: %v", mode, err)
		}
		lm.Close()
	}
}
