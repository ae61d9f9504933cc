//go:build linux

package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// The lines of a -dev none process, which loads the CPU's and RPC's
// modules alone, are those of a process that loaded every module, as
// llama.cpp's does: among them the offload counts llama.cpp prints
// whenever an RPC or GPU backend is registered.
func TestCPUOnlyProcessPrintsAsEveryModule(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 256, Tied: true})
	times := regexp.MustCompile(`[0-9.]+ ?(ns|µs|ms|s)\b|[0-9.]+ [GM]B/s`)
	for _, cmd := range [][]string{{"plan", "-dev", "none"}, {"load", "-dev", "none", "-lm", "none"}} {
		args := append(slices.Clone(cmd), path)
		own, err := ggloadProcess(nil, args...).Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, own)
		}
		in, err := runCLI(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(in, "offloaded 3/3 layers to GPU") {
			t.Errorf("%v: no offload counts where every module is loaded:\n%s", args, in)
		}
		if a, b := times.ReplaceAllString(string(own), "T"), times.ReplaceAllString(in, "T"); a != b {
			t.Errorf("%v: the process's lines differ from those with every module:\n%s\n---\n%s", args, a, b)
		}
	}
}

// Which modules a command needs.
func TestCommandBackends(t *testing.T) {
	testenv.Runtime(t)
	for _, c := range []struct {
		name string
		set  func(f *placeFlags)
		cpu  bool
	}{
		{"default devices", func(f *placeFlags) {}, false},
		{"-dev Vulkan0", func(f *placeFlags) { f.devices = []string{"Vulkan0"} }, false},
		{"-dev none", func(f *placeFlags) { f.devices = []string{"none"} }, true},
		{"-dev none -ot x=CPU", func(f *placeFlags) {
			f.devices = []string{"none"}
			f.overrides = []place.Override{{Pattern: "x", BufferType: "CPU"}}
		}, true},
		{"-dev none -ot x=Vulkan0", func(f *placeFlags) {
			f.devices = []string{"none"}
			f.overrides = []place.Override{{Pattern: "x", BufferType: "Vulkan0"}}
		}, false},
		{"-dev none -md d -devd Vulkan0", func(f *placeFlags) {
			f.devices, f.draft.model, f.draft.devices = []string{"none"}, "d.gguf", []string{"Vulkan0"}
		}, false},
		{"-dev none -md d -devd none", func(f *placeFlags) {
			f.devices, f.draft.model, f.draft.devices = []string{"none"}, "d.gguf", []string{"none"}
		}, true},
		{"-dev RPC0,RPC1", func(f *placeFlags) { f.devices = []string{"RPC0", "RPC1"} }, true},
		{"-dev RPC0,Vulkan0", func(f *placeFlags) { f.devices = []string{"RPC0", "Vulkan0"} }, false},
		{"-dev none -ot x=RPC0[h:1]", func(f *placeFlags) {
			f.devices = []string{"none"}
			f.overrides = []place.Override{{Pattern: "x", BufferType: "RPC0[h:1]"}}
		}, true},
		{"-dev RPC0 -md d -devd Vulkan0", func(f *placeFlags) {
			f.devices, f.draft.model, f.draft.devices = []string{"RPC0"}, "d.gguf", []string{"Vulkan0"}
		}, false},
		{"-dev none -md d -otd x=Vulkan0", func(f *placeFlags) {
			f.devices, f.draft.model = []string{"none"}, "d.gguf"
			f.draft.overrides = []place.Override{{Pattern: "x", BufferType: "Vulkan0"}}
		}, false},
	} {
		f := defaultPlaceFlags()
		c.set(&f)
		got := f.backends()
		if want := c.cpu && f.runtimeFlags.cpuBackends() != nil; (got != nil) != want || got != nil && !slices.Equal(got, []string{"cpu", "rpc"}) {
			t.Errorf("%s: modules %v, want the CPU's and RPC's alone: %v", c.name, got, want)
		}
	}
}
