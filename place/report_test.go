package place_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// The buffers add up: each buffer counts the tensors it holds (not its
// context's), their bytes fit in it, and over all buffers the counts and
// bytes are the model's, less unused tensors, plus second placements that
// have a tensor of their own. In JSON as in Totals.
func TestBuffersAddUp(t *testing.T) {
	rt := testenv.Runtime(t)
	spec := synth.Spec{Layers: 6, Embd: 256, FF: 512, Heads: 2, Vocab: 256, Tied: true, RopeFreqs: true, Weights: ggml.TypeQ4_0}
	m := writeModel(t, rt, spec)
	var fileBytes uint64
	for _, w := range m.Weights {
		fileBytes += uint64(w.Size)
	}
	type tcase struct {
		name string
		set  func(*place.Params)
		gpu  bool
	}
	cases := []tcase{
		{"mmap-span/CPU", func(p *place.Params) { p.DeviceNames = []string{"none"}; p.LoadMode = place.LoadMmap }, false},
		{"mmap-own-ranges/CPU", func(p *place.Params) {
			p.DeviceNames = []string{"none"}
			p.LoadMode = place.LoadMmap
			p.MapRanges = place.MapOwnRanges
		}, false},
		{"none/CPU", func(p *place.Params) { p.DeviceNames = []string{"none"}; p.LoadMode = place.LoadNone }, false},
		{"mmap/Vulkan0", func(p *place.Params) {
			p.DeviceNames = []string{"Vulkan0"}
			p.LoadMode = place.LoadMmap
			p.NGPULayers = place.NLayers(4)
		}, true},
		{"none/Vulkan0", func(p *place.Params) { p.DeviceNames = []string{"Vulkan0"}; p.LoadMode = place.LoadNone }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.gpu {
				testenv.Vulkan(t)
			}
			params := place.Params{}
			c.set(&params)
			p, err := place.New(context.Background(), rt, m, params)
			if err != nil {
				t.Fatal(err)
			}
			tot := p.Totals()
			if tot.FileTensors != len(m.Weights) || tot.FileBytes != fileBytes {
				t.Fatalf("totals %+v, the file has %d tensors, %d bytes", tot, len(m.Weights), fileBytes)
			}
			if tot.BufferTensors != tot.FileTensors-tot.UnusedTensors+tot.DuplicateTensors ||
				tot.BufferBytes != tot.FileBytes-tot.UnusedBytes+tot.DuplicateBytes {
				t.Fatalf("buffers do not add up: %+v", tot)
			}
			if c.gpu && tot.DuplicateTensors == 0 { // the tied output, on Vulkan0
				t.Fatalf("duplicates %+v", tot)
			}
			if tot.SharedTensors == 0 { // rope_freqs, used by every layer
				t.Fatalf("shared %+v", tot)
			}
			buffers := 0
			for ci, cp := range p.Contexts {
				for bi, b := range cp.Buffers {
					buffers++
					n, nb := p.BufferTensors(ci, bi)
					if n == 0 || nb > b.Size {
						t.Errorf("%s buffer %d of context %d: %d tensors, %d bytes in %d", b.Name, bi, ci, n, nb, b.Size)
					}
				}
			}
			var out bytes.Buffer
			if err := json.NewEncoder(&out).Encode(p); err != nil {
				t.Fatal(err)
			}
			var j struct {
				Buffers []struct {
					Tensors int    `json:"tensors"`
					Bytes   uint64 `json:"tensor_bytes"`
				} `json:"buffers"`
				Totals place.Totals `json:"totals"`
			}
			if err := json.Unmarshal(out.Bytes(), &j); err != nil {
				t.Fatal(err)
			}
			n, nb := 0, uint64(0)
			for _, b := range j.Buffers {
				n += b.Tensors
				nb += b.Bytes
			}
			if len(j.Buffers) != buffers || n != tot.BufferTensors || nb != tot.BufferBytes || j.Totals != tot {
				t.Fatalf("JSON buffers sum to %d tensors, %d bytes over %d buffers; totals %+v", n, nb, len(j.Buffers), j.Totals)
			}
			if c.name == "mmap-own-ranges/CPU" && buffers < 2 {
				t.Fatalf("%d mapped buffers: the case needs several", buffers)
			}
		})
	}
}

// The report keeps llama.cpp's lines apart from ggload's own and says how
// the model is placed.
func TestReportLabelsItsLines(t *testing.T) {
	rt := testenv.Runtime(t)
	m := writeModel(t, rt, small)
	p, err := place.New(context.Background(), rt, m, place.Params{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Report(&out, place.ReportOptions{})
	s := out.String()
	llama, notes, ok := strings.Cut(s, "ggload's notes:")
	if !ok || !strings.Contains(s, "placement    exact: llama.cpp v0.5.0's own tensor creation for 'llama', replayed") {
		t.Fatalf("report:\n%s", s)
	}
	if strings.Contains(llama, "place: ") || !strings.Contains(notes, "place: architecture 'llama'") || !strings.Contains(llama, "model buffer size") {
		t.Fatalf("lines in the wrong section:\n%s", s)
	}
}
