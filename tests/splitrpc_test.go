package tests

import (
	"context"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// Split mode tensor over two RPC servers, unevenly: the guards send every
// sliced tensor themselves (ggml.Tensor.SetSplit), each slice placed where
// ggml's meta buffer put it, learnt from the clears it makes (one request
// per segment of a fused tensor, one per server for the others). Every
// architecture of the pin that places this way loads, and every tensor
// reads back from the servers equal to the file.
func TestArchitecturesSplitOverRPC(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	rt := testenv.Runtime(t)
	testenv.RPC(t, 2)
	var devs []string
	for _, d := range rt.Devices() {
		if d.IsRPC() && len(devs) < 2 {
			if !d.SendsRPC() {
				t.Fatalf("%s: tensor data goes through ggml's client", d.Name())
			}
			devs = append(devs, d.Name())
		}
	}
	loaded, refused := 0, 0
	for _, f := range archFiles(t, rt, 0) {
		if f.Types == synth.LoaderTypes || f.Err != nil {
			continue
		}
		m := testenv.OpenModel(t, f.Path)
		p, err := place.New(context.Background(), rt, m, place.Params{SplitMode: place.SplitTensor, DeviceNames: devs, TensorSplit: []float32{3, 1}})
		if err != nil {
			// which architectures place this way is TestArchitectures'
			// comparison with llama.cpp
			refused++
			continue
		}
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			t.Errorf("%s: %v", f.Name, err)
			continue
		}
		v, err := lm.Verify()
		if err != nil {
			t.Errorf("%s: %v", f.Name, err)
		} else if n := v.ByDevice[p.Devices[0].Name()]; n == 0 {
			t.Errorf("%s: no tensor of %s read back", f.Name, p.Devices[0].Name())
		}
		lm.Close()
		loaded++
	}
	t.Logf("%d architectures loaded over %v and read back, %d refused", loaded, devs, refused)
	if loaded < 90 {
		t.Errorf("%d architectures loaded, want the 90 and more that place this way", loaded)
	}
}
