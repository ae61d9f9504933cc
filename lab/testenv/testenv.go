// Package testenv gives tests the real native runtime and real helper
// processes (ggml-rpc-server), and decides what happens when a component is
// missing: a skip that says what to install, or, for the components named in
// GGLOAD_REQUIRE (comma list of cpu, vulkan, rpc, llama, cuda), a failure.
// CI sets GGLOAD_REQUIRE so that nothing skips there.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/native"
)

var (
	rtOnce sync.Once
	rt     *ggml.Runtime
	rtErr  error
)

// Required reports whether GGLOAD_REQUIRE names the component.
func Required(component string) bool {
	for _, c := range strings.Split(os.Getenv("GGLOAD_REQUIRE"), ",") {
		if strings.TrimSpace(c) == component {
			return true
		}
	}
	return false
}

// Missing skips the test, or fails it when the component is required.
func Missing(t testing.TB, component, msg string, args ...any) {
	t.Helper()
	m := fmt.Sprintf(msg, args...)
	if Required(component) {
		t.Fatalf("%s is required (GGLOAD_REQUIRE) but missing: %s", component, m)
	}
	t.Skipf("%s missing: %s", component, m)
}

// Runtime opens the native runtime once per test binary. Lavapipe and other
// CPU-side Vulkan drivers are made visible (GGML_VK_VISIBLE_DEVICES=0 unless
// set), so that the Vulkan backend has a real device on machines without a
// GPU.
func Runtime(t testing.TB) *ggml.Runtime {
	t.Helper()
	rtOnce.Do(func() {
		if _, ok := os.LookupEnv("GGML_VK_VISIBLE_DEVICES"); !ok {
			_ = bindings.Setenv("GGML_VK_VISIBLE_DEVICES", "0")
		}
		rt, rtErr = ggml.Open(context.Background(), ggml.Options{})
	})
	if rtErr != nil {
		Missing(t, "cpu", "%v", rtErr)
	}
	return rt
}

// Device returns the first device whose registry is backend ("Vulkan",
// "CUDA"), or skips/fails with what to install.
func Device(t testing.TB, backend, install string) *ggml.Device {
	t.Helper()
	r := Runtime(t)
	for _, d := range r.Devices() {
		if d.Registry().Name() == backend {
			return d
		}
	}
	Missing(t, strings.ToLower(backend), "no %s device in %s (%s)", backend, r.Location().Dir, install)
	return nil
}

// VulkanInstall says how to get a Vulkan device on Debian.
const VulkanInstall = "apt-get install libvulkan1 mesa-vulkan-drivers; scripts/fetch-native.sh linux-x64-vulkan"

// Vulkan returns the Vulkan0 device (lavapipe on machines without a GPU).
func Vulkan(t testing.TB) *ggml.Device { return Device(t, "Vulkan", VulkanInstall) }

// CUDAInstall says how to get a CUDA device.
const CUDAInstall = "an NVIDIA GPU with its driver and the CUDA 13 runtime; scripts/fetch-native.sh linux-x64-cuda; GGLOAD_VARIANT=cuda"

// CUDA returns the first CUDA device.
func CUDA(t testing.TB) *ggml.Device { return Device(t, "CUDA", CUDAInstall) }

// GPUs returns the local GPU devices (Vulkan, CUDA, Metal; not RPC). A
// backend named in GGLOAD_REQUIRE must be among them, or the test fails.
func GPUs(t testing.TB) []*ggml.Device {
	t.Helper()
	r := Runtime(t)
	var out []*ggml.Device
	have := map[string]bool{}
	for _, d := range r.Devices() {
		if (d.Type() == ggml.DeviceGPU || d.Type() == ggml.DeviceIGPU) && !d.IsRPC() {
			out = append(out, d)
			have[strings.ToLower(d.Registry().Name())] = true
		}
	}
	for _, b := range []string{"vulkan", "cuda", "metal"} {
		if Required(b) && !have[b] {
			t.Fatalf("%s is required (GGLOAD_REQUIRE) but this runtime (%s) has no %s device", b, r.Location().Dir, b)
		}
	}
	return out
}

// RPCServer is a ggml-rpc-server child process on loopback.
type RPCServer struct {
	Endpoint string
	Cmd      *exec.Cmd
	out      *syncBuffer
}

// Output is what the server printed so far.
func (s *RPCServer) Output() string { return s.out.String() }

// Kill stops the server.
func (s *RPCServer) Kill() {
	if s.Cmd.Process != nil {
		_ = s.Cmd.Process.Kill()
		_, _ = s.Cmd.Process.Wait()
	}
}

var (
	rpcMu      sync.Mutex
	rpcShared  []*RPCServer
	rpcStarted []*RPCServer
)

// StartRPCServer starts a ggml-rpc-server on a free loopback port with the
// given extra arguments and waits until it answers the handshake. It is not
// registered with ggml. The caller stops it with Kill; KillAll at the end of
// TestMain stops any left.
func StartRPCServer(t testing.TB, args ...string) *RPCServer {
	t.Helper()
	return StartRPCServerWrapped(t, nil, args...)
}

