package loader_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// A loaded model's buffers count their own tensors: in JSON they add up
// to what the plan's buffers hold (the file's tensors, less unused ones,
// plus second placements with a tensor of their own), and the text report
// marks ggload's lines apart from llama.cpp's.
func TestLoadedBuffersAddUp(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	for _, devs := range [][]string{{"none"}, {"Vulkan0"}} {
		t.Run(devs[0], func(t *testing.T) {
			if devs[0] == "Vulkan0" {
				testenv.Vulkan(t)
			}
			gm := testenv.OpenModel(t, path)
			// on the CPU, repacking splits the mapping into many buffers
			p := planFor(t, rt, gm, func(p *place.Params) {
				p.DeviceNames = devs
				p.LoadMode = place.LoadMmap
				p.NGPULayers = place.NLayers(4)
				p.NoExtraBufts = !(devs[0] == "none" && len(rt.CPUDevice().ExtraBufferTypes()) > 0)
			})
			lm, err := loader.Load(context.Background(), p, loader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			b, err := json.Marshal(lm)
			if err != nil {
				t.Fatal(err)
			}
			var j struct {
				Buffers []struct {
					Tensors int    `json:"tensors"`
					Bytes   uint64 `json:"tensor_bytes"`
				} `json:"buffers"`
			}
			if err := json.Unmarshal(b, &j); err != nil {
				t.Fatal(err)
			}
			n, nb := 0, uint64(0)
			for _, b := range j.Buffers {
				if b.Tensors == 0 {
					t.Errorf("a buffer without tensors: %+v", j.Buffers)
				}
				n += b.Tensors
				nb += b.Bytes
			}
			tot := p.Totals()
			if n != tot.BufferTensors || nb != tot.BufferBytes || n != tot.FileTensors-tot.UnusedTensors+tot.DuplicateTensors || len(j.Buffers) < 2 && (devs[0] != "none" || !p.Params.NoExtraBufts) {
				t.Fatalf("%d buffers hold %d tensors, %d bytes; the plan's totals %+v", len(j.Buffers), n, nb, tot)
			}
			var out bytes.Buffer
			lm.Report(&out, loader.ReportOptions{})
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if !strings.HasPrefix(line, "print_info: ") && !strings.HasPrefix(line, "load_tensors: ") && !strings.HasPrefix(line, "ggload: ") {
					t.Errorf("unlabelled line %q", line)
				}
			}
		})
	}
}
