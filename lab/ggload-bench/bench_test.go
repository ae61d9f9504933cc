package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/bench"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) {
	// the bench re-executes its own binary for each measurement: here
	// that binary is the test binary
	if len(os.Args) > 1 && (os.Args[1] == loadChildCmd || os.Args[1] == decodeChildCmd) {
		ownProcess = true
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

// runCLI runs the bench in this process, as its command line args would.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), err
}

// modelFile writes the synthetic model spec into the test's directory.
func modelFile(t *testing.T, spec synth.Spec) string {
	t.Helper()
	return testenv.ModelFile(t, testenv.Runtime(t), spec)
}

// Options the bench cannot take are usage errors that name the option and
// its range.
func TestBenchOptionRanges(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "1 to 100"},
		{[]string{"--size", "3"}, "1MiB to 1TiB"},
		{[]string{"--size", "2TiB"}, "1MiB to 1TiB"},
		{[]string{"--readers", "-1"}, "0 to 256"},
		{[]string{"--threads", "2000"}, "1 to 1024"},
		{[]string{"--rpc-timeout", "1ns"}, "100ms to 24h"},
		{[]string{"--variant", "metal"}, "want vulkan, cuda, src or none"},
		{[]string{"--modes", "teleport"}, "teleport"},
		{[]string{"-sm", "none"}, "want layer, row or tensor"},
		{[]string{"a.gguf", "b.gguf"}, "at most one MODEL"},
	} {
		_, err := runCLI(t, c.args...)
		var ue *usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v: want a usage error saying %q", c.args, err, c.want)
		}
	}
	out, err := runCLI(t, "--help")
	if !errors.Is(err, errHelp) || !strings.HasPrefix(out, "usage: ggload-bench [MODEL] [options]") || !strings.Contains(out, "-ngl, --gpu-layers, --n-gpu-layers N") {
		t.Errorf("--help: %v\n%s", err, out)
	}
	for _, c := range []struct {
		v    string
		want int64
	}{{"16MiB", 16 << 20}, {"1.5GiB", 3 << 29}, {"2g", 2 << 30}, {"1048576", 1 << 20}, {"1TiB", 1 << 40}} {
		if n, err := sizeIn(c.v, minBenchSize, maxBenchSize); err != nil || n != c.want {
			t.Errorf("size %s: %d, %v; want %d", c.v, n, err, c.want)
		}
	}
	for _, bad := range []string{"", "MiB", "12XB", "-1GiB", "NaNGiB"} {
		if n, err := sizeIn(bad, minBenchSize, maxBenchSize); err == nil {
			t.Errorf("size %q read as %d", bad, n)
		}
	}
}

