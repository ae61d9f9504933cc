package ggml_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
)

// --numa's set-up reaches the CPU backend, which then counts the machine's
// nodes as the kernel lists them.
func TestInitNUMA(t *testing.T) {
	rt := testenv.Runtime(t)
	if rt.InitNUMA(ggml.NUMAStrategy(9)) {
		t.Fatal("an unknown strategy was accepted")
	}
	if !rt.InitNUMA(ggml.NUMADistribute) {
		t.Fatal("the CPU backend has no NUMA set-up")
	}
	nodes, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*")
	if _, err := os.Stat("/sys/devices/system/node"); err == nil {
		if got, want := rt.IsNUMA(), len(nodes) > 1; got != want {
			t.Fatalf("IsNUMA %v with %d nodes", got, len(nodes))
		}
	}
}
