package ggml_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
)

// A runtime opened with the CPU's module alone and RPC servers named also
// loads RPC's module: the server is a device, and no GPU's backend is
// registered.
func TestOpenCPUWithRPC(t *testing.T) {
	if ep := os.Getenv("GGLOAD_TEST_CPU_RPC_CHILD"); ep != "" {
		rt, err := ggml.Open(context.Background(), ggml.Options{Backends: []string{"cpu"}, RPC: []string{ep}, RPCTimeout: 5 * time.Second})
		if err != nil {
			os.Stdout.WriteString("OPEN " + err.Error() + "\n")
			os.Exit(1)
		}
		var names []string
		for _, b := range rt.Backends() {
			names = append(names, b.Name())
		}
		os.Stdout.WriteString("BACKENDS " + strings.Join(names, ",") + "\n")
		for _, d := range rt.Devices() {
			os.Stdout.WriteString("DEVICE " + d.Name() + "\n")
		}
		os.Exit(0)
	}
	testenv.Runtime(t)
	srv := testenv.StartRPCServer(t)
	defer srv.Kill()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenCPUWithRPC$")
	cmd.Env = append(os.Environ(), "GGLOAD_TEST_CPU_RPC_CHILD="+srv.Endpoint)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "BACKENDS RPC,CPU,RPC["+srv.Endpoint+"]\n") || !strings.Contains(s, "DEVICE RPC0\n") || !strings.Contains(s, "DEVICE CPU\n") {
		t.Errorf("want the RPC and CPU backends, the server registered, and its device:\n%s", s)
	}
}

// A process that puts weights on the CPU and RPC servers alone loads the
// CPU's and RPC's modules, unless its set holds a GPU's module but no
// RPC one; a set that cannot be found leaves the choice to Open.
func TestHostBackends(t *testing.T) {
	rt := testenv.Runtime(t)
	dir := rt.Location().Dir
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// copies of the set, by links: without RPC's module, and without it
	// and the GPUs' too
	noRPC, cpuOnly := t.TempDir(), t.TempDir()
	gpu := false
	for _, e := range entries {
		n := e.Name()
		if strings.Contains(n, "ggml-rpc") {
			continue
		}
		isGPU := strings.Contains(n, "vulkan") || strings.Contains(n, "cuda")
		gpu = gpu || isGPU && strings.HasPrefix(n, "libggml-")
		for _, d := range []string{noRPC, cpuOnly} {
			if d == cpuOnly && isGPU && strings.HasPrefix(n, "libggml-") {
				continue
			}
			if err := os.Symlink(filepath.Join(dir, n), filepath.Join(d, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := ggml.HostBackends(dir, ""); strings.Join(got, ",") != "cpu,rpc" {
		t.Errorf("the set at %s: %v, want cpu,rpc", dir, got)
	}
	if got := ggml.HostBackends(cpuOnly, ""); strings.Join(got, ",") != "cpu,rpc" {
		t.Errorf("a set of the CPU's modules alone: %v, want cpu,rpc", got)
	}
	if got := ggml.HostBackends(noRPC, ""); gpu && got != nil {
		t.Errorf("a set with a GPU's module and no RPC one: %v, want every module (nil)", got)
	}
	if got := ggml.HostBackends(filepath.Join(t.TempDir(), "none"), ""); got != nil {
		t.Errorf("no set: %v, want nil", got)
	}
	if n := ggml.MathThreads(); n < 1 || n > runtime.NumCPU() {
		t.Errorf("MathThreads %d of %d CPUs", n, runtime.NumCPU())
	}
}