// The bench of two modes onto the CPU, against llama.cpp: every row has
// its figures and its verdicts, and the text names no source file.
func TestBenchCommand(t *testing.T) {
	rt := testenv.Runtime(t)
	if rt.Location().Llama == "" {
		testenv.Missing(t, "llama", "no libllama in %s (scripts/fetch-native.sh linux-x64)", rt.Location().Dir)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out, err := runCLI(t, "--size", "8MiB", "--runs", "1", "--modes", "none,mmap", "--targets", "none", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Rows) != 2 || rep.MemcpyGBps <= 0 || rep.BaselineRSS == 0 || rep.Bytes < 8<<20 {
		t.Fatalf("%+v", rep)
	}
	for _, r := range rep.Rows {
		if r.Ggload.Err != "" || r.Ggload.WallS <= 0 || r.Ggload.PeakRSS == 0 {
			t.Fatalf("ggload %+v", r)
		}
		if r.Llama == nil || r.Llama.Err != "" || r.Ratio <= 0 {
			t.Fatalf("llama.cpp %+v", r.Llama)
		}
		// every case gets its verdicts, the memory limit's too
		if !strings.Contains(r.Goal, "llama.cpp's: median ") || !strings.Contains(r.Goal, "extra RSS ≤ the limit: ") {
			t.Errorf("%s→%s: verdict %q", r.Mode, r.Target, r.Goal)
		}
	}
	// and the text names no source file
	text, err := runCLI(t, "--size", "8MiB", "--runs", "1", "--modes", "dio", "--targets", "none")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`\b\w+\.go\b`).FindString(text); m != "" {
		t.Errorf("the report names a source file (%s):\n%s", m, text)
	}
	if !strings.Contains(text, "dio→none: time ≤ 0.90× llama.cpp's") {
		t.Errorf("no verdict for dio→none:\n%s", text)
	}
	for _, bad := range [][]string{
		{"--size", "big"},
		{"--modes", "teleport", "--size", "8MiB"},
		{"--targets", "Nowhere0", "--size", "8MiB"},
	} {
		if _, err := runCLI(t, bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// The hidden command a bench runs in its children: a command line it
// cannot take is a usage error (exit status 2) that names what is wrong,
// never a panic; a load that fails is the JSON's error, naming the model
// or the device.
func TestBenchChildErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "one MODEL expected, got 0"},
		{[]string{"--impl"}, "argument: -impl"},
		{[]string{"--impl", "other", "m.gguf"}, `"other" for flag -impl`},
		{[]string{"--mode"}, "argument: -mode"},
		{[]string{"--mode", "teleport", "m.gguf"}, "teleport"},
		{[]string{"--target", "", "m.gguf"}, "-target"},
		{[]string{"--target", "RPC0++Vulkan0", "m.gguf"}, "devices joined by +"},
		{[]string{"--target", "none+Vulkan0", "m.gguf"}, "devices joined by +"},
		{[]string{"-ts", "1,x", "m.gguf"}, `"1,x" for flag -ts`},
		{[]string{"-ngl", "many", "m.gguf"}, `"many" for flag -ngl`},
		{[]string{"--readers", "999", "m.gguf"}, `"999" for flag -readers`},
		{[]string{"--no-such-option", "m.gguf"}, "not defined: -no-such-option"},
		{[]string{"a.gguf", "b.gguf"}, "one MODEL expected, got 2"},
	} {
		args := append([]string{loadChildCmd}, c.args...)
		var out, errb bytes.Buffer
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%q panicked: %v", args, r)
				}
			}()
			err = run(context.Background(), args, &out, &errb)
		}()
		var ue *usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v: want a usage error naming %q", args, err, c.want)
			continue
		}
		if code := exitCode(err, &bytes.Buffer{}); code != 2 {
			t.Errorf("%q: exit status %d, want 2", args, code)
		}
		if out.Len() != 0 {
			t.Errorf("%q printed %q on stdout, where the parent reads JSON", args, out.String())
		}
	}
	path := modelFile(t, synth.Spec{Layers: 1, Embd: 64, FF: 128, Heads: 2, Vocab: 64})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"/nonexistent/model.gguf"}, "/nonexistent/model.gguf"},
		{[]string{"--target", "Nowhere0", path}, "Nowhere0"},
	} {
		args := append([]string{loadChildCmd}, c.args...)
		out, err := runCLI(t, args...)
		if err != nil {
			t.Errorf("%q: %v: want the error in the JSON", args, err)
			continue
		}
		var res bench.LoadResult
		if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || !strings.Contains(res.Err, c.want) {
			t.Errorf("%q: %q (%v): want an error naming %q", args, out, jerr, c.want)
		}
	}
}

