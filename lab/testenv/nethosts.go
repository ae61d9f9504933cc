package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ggload/ggload/bindings"
)

// NetHost is one RPC host of a NetHosts topology: a network namespace with
// its own ggml-rpc-server, reached over a veth pair.
type NetHost struct {
	Name     string
	Endpoint string
	PID      int
	Cache    string // the server's file cache (NetOptions.Cache), "" without
	log      string
}

// Log is what the host's server printed so far.
func (h NetHost) Log() string {
	b, _ := os.ReadFile(h.log)
	return string(b)
}

// Kill stops the host's server with SIGKILL.
func (h NetHost) Kill() { signalPID(h.PID, syscall.SIGKILL) }

// Stop freezes the host's server (SIGSTOP): connected, silent.
func (h NetHost) Stop() { signalPID(h.PID, sigStop) }

// NetOptions shape a topology.
type NetOptions struct {
	Rate  string // tc rate limit per link, both ways ("1gbit"); "" none
	Cache bool   // servers keep a file cache (ggml-rpc-server -c)
}

var netSeq atomic.Int32

// NetHosts makes n separate RPC hosts with scripts/rpc-hosts.sh and removes
// them when the test ends. It needs root and iproute2: elsewhere the test
// skips (fails where GGLOAD_REQUIRE names netns).
func NetHosts(t testing.TB, n int, o NetOptions) []NetHost {
	t.Helper()
	RPCBackend(t)
	if _, err := bindings.FindRPCServer(); err != nil {
		Missing(t, "rpc", "%v", err)
	}
	if os.Geteuid() != 0 {
		Missing(t, "netns", "network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		Missing(t, "netns", "ip not found (apt-get install iproute2)")
	}
	if o.Rate != "" {
		if _, err := exec.LookPath("tc"); err != nil {
			Missing(t, "netns", "tc not found (apt-get install iproute2)")
		}
	}
	script := filepath.Join(RepoRoot(), "scripts", "rpc-hosts.sh")
	seq := netSeq.Add(1)
	prefix := fmt.Sprintf("ggt%d%c", os.Getpid()%10000, 'a'+rune(seq%26))
	subnet := freeSubnet(100 + (os.Getpid()*7+int(seq))%100)
	args := []string{"up", strconv.Itoa(n), "--prefix", prefix, "--subnet", subnet}
	if o.Rate != "" {
		args = append(args, "--rate", o.Rate)
	}
	cacheDir := ""
	if o.Cache {
		cacheDir = t.TempDir()
		args = append(args, "--cache", cacheDir)
	}
	down := func() {
		if out, err := exec.Command(script, "down", "--prefix", prefix).CombinedOutput(); err != nil {
			t.Logf("rpc-hosts.sh down: %v\n%s", err, out)
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(script, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		down()
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "Operation not permitted") || strings.Contains(msg, "need root") {
			Missing(t, "netns", "cannot make network namespaces here: %s", msg)
		}
		t.Fatalf("rpc-hosts.sh %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	t.Cleanup(down)
	var hosts []NetHost
	for _, line := range Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("rpc-hosts.sh printed %q", line)
		}
		pid, _ := strconv.Atoi(f[2])
		h := NetHost{Name: f[0], Endpoint: f[1], PID: pid, log: filepath.Join("/run/ggload-rpc-hosts", prefix, f[0]+".log")}
		if cacheDir != "" {
			h.Cache = filepath.Join(cacheDir, fmt.Sprintf("host%d", len(hosts)+1))
		}
		hosts = append(hosts, h)
	}
	if len(hosts) != n {
		t.Fatalf("rpc-hosts.sh made %d hosts, want %d", len(hosts), n)
	}
	return hosts
}

// freeSubnet is the first 10.X (X from first, wrapping within 100–199)
// that no interface of this namespace has an address in: hosts a killed
// test left behind would otherwise take the new hosts' traffic.
func freeSubnet(first int) string {
	subnetsMu.Lock()
	defer subnetsMu.Unlock()
	out, _ := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	for k := range 100 {
		s := fmt.Sprintf("10.%d", 100+(first-100+k)%100)
		if !strings.Contains(string(out), " "+s+".") && !subnetsUsed[s] {
			subnetsUsed[s] = true
			return s
		}
	}
	return fmt.Sprintf("10.%d", first)
}

// subnetsUsed are the subnets this process's hosts had: never given again,
// since an endpoint registered with ggml stays registered (with the options
// it had) after its host is gone.
var (
	subnetsMu   sync.Mutex
	subnetsUsed = map[string]bool{}
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