// StartRPCServerWrapped is StartRPCServer with the server started through
// a wrapper command (prlimit, ip netns exec, ...): wrapper[0] is run with
// wrapper[1:] and then the server's command line.
func StartRPCServerWrapped(t testing.TB, wrapper []string, args ...string) *RPCServer {
	t.Helper()
	RPCBackend(t)
	bin, err := bindings.FindRPCServer()
	if err != nil {
		Missing(t, "rpc", "%v", err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ep := fmt.Sprintf("127.0.0.1:%d", port)
	argv := append(append(append([]string{}, wrapper...), bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	s := &RPCServer{Endpoint: ep, Cmd: cmd, out: out}
	rpcMu.Lock()
	rpcStarted = append(rpcStarted, s)
	rpcMu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := ggml.ProbeRPC(ctx, ep)
		cancel()
		if err == nil {
			return s
		} else if time.Now().After(deadline) {
			s.Kill()
			t.Fatalf("ggml-rpc-server on %s did not come up: %v\n%s", ep, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RPCBackend skips the test (fails it when rpc is required) unless the
// runtime's native set has the RPC backend: a server alone is not enough.
func RPCBackend(t testing.TB) {
	t.Helper()
	r := Runtime(t)
	for _, reg := range r.Backends() {
		if reg.Name() == "RPC" {
			return
		}
	}
	dir := r.Location().Dir
	Missing(t, "rpc", "the native set in %s has no RPC backend (scripts/build-native.sh linux-x64 cpu,rpc --into %s)", dir, filepath.Base(dir))
}

// RPC returns the endpoints of n ggml-rpc-servers registered with the
// runtime. They are shared by the whole test binary and live until it exits:
// ggml keeps registered devices for the life of the process, and plans made
// with every device would meet a dead one.
func RPC(t testing.TB, n int) []string {
	t.Helper()
	r := Runtime(t)
	rpcMu.Lock()
	have := len(rpcShared)
	rpcMu.Unlock()
	for i := have; i < n; i++ {
		s := StartRPCServer(t)
		if _, err := r.AddRPCServer(context.Background(), s.Endpoint, ggml.RPCOptions{}); err != nil {
			t.Fatalf("register %s: %v\n%s", s.Endpoint, err, s.Output())
		}
		rpcMu.Lock()
		rpcShared = append(rpcShared, s)
		rpcMu.Unlock()
	}
	rpcMu.Lock()
	defer rpcMu.Unlock()
	eps := make([]string, n)
	for i := range eps {
		eps[i] = rpcShared[i].Endpoint
	}
	return eps
}

// RPCServerOf is the shared server (RPC's) of an endpoint, nil for none:
// a test reads its process (its resident memory) through Cmd.
func RPCServerOf(endpoint string) *RPCServer {
	rpcMu.Lock()
	defer rpcMu.Unlock()
	for _, s := range rpcShared {
		if s.Endpoint == endpoint {
			return s
		}
	}
	return nil
}

// KillAll stops every server this binary started; call it from TestMain.
func KillAll() {
	rpcMu.Lock()
	defer rpcMu.Unlock()
	for _, s := range rpcStarted {
		s.Kill()
	}
}

// FreePort returns a TCP port that was free on loopback a moment ago, and
// that it never returned before in this process (an endpoint registered
// with ggml stays registered after its server is gone).
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			return port, nil
		}
	}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines splits s into its non-empty lines.
func Lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// SourceTree returns the pinned llama.cpp source tree (for its models/
// directory and reference files): GGLOAD_LLAMA_SRC, or the tree that
// scripts/build-native.sh and scripts/fetch-source.sh unpack into the cache.
func SourceTree(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("GGLOAD_LLAMA_SRC")
	if dir == "" {
		cache := os.Getenv("GGLOAD_CACHE")
		if cache == "" {
			base := os.Getenv("XDG_CACHE_HOME")
			if base == "" {
				home, _ := os.UserHomeDir()
				base = filepath.Join(home, ".cache")
			}
			cache = filepath.Join(base, "ggload")
		}
		dir = filepath.Join(cache, "src", "llama.cpp-"+native.Load().LlamaCppTag)
	}
	if _, err := os.Stat(filepath.Join(dir, "ggml", "src", "gguf.cpp")); err != nil {
		Missing(t, "source", "no pinned llama.cpp source tree at %s (run scripts/fetch-source.sh)", dir)
	}
	return dir
}

// Lib is the raw native table behind rt (the process's one), for
// harnesses that call what the checked API does not offer.
func Lib(rt *ggml.Runtime) *bindings.Lib {
	if rt == nil {
		return nil
	}
	return bindings.Current()
}

// TensorC is the native struct of t.
func TensorC(t *ggml.Tensor) *bindings.Tensor { return (*bindings.Tensor)(t.Native()) }

// LiveBuffers counts the buffers made through package ggml and not freed.
func LiveBuffers() int64 { return ggml.LiveBuffers() }

// DataAddr is a tensor's data address, for tests that compare addresses
// (zero copy); nil for a tensor with none or a freed one.
func DataAddr(t *ggml.Tensor) unsafe.Pointer {
	var p unsafe.Pointer
	_ = t.WithData(func(d unsafe.Pointer) error { p = d; return nil })
	return p
}