// A bench over two devices at once (an RPC server and Vulkan0): every
// figure comes with its range, the floor and the fraction of it; each
// device's pipeline is reported at once and alone, and the goal compares
// the load with the slower device alone.
func TestBenchSeveralDevices(t *testing.T) {
	testenv.Vulkan(t)
	// the binary's shared server: a registered device lives as long as
	// the process, and children register it first, as RPC0
	ep := testenv.RPC(t, 1)[0]
	if d, err := testenv.Runtime(t).DeviceByName("RPC0"); err != nil || d.Endpoint() != ep {
		t.Fatalf("the shared server %s is not RPC0 here (%v)", ep, err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out, err := runCLI(t, "--size", "16MiB", "--runs", "2", "--modes", "none", "--targets", "RPC0+Vulkan0", "-ngl", "99", "-ts", "1,1", "--rpc", ep, "--no-llama", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Rows) != 1 || rep.Rates.ReadFresh <= 0 || rep.Rates.Upload["RPC0"] <= 0 || rep.Rates.Upload["Vulkan0"] <= 0 {
		t.Fatalf("%+v", rep)
	}
	// the floor takes the devices' rates as they upload at once
	if once := rep.Rates.UploadAtOnce["RPC0+Vulkan0"]; len(once) != 2 || once["RPC0"] <= 0 || once["Vulkan0"] <= 0 {
		t.Fatalf("rates at once %+v", rep.Rates.UploadAtOnce)
	}
	r := rep.Rows[0]
	g := r.Ggload
	if g.Err != "" || g.Runs != 2 || g.Load.Min > g.Load.Median || g.Load.Median > g.Load.Max || g.Load.Min <= 0 {
		t.Fatalf("ggload %+v", g)
	}
	if k := g.Kernel; runtime.GOOS == "linux" && (k == nil || k.Min < 0 || k.Min > k.Median || k.Median > k.Max || k.Max > g.Load.Max*float64(runtime.NumCPU())+0.05) {
		t.Fatalf("kernel time %+v of loads %+v", k, g.Load)
	}
	if r.Floor <= 0 || r.OfFloor <= 0 || r.Sequential == nil || r.Sequential.Err != "" {
		t.Fatalf("floor %v, of floor %v, sequential %+v", r.Floor, r.OfFloor, r.Sequential)
	}
	devs := map[string]bool{}
	for _, d := range r.Devices {
		devs[d.Device] = d.Bytes > 0 && d.S.Median > 0
	}
	solo := map[string]bool{}
	for _, d := range r.Solo {
		solo[d.Device] = d.S.Median > 0
	}
	for _, d := range []string{"RPC0", "Vulkan0"} {
		if !devs[d] || !solo[d] {
			t.Errorf("%s: at once %+v, alone %+v", d, r.Devices, r.Solo)
		}
	}
	if r.MemLimit == 0 || !strings.Contains(r.Goal, "the slowest device alone") {
		t.Errorf("limit %d, goal %q", r.MemLimit, r.Goal)
	}
	text, err := runCLI(t, "--size", "16MiB", "--runs", "1", "--modes", "none", "--targets", "RPC0+Vulkan0", "-ngl", "99", "-ts", "1,1", "--rpc", ep, "--no-llama")
	if err != nil {
		t.Fatal(err)
	}
	wants := []string{"RPC0: uploads", "RPC0+Vulkan0, uploading at once: RPC0 ", "per device (at once; alone", "×floor"}
	if runtime.GOOS == "linux" {
		wants = append(wants, "kernel time in the load calls", "none→RPC0+Vulkan0: ggload ")
	}
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
}

// -sm tensor reaches both loaders' children and the floor: the meta
// device's load is timed against the slowest of its devices' uploads, and
// the goals of whole layers per device are not claimed for it.
func TestBenchSplitTensor(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	testenv.Vulkan(t)
	ep := testenv.RPC(t, 1)[0]
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out, err := runCLI(t, "--size", "16MiB", "--runs", "1", "--modes", "none", "--targets", "RPC0+Vulkan0", "-sm", "tensor", "-ngl", "99", "-ts", "1,3", "--rpc", ep, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Rows) != 1 {
		t.Fatalf("%+v", rep)
	}
	r := rep.Rows[0]
	if r.Ggload.Err != "" || r.Llama == nil || r.Llama.Err != "" || r.Ratio <= 0 {
		t.Fatalf("ggload %+v, llama.cpp %+v", r.Ggload, r.Llama)
	}
	// held to llama.cpp's time, not to the goals of whole layers per
	// device, nor to a cached reload's (the server has no file cache)
	if r.Floor <= 0 || !strings.Contains(r.Goal, "time ≤ 0.90× llama.cpp's") || strings.Contains(r.Goal, "slowest device alone") || strings.Contains(r.Goal, "cached reload") || r.Ggload.RPCCached != 0 {
		t.Fatalf("floor %v, goal %q", r.Floor, r.Goal)
	}
	if _, err := runCLI(t, "-sm", "none", "m.gguf"); err == nil || !strings.Contains(err.Error(), "want layer, row or tensor") {
		t.Fatalf("-sm none: %v", err)
	}
}

// A bench onto an RPC server with its file cache, empty at first: the
// untimed load that goes first fills the cache, so that the one timed run
// is a reload; the bench says how much the cache set and holds the load
// calls to the cached reload's goal, 0.2× llama.cpp's. With
// --rpc-cache-dir emptying the cache before every process, nothing goes
// first and the cache sets nothing. It runs in a process of its own: there
// the server is the only one registered, so it is RPC0 for the bench as
// for its children.
func TestBenchCachedReload(t *testing.T) {
	if !testenv.IsChild() {
		for _, l := range strings.Split(testenv.InChild(t, nil), "\n") {
			if strings.Contains(l, "cached reload") {
				t.Log(strings.TrimSpace(l))
			}
		}
		return
	}
	rt := testenv.Runtime(t)
	if rt.Location().Llama == "" {
		testenv.Missing(t, "llama", "no libllama in %s (scripts/fetch-native.sh linux-x64)", rt.Location().Dir)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache) // the server's file cache
	srv := testenv.StartRPCServer(t, "-c")
	defer srv.Kill()
	// 2048 wide: the feed-forward matrices (12 MB) and the output (69 MB)
	// are over the client's hash threshold, and kept by the cache
	args := []string{"--size", "256MiB", "--runs", "1", "--modes", "mmap", "--targets", "RPC0", "--rpc", srv.Endpoint, "--json"}
	bench := func(extra ...string) bench.Report {
		out, err := runCLI(t, append(args, extra...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, srv.Output())
		}
		var rep bench.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(rep.Rows) != 1 || rep.Rows[0].Ggload.Err != "" {
			t.Fatalf("%+v", rep)
		}
		return rep
	}
	// the server's cache directory (LLAMA_CACHE/rpc) is made as it starts
	cold := bench("--rpc-cache-dir", filepath.Join(cache, "rpc"))
	if n := cold.Rows[0].Ggload.RPCCached; n != 0 || len(cold.WarmedRPC) != 0 || strings.Contains(cold.Rows[0].Goal, "cached reload") {
		t.Fatalf("--rpc-cache-dir: the cache set %d bytes; warmed %v; verdict %q", n, cold.WarmedRPC, cold.Rows[0].Goal)
	}
	rep := bench()
	if !slices.Equal(rep.WarmedRPC, []string{"RPC0"}) {
		t.Fatalf("warmed %v, want RPC0", rep.WarmedRPC)
	}
	// the floor counts the server's first touch of its new buffers,
	// which its cache does not save
	if f := rep.Rows[0]; rep.Rates.ServerTouch["RPC0"] <= 0 || f.TouchFloor <= 0 || f.Floor < f.TouchFloor {
		t.Fatalf("the server touches fresh pages at %v GB/s; floor %v s, of which touching %v s", rep.Rates.ServerTouch, f.Floor, f.TouchFloor)
	}
	r := rep.Rows[0]
	if r.Ggload.Err != "" || r.Llama == nil || r.Llama.Err != "" || r.LoadRatio <= 0 {
		t.Fatalf("ggload %+v, llama.cpp %+v", r.Ggload, r.Llama)
	}
	if n := r.Ggload.RPCCached; n < 12<<20 || n > uint64(rep.Bytes) {
		t.Fatalf("the cache set %d bytes of a %d-byte model on the second bench", n, rep.Bytes)
	}
	verdict := map[bool]string{true: "met", false: "missed"}[r.LoadRatio <= 0.2]
	want := fmt.Sprintf("cached reload (the servers' file caches set %.0f MiB): load ≤ 0.20× llama.cpp's: %s (%.2f×", float64(r.Ggload.RPCCached)/(1<<20), verdict, r.LoadRatio)
	if !strings.Contains(r.Goal, want) {
		t.Fatalf("verdict %q, want it to hold %q", r.Goal, want)
	}
	t.Logf("cached reload: %s", r.Goal)
}

// bench --http: the model over a loopback link of the rate given, planned
// from the URL and from the file, and streamed onto the target.
func TestBenchOverHTTP(t *testing.T) {
	path := modelFile(t, synth.Spec{Layers: 2, Embd: 512, FF: 1024, Heads: 4, Vocab: 512})
	out, err := runCLI(t, path, "--http", "64MiB/s", "--targets", "none", "--runs", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	h := rep.HTTP
	if h == nil || h.Rate != 64<<20 || h.LinkGBps <= 0 || h.PlanFileS <= 0 || h.PlanURLS <= 0 || h.Requests < 1 || h.HeaderB <= 0 {
		t.Fatalf("%s", out)
	}
	// the link is held to its rate: one GET gets at most a little more
	if h.LinkGBps > 1.2*h.Rate/1e9 {
		t.Errorf("the link gave %.3f GB/s over its rate of %.3f", h.LinkGBps, h.Rate/1e9)
	}
	if len(h.Loads) != 1 || h.Loads[0].Err != "" || h.Loads[0].GBps <= 0 || h.Loads[0].Target != "none" {
		t.Fatalf("loads %+v", h.Loads)
	}
	if _, err := runCLI(t, path, "--http", "fast"); err == nil {
		t.Error("--http fast accepted")
	}
}

// bench --cold evicts the model before every process and measures the
// cold floor; bench with several sizes adds the scale table.
func TestBenchColdAndScale(t *testing.T) {
	rt := testenv.Runtime(t)
	if rt.Location().Llama == "" {
		testenv.Missing(t, "llama", "no libllama in %s (scripts/fetch-native.sh linux-x64)", rt.Location().Dir)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out, err := runCLI(t, "--cold", "--size", "8MiB", "--runs", "1", "--targets", "none", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var modes []string
	for _, r := range rep.Rows {
		modes = append(modes, r.Mode)
		if r.Ggload.Err != "" || r.Llama == nil || r.Llama.Err != "" {
			t.Errorf("%s: ggload %q, llama.cpp %+v", r.Mode, r.Ggload.Err, r.Llama)
		}
		// a cold process finds (almost) none of the file cached
		if r.ColdResident < 0 || r.ColdResident > 0.05 {
			t.Errorf("%s: %.1f%% of the file was cached when a process began", r.Mode, 100*r.ColdResident)
		}
		if !strings.Contains(r.Goal, "≤ 0.90× llama.cpp's") {
			t.Errorf("%s: verdict %q", r.Mode, r.Goal)
		}
		if r.Mode == "dio" && !strings.Contains(r.Goal, "the cold floor") {
			t.Errorf("dio: verdict %q", r.Goal)
		}
		// onto the CPU, ggload's process registers no GPU's backend;
		// llama.cpp's every one
		all := moduleBackends(rt)
		if r.Llama != nil && !slices.Equal(r.Llama.Backends, all) || slices.Contains(r.Ggload.Backends, "Vulkan") || !slices.Contains(r.Ggload.Backends, "CPU") {
			t.Errorf("%s: backends registered: ggload %v, llama.cpp %v; want the CPU's without a GPU's, and every one: %v", r.Mode, r.Ggload.Backends, r.Llama.Backends, all)
		}
	}
	// the baseline of ggload's rows is the idle process with the same
	// modules, which a GPU's backend does not weigh on
	if rep.BaselineCPURSS == 0 || rep.BaselineCPURSS > rep.BaselineRSS {
		t.Errorf("baselines: %d bytes with every module, %d with the CPU's and RPC's", rep.BaselineRSS, rep.BaselineCPURSS)
	}
	if !rep.Cold || strings.Join(modes, ",") != "none,mmap,dio,auto" || rep.Rates.Cold <= 0 || rep.Rates.ColdDepth < 1 {
		t.Fatalf("cold report: modes %v, %+v", modes, rep.Rates)
	}
	// a direct read's floor is the disk's; into fresh memory, the disk's
	// pass into fresh memory, which is no faster
	if r := rep.Rates; r.ReadDirect != r.Cold || r.ReadDirectFresh != r.ColdFresh || r.ColdFresh <= 0 || r.ColdFresh > r.Cold {
		t.Errorf("cold direct rates %+v: the cold pass's, and its pass into fresh memory", r)
	}
	// on a virtual machine whose host takes freed memory back, every
	// process is preceded by the memory it will take, faulted in
	if rep.FreePageReporting != bench.FreePageReporting() || rep.FreePageReporting != (rep.BackedMemory >= uint64(2*rep.Bytes)) {
		t.Errorf("free page reporting %v (here %v), %d bytes backed for a model of %d", rep.FreePageReporting, bench.FreePageReporting(), rep.BackedMemory, rep.Bytes)
	}

	// warm, direct reads onto the CPU fill fresh memory: their floor is
	// the file read with O_DIRECT into memory never touched, and the
	// disk gave at least as much into reused memory
	out, err = runCLI(t, "--size", "8MiB", "--runs", "1", "--modes", "dio", "--targets", "none", "--no-llama", "--json")
	if err != nil {
		t.Fatal(err)
	}
	rep = bench.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r := rep.Rates; r.DirectNote == "" && (r.ReadDirectFresh <= 0 || r.ReadDirect < r.ReadDirectFresh) {
		t.Errorf("direct rates %+v", r)
	} else if f := rep.Floors["dio/none"]; r.DirectNote == "" {
		// the CPU's bytes at the fresh rate: the tensors, a little less
		// than the file
		if n := f.S * r.ReadDirectFresh * 1e9; n < 0.9*float64(rep.Bytes) || n > 1.001*float64(rep.Bytes) {
			t.Errorf("dio/none floor %+v at %.2f GB/s covers %.0f bytes of a %d-byte model", f, r.ReadDirectFresh, n, rep.Bytes)
		}
	}
	// what direct reads copied out of bounce buffers is counted, and is
	// said where there was any
	if len(rep.Rows) != 1 || rep.Rows[0].Ggload.DirectCopied > uint64(rep.Bytes) {
		t.Fatalf("dio rows %+v: at most the model's %d bytes copied", rep.Rows, rep.Bytes)
	}
	var said bytes.Buffer
	rep.Rows[0].Ggload.DirectCopied = 3 << 20
	bench.Print(&said, rep)
	if !strings.Contains(said.String(), "dio→none: direct reads copied 3.00 MiB") {
		t.Errorf("the bounced bytes said as %q", said.String())
	}
	out, err = runCLI(t, "--size", "8MiB,32MiB", "--runs", "1", "--modes", "none", "--targets", "none", "--no-llama", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var all struct {
		Sizes []bench.Report   `json:"sizes"`
		Scale []bench.ScaleRow `json:"scale"`
	}
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(all.Sizes) != 2 || all.Sizes[1].Bytes <= all.Sizes[0].Bytes || len(all.Scale) != 1 {
		t.Fatalf("%s", out)
	}
	sc := all.Scale[0]
	if sc.Mode != "none" || sc.SPerGiB[0] <= 0 || sc.SPerGiB[1] <= 0 || sc.Growth <= 0 {
		t.Fatalf("scale row %+v", sc)
	}
	text, err := runCLI(t, "--size", "8MiB,32MiB", "--runs", "1", "--modes", "none", "--targets", "none", "--no-llama", "--no-back-memory")
	if err != nil || !strings.Contains(text, "growth") || !strings.Contains(text, "s/GiB") {
		t.Fatalf("%v\n%s", err, text)
	}
	if bench.FreePageReporting() && (!strings.Contains(text, "times vary with it") || strings.Contains(text, "were faulted in and freed")) {
		t.Errorf("--no-back-memory on a machine with free page reporting:\n%s", text)
	}
	for _, bad := range [][]string{
		{"bench", "m.gguf", "--size", "8MiB,32MiB"},
		{"bench", "--size", "8MiB,lots"},
		{"bench", "--http", "1GiB", "--size", "8MiB,32MiB"},
	} {
		if _, err := runCLI(t, bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// moduleBackends are the backends the modules of rt's set registered (the
// servers that earlier tests added are not a fresh process's).
func moduleBackends(rt *ggml.Runtime) []string {
	var out []string
	for _, b := range rt.Backends() {
		if !strings.Contains(b.Name(), "[") {
			out = append(out, b.Name())
		}
	}
	return out
}

// With --fit each load call fits first, on both sides: both run and say
// so.
func TestBenchFit(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out, err := runCLI(t, "--size", "16MiB", "--runs", "1", "--modes", "mmap", "--targets", "none", "--fit", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !rep.Fit || len(rep.Rows) != 1 {
		t.Fatalf("%+v", rep)
	}
	r := rep.Rows[0]
	if r.Ggload.Err != "" || r.Ggload.LoadS <= 0 || r.Llama == nil || r.Llama.Err != "" || r.Llama.LoadS <= 0 {
		t.Fatalf("ggload %+v, llama.cpp %+v", r.Ggload, r.Llama)
	}
}

// The hidden commands the bench runs in its children never panic on a missing
// argument or value.
func TestHiddenCommandArguments(t *testing.T) {
	for _, args := range [][]string{
		{loadChildCmd},
		{loadChildCmd, "--impl"},
		{loadChildCmd, "--impl", "other", "m.gguf"},
		{loadChildCmd, "--mode", "teleport", "m.gguf"},
		{loadChildCmd, "a.gguf", "b.gguf"},
		{decodeChildCmd},
		{decodeChildCmd, "--impl"},
		{decodeChildCmd, "--impl", "other", "m.gguf"},
		{decodeChildCmd, "--pp", "0", "m.gguf"},
		{decodeChildCmd, "a.gguf", "b.gguf"},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%v panicked: %v", args, r)
				}
			}()
			if _, err := runCLI(t, args...); err == nil {
				t.Errorf("%v accepted", args)
			}
		}()
	}
}

// bench --decode: ggload's and libllama's pp and tg on the same context
// options, with their logits identical.
func TestBenchDecode(t *testing.T) {
	path := modelFile(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Distinct: true})
	out, err := runCLI(t, "--decode", path, "--targets", "none", "--pp", "16", "--tg", "4", "--runs", "2", "--threads", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Target          string  `json:"target"`
		GgloadTG        float64 `json:"ggload_tg_tokens_per_s"`
		LlamaTG         float64 `json:"llama_tg_tokens_per_s"`
		LogitsIdentical bool    `json:"logits_identical"`
		Reused          int     `json:"graphs_reused_tg"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].Target != "none" || !rows[0].LogitsIdentical || rows[0].GgloadTG <= 0 || rows[0].LlamaTG <= 0 || rows[0].Reused == 0 {
		t.Fatalf("bench --decode: %s", out)
	}
	// each side in processes of its own, their peak memory beside
	out, err = runCLI(t, "--decode", "--processes", path, "--targets", "none", "--pp", "16", "--tg", "4", "--runs", "1", "--threads", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var procs []struct {
		LogitsIdentical bool    `json:"logits_identical"`
		GgloadPP        float64 `json:"ggload_pp_tokens_per_s"`
		LlamaPP         float64 `json:"llama_pp_tokens_per_s"`
		Processes       bool    `json:"processes"`
		GgloadRSS       uint64  `json:"ggload_peak_rss"`
		LlamaRSS        uint64  `json:"llama_peak_rss"`
	}
	if err := json.Unmarshal([]byte(out), &procs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(procs) != 1 || !procs[0].Processes || !procs[0].LogitsIdentical || procs[0].GgloadPP <= 0 || procs[0].LlamaPP <= 0 || procs[0].GgloadRSS == 0 || procs[0].LlamaRSS == 0 {
		t.Fatalf("bench --decode --processes: %s", out)
	}
}
