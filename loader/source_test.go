package loader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// planText is the plan's report without its model and load mode lines
// (the sources' names differ, and so does the reason auto gives).
func planText(p *place.Plan) string {
	var b bytes.Buffer
	p.Report(&b, place.ReportOptions{})
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(l, "model ") && !strings.HasPrefix(l, "load mode ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + fmt.Sprintf("\nmode %s mmap %v lazy %s", p.LoadMode, p.UseMmap, p.Lazy)
}

// A GGUF inside a bigger file (after a prefix of any length: unaligned,
// page-aligned, past the Windows allocation granularity) loads in every
// mode, mmap's zero copy included, onto the CPU and Vulkan0, from its path
// with a window and from an open *os.File, with the plan of the file on
// its own, and reads back identical. The caller's descriptor stays theirs.
func TestModelInsideABiggerFile(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	model, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	alone := testenv.OpenModel(t, path)
	devices := [][]string{{"none"}}
	if _, err := rt.DeviceByName("Vulkan0"); err == nil {
		devices = append(devices, []string{"Vulkan0"})
	}
	dir := t.TempDir()
	for _, prefix := range []int{8192 + 96, 8192, 65536 + 64, 12345} {
		big := filepath.Join(dir, fmt.Sprintf("packed-%d.bin", prefix))
		data := append(append(bytes.Repeat([]byte{0xAB}, prefix), model...), bytes.Repeat([]byte{0xCD}, 999)...)
		if err := os.WriteFile(big, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(big)
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range []gguf.Source{
			{Path: big, Offset: int64(prefix), Size: int64(len(model))},
			gguf.FileSource(f, int64(prefix), int64(len(model))),
		} {
			gm, err := gguf.OpenModelSources(src)
			if err != nil {
				t.Fatalf("prefix %d: %v", prefix, err)
			}
			for _, devs := range devices {
				for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap, place.LoadMlock, place.LoadMmapMlock, place.LoadDirectIO, place.LoadAuto} {
					what := fmt.Sprintf("prefix %d, %s, %v %s", prefix, gm.Paths[0], devs, mode)
					if prefix%32 != 0 {
						// its tensors would lie unaligned in a mapping:
						// mapping is refused, auto reads
						params := place.Params{DeviceNames: devs, NoExtraBufts: true}
						params.LoadMode = mode
						p, err := place.New(context.Background(), rt, gm, params)
						switch {
						case mode.UsesMmap() && mode != place.LoadAuto:
							if err == nil || !strings.Contains(err.Error(), "not a multiple of 32") {
								t.Fatalf("%s: %v", what, err)
							}
							continue
						case err != nil:
							t.Fatalf("%s: %v", what, err)
						case mode == place.LoadAuto && p.UseMmap:
							t.Fatalf("%s: auto maps an unaligned GGUF", what)
						}
					}
					p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = devs })
					want := planFor(t, rt, alone, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = devs })
					if prefix%32 != 0 {
						// as if a device could not map: auto reads, lazy
						// tensors are off
						want = planFor(t, rt, alone, func(p *place.Params) {
							p.LoadMode, p.Lazy, p.DeviceNames = mode, place.LazyOff, devs
							if mode == place.LoadAuto {
								p.LoadMode = place.LoadNone
							}
						})
					}
					if got, exp := planText(p), planText(want); got != exp {
						t.Fatalf("%s: the plan differs from the file's own:\n%s\nwant:\n%s", what, got, exp)
					}
					lm, err := loader.Load(context.Background(), p, loader.Options{})
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					verify(t, gm, lm)
					if (mode == place.LoadMmap || mode == place.LoadAuto && prefix%32 == 0) && devs[0] == "none" && lm.Stats.Moved[loader.PathZeroCopy] == 0 {
						t.Fatalf("%s: no zero copy: %+v", what, lm.Stats.Moved)
					}
					if err := lm.CheckFile(); err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					lm.Close()
				}
			}
			gm.Close()
		}
		// the caller's descriptor still reads
		if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
			t.Fatalf("the caller's file was closed: %v", err)
		}
		f.Close()
	}
}

// Any io.ReaderAt: AUTO reads it (no mapping), as llama.cpp does when mmap
// is unavailable, and the load reads back identical; a mode that maps or
// reads directly is refused, naming the source and the reason.
func TestModelFromAReader(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	model, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gm, err := gguf.OpenModelSources(gguf.ReaderSource("memory", bytes.NewReader(model), int64(len(model))))
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	for _, devs := range [][]string{{"none"}, nil} {
		p, err := place.New(context.Background(), rt, gm, place.Params{DeviceNames: devs, NoExtraBufts: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.LoadMode != place.LoadNone || p.UseMmap {
			t.Fatalf("auto resolved to %s (mmap %v)", p.LoadMode, p.UseMmap)
		}
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		verify(t, gm, lm)
		if err := lm.CheckFile(); err != nil {
			t.Fatal(err)
		}
		lm.Close()
	}
	for _, mode := range []place.LoadMode{place.LoadMmap, place.LoadMmapMlock, place.LoadDirectIO} {
		params := place.Params{}
		params.LoadMode = mode
		_, err := place.New(context.Background(), rt, gm, params)
		if err == nil || !strings.Contains(err.Error(), "memory") || !strings.Contains(err.Error(), "needs a local file") {
			t.Fatalf("%s: %v", mode, err)
		}
	}
}

// Sources that cannot be read are refused before anything is read: an
// offset or window past the end, a negative offset, a descriptor open for
// writing only, a reader without a size, two kinds at once.
func TestBadSources(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.gguf")
	if err := os.WriteFile(path, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	wo, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer wo.Close()
	for _, c := range []struct {
		src  gguf.Source
		want string
	}{
		{gguf.Source{Path: path, Offset: 2000, Size: -1}, "offset 2000 lies past the end of the file (1000 bytes)"},
		{gguf.Source{Path: path, Offset: 500, Size: 600}, "the window [500, 1100) lies past the end"},
		{gguf.Source{Path: path, Offset: -1, Size: -1}, "negative offset"},
		{gguf.FileSource(wo, 0, -1), "open for writing only"},
		{gguf.ReaderSource("r", bytes.NewReader(nil), -1), "needs its size"},
		{gguf.Source{Path: path, Reader: bytes.NewReader(nil)}, "2 given"},
	} {
		_, err := gguf.OpenSource(c.src)
		if !errors.Is(err, gguf.ErrSource) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.src, err, c.want)
		}
	}
}
