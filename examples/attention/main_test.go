package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}

// The example on Vulkan0 (lavapipe) and an RPC server: every device's
// projections agree with the CPU's.
func TestAttentionOnEveryDevice(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	rpc := testenv.RPC(t, 1)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	devs, err := rt.AddRPCServer(context.Background(), rpc[0], ggml.RPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	targets := []string{devs[0].Name()}
	want := map[string]string{devs[0].Name(): devs[0].Name() + "[" + rpc[0] + "]"}
	for _, d := range testenv.GPUs(t) { // Vulkan0, and CUDA0 on GPU runners
		targets = append(targets, d.Name())
		want[d.Name()] = d.Name()
	}
	var out bytes.Buffer
	if err := run([]string{"-devices", strings.Join(targets, ","), "-tokens", "0,5,4095"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	ran := map[string][]string{}
	for _, line := range testenv.Lines(out.String()) {
		f := strings.Fields(line)
		ran[f[0]] = f
	}
	for dev, backend := range want {
		f := ran[dev]
		if len(f) != 6 || f[1] != backend || f[5] != "ok" {
			t.Errorf("%s: line %q, want it computed on %s and ok", dev, f, backend)
		}
	}
	t.Log("\n" + out.String())
}

// The comparison can fail: other tokens on the device than on the CPU, and
// a token outside the vocabulary, are both caught.
func TestAttentionDetectsDifferences(t *testing.T) {
	rt := testenv.Runtime(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, err := project(rt, m, "none", []int32{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := project(rt, m, "none", []int32{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := compare(a, a, 0); !ok {
		t.Fatal("a result differs from itself")
	}
	if d, ok := compare(a, b, 0.02); ok {
		t.Fatalf("different tokens compared equal: %v", d)
	}
	if _, err := project(rt, m, "none", []int32{4096}); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Fatalf("token 4096: %v", err)
	}
	if err := run([]string{"-tokens", "1,x"}, &bytes.Buffer{}); err == nil {
		t.Fatal("bad -tokens accepted")
	}
}
