package place_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// A plan onto an RPC server, and -fit, make one connection to it (ggml's
// RPC client otherwise connects anew for each of their calls), and a plan
// and a load under KeepConnected make one between them. In a child
// process, since its server stays registered there.
func TestPlanConnectsOnce(t *testing.T) {
	if !testenv.IsChild() {
		testenv.Runtime(t)
		testenv.RPCBackend(t)
		testenv.InChild(t, nil)
		return
	}
	rt := testenv.Runtime(t)
	s := testenv.StartRPCServer(t)
	devs, err := rt.AddRPCServer(t.Context(), s.Endpoint, ggml.RPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := writeModel(t, rt, small)
	params := place.Params{DeviceNames: []string{devs[0].Name()}}
	n := s.Accepted()
	step := func(what string, want int) {
		t.Helper()
		got := s.Accepted()
		if got-n != want {
			t.Errorf("%s made %d connections to the server, want %d", what, got-n, want)
		}
		n = got
	}
	p, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Context.ComputeKnown || p.Context.Compute == nil {
		t.Fatalf("no compute planned on %s: %s", devs[0].Name(), p.Context.ComputeWhy)
	}
	step("a plan", 1)
	if _, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{}); err != nil {
		t.Fatal(err)
	}
	step("-fit", 1)
	// no device, but the layers on a server's buffer type by -ot: the
	// plan asks the server little, and connects once (nothing is held)
	ot := place.Params{DeviceNames: []string{"none"}, Overrides: []place.Override{{Pattern: `blk\.`, BufferType: devs[0].BufferType().Name()}}}
	if p, err = place.New(context.Background(), rt, m, ot); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(p.Tensors, func(tp place.TensorPlan) bool { return tp.BufferType == devs[0].BufferType() }) {
		t.Fatalf("-ot put no tensor in %s", devs[0].BufferType().Name())
	}
	step("a plan with -ot naming the server's buffer type", 1)
	release := place.KeepConnected(rt, params)
	if p, err = place.New(context.Background(), rt, m, params); err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(t.Context(), p, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	step("a plan and a load held together", 1)
	lm.Close()
	release()
	release()
	// nothing held: a device's memory, read twice, connects twice
	devs[0].Memory()
	devs[0].Memory()
	step("two reads after the release", 2)
}
