//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/bench"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

// A process of its own that puts weights on the CPU and RPC servers alone
// (-dev none or RPC devices; the bench's CPU and RPC targets, and its idle
// process) loads the CPU's and RPC's backend modules, not the GPUs';
// llama.cpp's tools, and the bench's baseline process of the other
// targets, load every module.
func TestCPUOnlyProcessLoadsCPUAndRPC(t *testing.T) {
	rt := testenv.Runtime(t)
	all := moduleBackends(rt)
	if !slices.Contains(all, "RPC") || len(all) < 3 {
		t.Skipf("the set at %s registers %v: no GPU module to leave out beside RPC's", rt.Location().Dir, all)
	}
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 256, Tied: true})
	child := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command(os.Args[0], append(append([]string{loadChildCmd, "--impl", "ggload", "--mode", "none", "--target"}, args...), path)...).Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		var res bench.LoadResult
		if err := json.Unmarshal(out, &res); err != nil || res.Err != "" {
			t.Fatalf("%v: %v %s\n%s", args, err, res.Err, out)
		}
		return res.Backends
	}
	if got := child("none"); !slices.Equal(got, []string{"RPC", "CPU"}) {
		t.Errorf("onto the CPU the process registered %v, want RPC, CPU (every one: %v)", got, all)
	}
	if got := child("none", "--idle"); !slices.Equal(got, []string{"RPC", "CPU"}) {
		t.Errorf("the idle process onto the CPU registered %v, want RPC, CPU", got)
	}
	if got := child("none", "--idle", "--all-backends"); !slices.Equal(got, all) {
		t.Errorf("the baseline process of the other targets registered %v, want every backend: %v", got, all)
	}
	srv := testenv.StartRPCServer(t)
	defer srv.Kill()
	if got := child("RPC0", "--rpc", srv.Endpoint, "-ngl", "99"); !slices.Equal(got, []string{"RPC", "CPU", "RPC[" + srv.Endpoint + "]"}) {
		t.Errorf("onto an RPC server the process registered %v, want RPC, CPU and the server", got)
	}
	for _, d := range rt.Devices() {
		if d.Type() == ggml.DeviceGPU {
			if got := child(d.Name()); !slices.Equal(got, all) {
				t.Errorf("onto %s the process registered %v, want every backend: %v", d.Name(), got, all)
			}
			break
		}
	}
}
