package ggml_test

import (
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
)

// ggml's RPC client connects to a server anew for every call made while
// nothing of that server is alive; KeepConnected makes such calls share
// one connection until it is released, and does nothing for other
// devices.
func TestKeepConnected(t *testing.T) {
	rt := testenv.Runtime(t)
	s := testenv.StartRPCServer(t)
	devs, err := rt.AddRPCServer(t.Context(), s.Endpoint, ggml.RPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := devs[0]
	calls := func() {
		for range 3 {
			if free, _ := d.Memory(); free == 0 {
				t.Fatalf("%s: no free memory reported", d.Name())
			}
		}
	}
	n0 := s.Accepted()
	calls()
	n1 := s.Accepted()
	if n1-n0 != 3 {
		t.Fatalf("without a held connection, 3 calls made %d connections, want 3 (one each)", n1-n0)
	}
	release, err := d.KeepConnected()
	if err != nil {
		t.Fatal(err)
	}
	calls()
	release()
	release() // again: nothing
	n2 := s.Accepted()
	if n2-n1 != 1 {
		t.Fatalf("held, 3 calls made %d connections, want 1", n2-n1)
	}
	calls()
	if n3 := s.Accepted(); n3-n2 != 3 {
		t.Fatalf("released, 3 calls made %d connections, want 3", n3-n2)
	}
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
	cpuRelease, err := rt.CPUDevice().KeepConnected()
	if err != nil {
		t.Fatalf("the CPU: %v", err)
	}
	cpuRelease()
}
