package ggml_test

import (
	"context"
	"os"
	"os/exec"
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
